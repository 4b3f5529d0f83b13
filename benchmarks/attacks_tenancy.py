"""Attack row "tenant_matrix": bob's token with alice's values through every surface the server lists.

The matrix is generated (tests/support/tenancy.py, the same code `tests/test_tenant_matrix.py` runs): every
tool of `tools/list`, resource template and resource, prompt, and status-page route found in the real
app's routers, each argument naming a thread, resource, message, line, cursor, generation, phrase or
`as_of` given one of alice's values and one nobody holds, over real HTTP (the app in this process,
on a loopback port, as `om-mcp serve --transport http` runs it). It counts answers holding alice's data
(reads), her rows or bytes changed (changes), and answers to her values that differ from the answers to
nobody's (oracles; thread ids apart, which are one space for the server).

    .venv/bin/python benchmarks/attacks.py tenant_matrix
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent


def tenant_matrix() -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from support import tenancy  # the tests' own generator

    # As `om-mcp serve` has it: logging set up before the MCP server is built, so the SDK's own set-up
    # (a rich console at INFO, a line for each of the matrix's calls) does nothing.
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="om-matrix-") as tmp:
        tally, surfaces, unclassified = anyio.run(tenancy.run_matrix, Path(tmp))
    print(f"\n{tally.summary(surfaces)}")
    for label, found in (
        ("unclassified", unclassified),
        ("reads", tally.reads),
        ("changes", tally.changes),
        ("differ", tally.differences),
    ):
        for line in tenancy.lines(found, 5):
            print(f"  {label}: {line}")
