"""`om-mcp reflect THREAD`: condense the thread's observation log into a new generation now.
Exit codes as `observe`."""

from __future__ import annotations

import argparse

from om_mcp.commands import observe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    observe.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return observe.run(args, op="reflect")
