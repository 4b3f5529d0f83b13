"""`om-mcp show THREAD`: the thread's observation log (dates, message ranges), where the
agent was, its working memory and its recent messages."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_CONFIG, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", metavar="THREAD", nargs="?", help="the thread id")
    parser.add_argument("--messages", type=int, default=10, metavar="N", help="the N most recent messages (10)")
    view = parser.add_mutually_exclusive_group()
    view.add_argument(
        "--generations",
        action="store_true",
        help="every generation of the log (what the Reflector condensed), newest first",
    )
    view.add_argument(
        "--as-of", metavar="DATE", help="the log and working memory as they were then (ISO date or date-time, UTC)"
    )
    view.add_argument("--diff", type=int, metavar="N", help="what generation N changed against N-1")
    view.add_argument("--user", action="store_true", help="the person layer: lines remembered with --user")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code
    if not args.thread and not args.user:
        print("om-mcp show: give THREAD (or --user for the person layer)", file=sys.stderr)
        return EXIT_CONFIG

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        if args.user or args.as_of is not None or args.diff is not None:
            if args.user:
                report = await memory.user_layer()
            elif args.as_of is not None:  # an empty one is refused as unreadable, never read as "now"
                report = await memory.observations_at(args.thread, args.as_of)
            else:
                report = await memory.generation_diff(args.thread, args.diff)
            print_json(report) if args.json else show_view(report)
            return EXIT_OK
        report = await gather(memory, args.thread, args.messages, args.generations)
        if args.json:
            print_json(report)
        else:
            show(report)
        return EXIT_OK

    return run_memory(config, main)


async def gather(memory: Any, thread_id: str, messages: int, generations: bool) -> dict[str, Any]:
    from om_mcp.commands._view import thread_row
    from om_mcp.engine.errors import NotFound

    store = memory.store
    states = await store.thread_states(
        memory.config.observational_memory.scope, access=memory.access, thread_id=thread_id, limit=1
    )
    if not states:
        raise NotFound(f"unknown thread {thread_id!r}", field="thread")
    state = states[0]
    snap = await store.snapshot(state.record_key, thread_id)
    try:
        log = await memory.observations(thread_id, history=generations)
    except NotFound:
        log = None
    wm = memory.config.working_memory
    working = None
    if wm.enabled:
        owner = thread_id if wm.scope == "thread" else state.thread.resource_id
        working = {"scope": wm.scope, "of": owner, "text": await store.get_working_memory(wm.scope, owner)}
    recent = await memory.messages(thread_id, limit=messages) if messages > 0 else []
    return {
        **thread_row(state),
        "record_key": state.record_key,
        "current_task": snap.hints.current_task if snap else None,
        "suggested_response": snap.hints.suggested_response if snap else None,
        "observations": log,
        "working_memory": working,
        "recent_messages": [m.model_dump(mode="json") for m in recent],
    }


def _generations(log: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The generations to print: the history's (--generations), else the one active log; none when empty.
    A thread with no observations yet (every thread before a model runs) has no generation at all."""
    if not log:
        return []
    if "generations" in log:
        return [g for g in log["generations"] or [] if g.get("groups") or g.get("text")]
    if not (log.get("groups") or log.get("text")):
        return []
    return [{**log, "generation": log.get("generation", 0)}]


