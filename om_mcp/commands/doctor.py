"""`om-mcp doctor [--model] [--secrets]`: is everything in order?

Checks the configuration, whether Codex trusts the om-mcp hooks it has (it skips an
untrusted hook without a word), the database (ours, current schema, writable), its full
integrity (every page and index entry, both search indexes, the running totals),
and whether a model is configured for observation (each candidate of a fallback
list on its own line). No model is a WARN, not a failure: storing, context and
search work without one. Only `--model` touches the network: one small real call
to each of the Observer's candidates, each with its own result, latency and cost.
Exit 0 when no check fails (warnings included), 1 when one fails (2 bad config,
3 the database refused, with SQLite's own findings). On PostgreSQL the page-level check is the
server's (amcheck); doctor runs the store's own checks there. `--secrets` reads every
stored message, observation and working memory for what the privacy rules would keep
out (engine/stored_secrets.py) and says how to forget each one.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from om_mcp import logs
from om_mcp.commands.common import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_OK,
    add_config_arguments,
    load,
    run_async,
    run_memory,
)

PROBE = [
    {"role": "system", "content": "You are a health check. Answer with one word."},
    {"role": "user", "content": "Reply with the word OK."},
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        action="store_true",
        help="also make one real call to the Observer's model (network; costs a few tokens)",
    )
    parser.add_argument(
        "--secrets", action="store_true", help="also look for secrets already stored (keys, tokens, passwords)"
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return EXIT_CONFIG
    if config.log_level == "info":
        logs.configure("warning")
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool | None, detail: str) -> None:
        checks.append({"check": name, "result": "ok" if ok else "warn" if ok is None else "FAIL", "detail": detail})

    source = args.config or "defaults and OM_ variables"
    check("config", True, f"valid ({source}); scope {config.observational_memory.scope}")
    _hosts(check)
    code = _database(config, check)
    found: list[Any] = []
    if code == EXIT_OK:
        code = run_memory(config, lambda memory: _model(memory, args.model, check))
    if code == EXIT_OK and args.secrets:
        code = run_memory(config, lambda memory: _secrets(memory, check, found))
    _report(checks, args.json, found if args.secrets else None)
    if code != EXIT_OK:
        return code
    return EXIT_FAILED if any(c["result"] == "FAIL" for c in checks) else EXIT_OK


def _hosts(check: Any) -> None:
    """What setup wrote and a host does not act on (Codex runs a hook only once trusted, and says nothing
    of one it skips): each host's own check, when it has one."""
    import os
    from pathlib import Path

    from om_mcp.hosts.setup import HOSTS, Place

    place = Place(home=Path(os.environ.get("HOME") or Path.home()))
    for host in HOSTS.values():
        found = host.doctor(place) if host.doctor is not None else None
        if found is not None:
            ok, detail = found
            check(f"{host.name} hooks", True if ok else None, detail)


def _database(config: Any, check: Any) -> int:
    from om_mcp.store.errors import DatabaseRefused
    from om_mcp.store.local import admin, connect, on_read_only_filesystem

    if config.db_url is not None:
        return run_async(lambda: _postgres(config.db_url, check))
    path = config.db_path
    if not path.exists():
        check("database", None, f"none yet at {path} (created on first use)")
        return EXIT_OK
    try:
        conn = connect(path)
    except DatabaseRefused as error:
        check("database", False, str(error))
        for problem in admin.raw_integrity(str(path)):
            check("integrity", False, problem)
        return EXIT_DATABASE
    try:
        schema = admin.schema_version(conn)
        if on_read_only_filesystem(path):
            check("database", True, f"{path}: ours, schema {schema}, on a read-only filesystem (opened read-only)")
        elif (refusal := admin.write_refusal(conn)) is not None:
            check("database", False, f"{path} cannot be written now: {refusal}")
        else:
            check("database", True, f"{path}: ours, schema {schema}, writable")
        started = time.monotonic()
        problems = admin.snapshot_integrity(conn)
        took = time.monotonic() - started
        index = [p for p in problems if "search index" in p or "fts" in p.lower()]
        totals = [p for p in problems if "totals" in p]
        pages = [p for p in problems if p not in index and p not in totals]
        check("integrity", not pages, "; ".join(pages[:5]) or f"full check passed ({took:.2f} s)")
        check("search index", not index, "; ".join(index) or "in step with the messages")
        check("running totals", not totals, "; ".join(totals) or "unobserved-token totals match the messages")
    finally:
        conn.close()
    return EXIT_OK


