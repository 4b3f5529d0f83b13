"""`turn_latency.py`'s turns in this checkout beside another one, one turn of each in turn, so the
load of a shared machine falls on both alike (a change's cost, where two separate runs of
`turn_latency.py` differ by more than the change).

    .venv/bin/python benchmarks/turn_ab.py --other /path/to/checkout/.venv/bin/om-mcp [--turns 600]
        [--modes off,buffered] [--delay 2]

For each mode, two servers over stdio (this checkout's `om-mcp serve` and the other's, each on
its own database and HOME, both pointed at one fake model), the same conversation: each turn,
`append_messages` then `get_context`, goes to both, which one first alternating. Prints per
mode and side the p50 / p90 / p99 of a turn's round trip and the ratios this / other (within
1.10: the change costs under 10 %).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from stdio_client import StdioServer
from turn_latency import conversation, percentile, server_env, start_fake_llm, turn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", required=True, help="the other checkout's om-mcp (its .venv/bin/om-mcp)")
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--modes", default="off,buffered")
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--message-tokens", type=int, default=10000)
    args = parser.parse_args()
    this = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "om-mcp")
    workdir = Path(tempfile.mkdtemp(prefix="om-turn-ab-"))
    model, port = start_fake_llm(args.delay, workdir / "seen.txt", workdir / "model.log")
    try:
        print(f"{args.turns} turns per mode and side; round trip in ms")
        print(f"{'mode':<10} {'side':<6} {'p50':>7} {'p90':>7} {'p99':>7}")
        for mode in args.modes.split(","):
            servers = {}
            for side, script in (("this", this), ("other", args.other)):
                folder = workdir / mode / side
                folder.mkdir(parents=True)
                env = server_env(folder, port, args.message_tokens)
                if mode == "off":
                    env["OM_OBSERVATIONAL_MEMORY__ENABLED"] = "false"
                db = folder / "memory.db"
                servers[side] = StdioServer(
                    db, env, name="turn-ab", stderr=folder / "stderr.log", command=[script, "serve", "--db", str(db)]
                )
            times: dict[str, list[float]] = {side: [] for side in servers}
            try:
                for server in servers.values():  # as turn_latency.py warms up
                    server.tool(
                        "append_messages", thread_id="w", resource_id="w", messages=[{"role": "user", "content": "hi"}]
                    )
                    if mode != "off":
                        server.tool("observe", thread_id="w", resource_id="w")
                for index, message in enumerate(conversation(args.turns)):
                    order = list(servers) if index % 2 == 0 else list(reversed(servers))
                    for side in order:
                        times[side].append(turn(servers[side], message)[0] * 1000)
            finally:
                for server in servers.values():
                    server.stop()
            figures = {side: [percentile(t, q) for q in (0.5, 0.9, 0.99)] for side, t in times.items()}
            for side, (p50, p90, p99) in figures.items():
                print(f"{mode:<10} {side:<6} {p50:>7.1f} {p90:>7.1f} {p99:>7.1f}")
            ratios = [a / b for a, b in zip(figures["this"], figures["other"])]
            print(f"{mode:<10} {'ratio':<6} " + " ".join(f"{r:>7.2f}" for r in ratios))
    finally:
        model.terminate()


if __name__ == "__main__":
    main()
