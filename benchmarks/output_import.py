"""Import cost of the CLI output library (what a command pays the first time it draws).

Usage: python benchmarks/output_import.py [--runs 9]

Each import runs in a fresh interpreter; prints the median milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CASES = {
    "om_mcp.commands._output (rich not loaded)": "import om_mcp.commands._output",
    "rich.progress": "import rich.progress",
    "rich.console + rich.table": "import rich.console, rich.table",
    "rich: progress + table + console": "import rich.progress, rich.table, rich.console",
    "tqdm (for comparison)": "import tqdm",
}
_PROBE = "import time; t = time.perf_counter(); exec({!r}); print((time.perf_counter() - t) * 1000)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    for label, statement in CASES.items():
        times = []
        for _ in range(args.runs):
            done = subprocess.run([sys.executable, "-c", _PROBE.format(statement)], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{label:45s} not installed")
                break
            times.append(float(done.stdout))
        else:
            print(f"{label:45s} median {statistics.median(times):6.1f} ms")


if __name__ == "__main__":
    main()