def show(r: dict[str, Any]) -> None:
    from om_mcp.commands._view import one_line, when
    from om_mcp.engine.text import message_text

    out = sys.stdout
    title = f" “{r['title']}”" if r["title"] else ""
    out.write(f"thread {r['thread']}{title} · resource {r['resource']} · {r['record_key']}\n")
    out.write(
        f"  created {when(r['created_at'])} · updated {when(r['updated_at'])} · {r['messages']:,} messages ·"
        f" {r['unobserved_tokens']:,} unobserved tokens · generation {r['generation']}\n"
    )
    last = r["last_cycle"]
    if last:
        out.write(
            f"  last cycle: {last['what']} {when(last['at'])}" + (f": {last['error']}" if last["error"] else "") + "\n"
        )
    log = r["observations"]
    generations = _generations(log)
    for g in generations:
        out.write(
            f"\nobservation log, generation {g['generation']} · {g['tokens']:,} tokens · {len(g['groups'])} groups\n"
        )
        out.write(_log(g["groups"]) + "\n")
    if not generations:
        out.write("\nobservation log: nothing observed yet\n")
    retired = (log or {}).get("retired") or []
    if retired:
        out.write(
            f"\nretired (the {len(retired)} most recent; recall's search finds them, restore --line brings one back)\n"
        )
        out.write(_retired(retired) + "\n")
    for label, key in (("current task", "current_task"), ("suggested response", "suggested_response")):
        if r[key]:
            out.write(f"\n{label}: {r[key]}\n")
    wm = r["working_memory"]
    if wm is not None:
        out.write(f"\nworking memory ({wm['scope']} {wm['of']}):\n{_indent(wm['text'] or '(empty)')}\n")
    if r["recent_messages"]:
        out.write(f"\nrecent messages ({len(r['recent_messages'])} of {r['messages']:,}):\n")
        for m in r["recent_messages"]:
            out.write(
                f"  {when(m['created_at'])}  {m['role']:<9} {m['id']}  {one_line(message_text(m['parts']), 90)}\n"
            )


def _log(groups: list[dict[str, Any]]) -> str:
    """Each group under its id and range, each line after its short id: `om-mcp forget --observation`
    and `om-mcp edit` take the short id alone, or the full `<group id>.<short id>`."""
    if not groups:
        return "  (empty)"
    out = []
    for group in groups:
        thread = f" · thread {group['thread_id']}" if group.get("thread_id") else ""
        where = f" · range {group['range']}" if group.get("range") else ""
        out.append(f"  ## group {group['id']} · {group['kind']}{where}{thread}")
        for line in group["lines"]:
            short = line["id"].rpartition(".")[2] if line["id"] else ""
            out.append(f"  {short:<6}  {line['text']}")
    return "\n".join(out)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _retired(groups: list[dict[str, Any]]) -> str:
    out = []
    for group in groups:
        by = f" · replaced by line {group['replaced_by']}" if group.get("replaced_by") else ""
        out.append(f"  ## {group['id']} · {group['reason']} by generation {group['retired_by']}{by}")
        for line in group["lines"]:
            if line["id"]:
                out.append(f"  {line['id']}  {line['text'].strip()}")
    return "\n".join(out)


def show_view(r: dict[str, Any]) -> None:
    """`show --as-of`, `--diff` and `--user`."""
    out = sys.stdout
    if "as_of" in r:
        generation = "nothing observed yet" if r["generation"] is None else f"generation {r['generation']}"
        out.write(f"{r['record_id']} as of {r['as_of']} · {generation} · {r['tokens']:,} tokens\n")
        out.write(_log(r["groups"]) + "\n")
        wm = r["working_memory"]
        if wm is not None:
            out.write(f"\nworking memory ({wm['scope']} {wm['of']}) then:\n{_indent(wm['text'] or '(empty)')}\n")
    elif "against" in r:
        out.write(f"{r['record_id']}: generation {r['generation']} against {r['against']} · {r['kept']} lines kept\n")
        for line in r["added"]:
            out.write(f"  + {line['text']}\n")
        for line in r["removed"]:
            why = f"  ({line['reason']}" + (f", by line {line['replaced_by']}" if line["replaced_by"] else "") + ")"
            out.write(f"  - {line['text']}{why if line['reason'] else ''}\n")
    else:
        state = "on" if r["enabled"] else "off ([observational_memory.user] enabled = false: no project sees it)"
        out.write(f"person layer ({r['resource_id']}): {state}\n")
        log = r["observations"]
        out.write((_log(log["groups"]) if log else "  (nothing remembered with --user yet)") + "\n")
        if r["working_memory"]:
            out.write(f"\nworking memory:\n{_indent(r['working_memory'])}\n")
