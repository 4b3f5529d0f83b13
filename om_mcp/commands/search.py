"""`om-mcp search QUERY [--resource R]`: messages and observations ranked as `recall` ranks them.

Without --resource (or --thread) every resource is searched: the sessions the
hooks record live under their project's path, not under the default resource,
and a search that silently looked only there found nothing.

The ranking fuses messages and observation groups, and a busy memory has many
more message hits than groups, so a list cut by score alone would be messages
only. The view keeps both: up to half of `--limit` goes to observations (the
rest to messages, and a kind with fewer hits leaves its share to the other),
each kind best first. A retired observation (no longer in the log: a reflection
dropped, merged or superseded it, or it was corrected) says so, and every
observation shows its group id, which `restore --line` and `forget --observation` take."""

from __future__ import annotations

import argparse
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, add_config_arguments, fail, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY", help="words to look for (any text is safe)")
    parser.add_argument(
        "--resource", metavar="R", help="whose memory (default: every resource; hook sessions are under their project)"
    )
    parser.add_argument("--thread", metavar="T", help="only this thread")
    parser.add_argument(
        "--limit", type=int, default=20, metavar="N", help="at most N results, up to half of them observations (20)"
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json, print_table
        from om_mcp.commands._view import one_line, when
        from om_mcp.engine.search.retrieval import FTS_HITS

        resource = args.resource
        if args.thread:
            thread = await memory.thread(args.thread)
            if thread is None:
                return fail(f"unknown thread {args.thread!r}", EXIT_NOT_FOUND)
            resource = resource or thread.resource_id
        known = [r.id for r in await memory.store.list_resources()]
        if resource is not None and resource not in known:
            return fail(f"unknown resource {resource!r}", EXIT_NOT_FOUND)
        found: list[tuple[str, Any]] = []
        for each in [resource] if resource is not None else known:
            # Every fused hit (the message hits the index ranks, and the groups), so both kinds can be shown.
            hits = await memory.retrieval.search(each, args.query, thread_id=args.thread, limit=FTS_HITS + args.limit)
            found.extend((each, hit) for hit in hits)
        found = shown(found, args.limit)
        if args.json:
            print_json([{"resource_id": owner, **hit.model_dump(mode="json")} for owner, hit in found])
        else:
            print_table(
                [
                    {
                        "score": r.score,
                        "resource": owner,
                        "thread": r.thread_id,
                        "id": r.id if r.source == "observation" else r.message_id,
                        "kind": kind(r),
                        "date": when(r.created_at),
                        "text": one_line(r.snippet, 90),
                    }
                    for owner, r in found
                ],
                ["score", "resource", "thread", "id", "kind", "date", "text"],
            )
        return EXIT_OK

    return run_memory(config, main)


def shown(found: list[tuple[str, Any]], limit: int) -> list[tuple[str, Any]]:
    """Observations first, then messages, each best first: up to half the slots each, the rest to whichever
    kind has more."""
    ranked = sorted(found, key=lambda pair: -pair[1].score)
    observations = [p for p in ranked if p[1].source == "observation"]
    messages = [p for p in ranked if p[1].source != "observation"]
    share = min(len(observations), max(limit // 2, limit - len(messages)))
    return observations[:share] + messages[: limit - share]


def kind(result: Any) -> str:
    if result.source != "observation":
        return result.role
    if result.retired:
        return f"observation, RETIRED ({result.retired} by generation {result.retired_by})"
    return "observation"