async def _postgres(url: str, check: Any) -> int:
    """The store's own checks on a PostgreSQL database; its pages are PostgreSQL's business
    (amcheck, pg_dump), not ours."""
    from om_mcp.store import open_store
    from om_mcp.store.errors import DatabaseRefused, StoreUnavailable

    try:
        store = await open_store(url)
    except (DatabaseRefused, StoreUnavailable) as error:
        check("database", False, str(error))
        return EXIT_DATABASE
    try:
        stats = await store.stats()
        check("database", True, f"{stats.path}: ours, schema {stats.schema_version}; vectors {stats.vectors}")
        started = time.monotonic()
        problems = await store.integrity()
        took = time.monotonic() - started
    finally:
        await store.close()
    totals = [p for p in problems if "totals" in p]
    index = [p for p in problems if p not in totals]
    check("search index", not index, "; ".join(index) or f"in step with the messages ({took:.2f} s)")
    check("running totals", not totals, "; ".join(totals) or "unobserved-token totals match the messages")
    return EXIT_OK


async def _model(memory: Any, call: bool, check: Any) -> int:
    from om_mcp.commands._view import model_state

    state = await model_state(memory)
    if not state["enabled"]:
        check("model", None, "observation is off (observational_memory.enabled = false)")
        return EXIT_OK
    detail = f"{state['observer']}" + (f"; {state['reason']}" if state["reason"] else "")
    # No model is a supported mode (messages stay raw until one is there): a warning, never a failure.
    check("model", True if state["model_ready"] else None, detail if state["model_ready"] else f"not ready: {detail}")
    router = memory.observation.observer.router
    candidates = _candidates(router)
    if len(candidates) > 1 and not memory.observation.injected_client:
        from om_mcp.models.readiness import check_each

        for n, (_, ready) in enumerate(check_each(candidates), 1):
            check(f"model {n}", True if ready.ready else None, ready.reason)
    if call:
        await _call(router, candidates, check)
    return EXIT_OK


def _candidates(router: Any) -> list[Any]:
    """Every target the Observer may call: the fallback list, or each size tier."""
    from om_mcp.config.models import ModelTarget

    if not router.by_size:
        return list(router.choice)
    return [e if isinstance(e, ModelTarget) else ModelTarget(model=e) for e in router.choice.up_to.values()]


async def _call(router: Any, candidates: list[Any], check: Any) -> None:
    """One real call to each enabled candidate, each reported on its own line."""
    from om_mcp.models import ModelError
    from om_mcp.models.router import probe

    enabled = [t for t in candidates if t.enabled]
    if not enabled:
        check("model call", False, f"no enabled model in {router.describe()}")
        return
    for n, target in enumerate(enabled, 1):
        name = "model call" if len(enabled) == 1 else f"model call {n}"
        one = router.only(target)  # metered like every call: a cap holds for doctor's calls too
        token = probe.set(True)  # asked for explicitly: try the model even if its breaker is open
        started = time.monotonic()
        try:
            done = await one.complete(PROBE, input_tokens=20)
        except ModelError as error:
            check(name, False, f"{target.model} failed after {time.monotonic() - started:.2f} s: {error}")
            continue
        finally:
            probe.reset(token)
        took = time.monotonic() - started
        usage = done.usage
        cost = f", ${usage.cost:.6f}" if usage.cost is not None else ", cost unknown"
        check(
            name,
            True,
            f"{done.model} answered {done.text.strip()[:20]!r} in {took:.2f} s"
            f" ({usage.input_tokens} tokens in, {usage.output_tokens} out{cost})",
        )


async def _secrets(memory: Any, check: Any, found: list[Any]) -> int:
    from om_mcp.engine.stored_secrets import find_stored_secrets

    found += await find_stored_secrets(memory)
    rules = sorted({rule for f in found for rule in f.rules})
    detail = f"{len(found)} stored values hold secrets ({', '.join(rules)}): forget them, below" if found else "none"
    check("secrets", not found, detail)
    return EXIT_OK


def _report(checks: list[dict[str, Any]], as_json: bool, secrets: list[Any] | None = None) -> None:
    from om_mcp.commands._output import print_json, print_table

    if as_json:
        report: dict[str, Any] = {"ok": not any(c["result"] == "FAIL" for c in checks), "checks": checks}
        if secrets is not None:
            report["secrets"] = [f.as_dict() for f in secrets]
        print_json(report)
        return
    print_table(checks, ["check", "result", "detail"], out=sys.stdout)
    for finding in secrets or []:
        where = f"{finding.where} {finding.ref}" + (f" in thread {finding.thread_id}" if finding.thread_id else "")
        rules = ", ".join(f"{rule} x{n}" for rule, n in finding.rules.items())
        sys.stdout.write(f"  {where}: {rules}\n    remove: {finding.remove}\n")
