"""`om-mcp status`: the database, what it holds, whether observation can run, the work
pending, and the most recent threads with their last cycle. No network."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands._output import print_json, print_table
from om_mcp.commands._view import THREAD_COLUMNS, count, model_state, paused_line, thread_row, thread_table_rows
from om_mcp.commands.common import EXIT_CODES, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=10, metavar="N", help="show the N most recent threads (10)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        report = await gather(memory, args.threads)
        if args.json:
            print_json({**report, "threads": [thread_row(s) for s in report["threads"]]})
        else:
            show(report)
        return EXIT_OK

    return run_memory(config, main)


async def gather(memory: Any, threads: int) -> dict[str, Any]:
    store, om = memory.store, memory.config.observational_memory
    stats = await store.stats()
    pending = await store.pending_records()
    limits = memory.observation.limits
    return {
        "database": {
            "path": stats.path,
            "bytes": stats.bytes,
            "wal_bytes": stats.wal_bytes,
            "schema_version": stats.schema_version,
        },
        "counts": {
            "resources": stats.resources,
            "threads": stats.threads,
            "messages": stats.messages,
            "observation_groups": stats.groups,
            "buffered_chunks": stats.chunks,
            "events": stats.events,
        },
        "resources": [
            {"id": r.id, "threads": r.threads, "messages": r.messages, "updated_at": r.updated_at}
            for r in await store.list_resources()
        ],
        "model": await model_state(memory),
        "pending": {
            "unobserved_tokens": stats.pending_tokens,
            "records": len(pending),
            "records_with_buffered_chunks": sum(1 for _, _, chunks in pending if chunks),
            "observe_at": limits.message_tokens,
            "reflect_at": limits.observation_tokens,
            "scope": om.scope,
            "observation_enabled": om.enabled,
        },
        "spend": (await memory.observation.budget.state()).as_dict(),
        "redactions": await store.redaction_counts(memory.access),
        "forgotten": {
            **await store.forgotten_summary(memory.access),
            "erase_pending_since": await store.erase_pending(),
        },
        "threads": await store.thread_states(om.scope, access=memory.access, limit=threads),
    }


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _spend(spend: dict[str, Any]) -> str:
    from om_mcp.engine.budget import money

    def amount(period: dict[str, Any]) -> str:
        unpriced = f", {period['unpriced_calls']} without a price" if period["unpriced_calls"] else ""
        return f"{money(period['usd'])} and {period['tokens']:,} tokens in {count(period['calls'], 'call')}{unpriced}"

    caps = spend["caps"]
    limits = ", ".join(
        f"{key.replace('_', ' ')} {money(v) if key.endswith('usd') else f'{v:,}'}" for key, v in caps.items()
    )

    def extra(period: dict[str, Any]) -> str:
        said = [
            f"{period[key]:,} {label}"
            for key, label in (
                ("reserved_tokens", "tokens reserved by calls in flight"),
                ("abandoned_calls", "abandoned (counted at their estimate)"),
                ("refused_calls", "refused (over a cap)"),
            )
            if period.get(key)
        ]
        return f" ({', '.join(said)})" if said else ""

    line = f"today {amount(spend['today'])}{extra(spend['today'])}; this month {amount(spend['this_month'])}"
    line += f"; caps: {limits}" if caps else "; no caps ([observational_memory.budget])"
    return line


def show(report: dict[str, Any]) -> None:
    db, counts, model, pending = report["database"], report["counts"], report["model"], report["pending"]
    out = sys.stdout
    wal = f", WAL {_size(db['wal_bytes'])}" if db["wal_bytes"] else ""
    out.write(f"database  {db['path']} ({_size(db['bytes'])}{wal}, schema {db['schema_version']})\n")
    out.write(
        "memory    "
        + " · ".join(
            count(counts[k], word)
            for k, word in (
                ("resources", "resource"),
                ("threads", "thread"),
                ("messages", "message"),
                ("observation_groups", "observation group"),
                ("events", "event"),
            )
        )
        + "\n"
    )
    if not model["enabled"]:
        state = "off (observational_memory.enabled = false)"
    elif paused := paused_line(report["spend"]):
        state = f"{paused} (model {model['observer']})"
    elif model["model_ready"]:
        state = f"ready: {model['observer']}" + (
            f" (reflector {model['reflector']})" if model["reflector"] != model["observer"] else ""
        )
    else:
        state = f"NOT READY ({model['observer']}): {model['reason']}"
    out.write(f"model     {state}\n")
    out.write(
        f"pending   {pending['unobserved_tokens']:,} unobserved tokens in {count(pending['records'], 'record')}"
        f" ({pending['records_with_buffered_chunks']} with buffered observations); scope {pending['scope']},"
        f" observe at {pending['observe_at']:,}, reflect at {pending['reflect_at']:,}\n"
    )
    out.write(f"spend     {_spend(report['spend'])}\n")
    redactions = report["redactions"]
    if redactions:
        rules = ", ".join(f"{rule} {n:,}" for rule, n in redactions.items())
        out.write(f"privacy   {sum(redactions.values()):,} redactions kept out of stored messages: {rules}\n")
    forgotten = report["forgotten"]
    if forgotten["tombstones"] or forgotten["erase_pending_since"]:
        kept = sum(forgotten["tombstones"].values())
        line = f"forgotten {kept:,} tombstones; {forgotten['refused']:,} forgotten messages refused since"
        if forgotten["erase_pending_since"]:
            line += (
                f"\n          ERASE PENDING since {forgotten['erase_pending_since']}: a reader held an older snapshot,"
                " so old pages of the file may still hold forgotten text; run `om-mcp forget --finish`"
            )
        out.write(line + "\n")
    if report["threads"]:
        out.write("\n")
        print_table(thread_table_rows(report["threads"]), THREAD_COLUMNS)
