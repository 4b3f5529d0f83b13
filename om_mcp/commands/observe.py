"""`om-mcp observe THREAD`: observe the thread's unobserved messages now (a cycle at a time
until none are left), with a progress bar on a terminal. `reflect` shares this module.

Exit codes: 0 done, or nothing to do; 1 a cycle failed or no model can run (the
messages stay unobserved); 2 observation is off in the configuration; 4 no such thread.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_FAILED, EXIT_OK, add_config_arguments, prepare, run_memory

ENDS = ("data-om-observation-end", "data-om-activation")
NOTHING_TO_DO = ("no unobserved messages", "nothing to observe", "no observations to reflect", "another process is")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", metavar="THREAD", help="the thread id")
    parser.add_argument("--instruction", help="extra guidance for the model, for this run only")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace, op: str = "observe") -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json, progress
        from om_mcp.engine.errors import NotFound

        if await memory.thread(args.thread) is None:
            raise NotFound(f"unknown thread {args.thread!r}", field="thread")
        state = await memory.status(args.thread)
        windows = state.windows.active
        total = windows.messages.tokens if op == "observe" else windows.observations.tokens
        verb = "observing" if op == "observe" else "reflecting"
        with progress(total or None, f"{verb} {args.thread}") as advance, memory.events.collect() as emitted:

            async def on_event(event: dict[str, Any]) -> None:
                if event["type"] in ENDS and not event.get("retrying"):
                    advance(_tokens_in(event))

            memory.events.listeners.append(on_event)
            try:
                call = memory.observe if op == "observe" else memory.reflect
                outcome = await call(args.thread, instruction=args.instruction)
            finally:
                memory.events.listeners.remove(on_event)
        # Buffered chunks are activated first (no model call): they count as observed too.
        ends = [e for e in emitted if e["type"] in ENDS and not e.get("retrying")]
        ran = outcome.ran or bool(ends)
        report = {
            "thread_id": args.thread,
            "operation": op,
            "ran": ran,
            "cycles": len(ends),
            "tokens_in": sum(_tokens_in(e) for e in ends),
            "tokens_out": sum(e.get("observation_tokens") or 0 for e in ends),
            "seconds": round(sum(e.get("duration_ms") or 0 for e in ends) / 1000, 2),
            "cost": _cost(ends),
            "reason": None if ran else outcome.reason,
            "error": outcome.error,
        }
        ok = outcome.error is None and (ran or (outcome.reason or "").startswith(NOTHING_TO_DO))
        if args.json:
            print_json(report)
        elif ran:
            cost = f", ${report['cost']:.4f}" if report["cost"] is not None else ""
            print(
                f"{'observed' if op == 'observe' else 'reflected'} {report['tokens_in']:,} tokens into"
                f" {report['tokens_out']:,} tokens of observations in {report['cycles']} cycle"
                f"{'s' if report['cycles'] != 1 else ''} ({report['seconds']:.1f} s{cost})"
            )
        else:
            print(f"om-mcp: {op}: {outcome.error or outcome.reason}", file=sys.stderr)
        return EXIT_OK if ok else EXIT_FAILED

    return run_memory(config, main)


def _tokens_in(event: dict[str, Any]) -> int:
    return int(event.get("tokens_observed") or event.get("tokens_activated") or 0)


def _cost(events: list[dict[str, Any]]) -> float | None:
    costs = [(e.get("usage") or {}).get("cost") for e in events]
    known = [c for c in costs if isinstance(c, (int, float))]
    return round(sum(known), 6) if known else None
