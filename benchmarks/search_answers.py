"""Does a change to search keep its answers? The top 10 of every LoCoMo question, this checkout against another.

    python benchmarks/search_answers.py --compare PATH [--data PATH] [--limit 10]

Each checkout runs in a child of its own, on its own `benchmarks/search_lab.py`: LoCoMo's conversations are stored
as `benchmarks/search_lab.py` stores them (one resource per conversation, one thread per session),
and every question is searched through the lexical path of `recall` (parse, the store's candidates,
the ranking), in resource scope and in the scope of the thread holding its first evidence turn.
Prints, per scope, the questions whose top `--limit` differ (as sets, and in order) and each
checkout's evidence recall@10, then exits 1 when any set differs. Data: LoCoMo (Maharana et al.,
ACL 2024), CC BY-NC 4.0, evaluation use only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from locomo_retrieval import load
from search_lab import build, search
from pathlib import Path
conversations = load(Path(sys.argv[2]))
conn = build(conversations)
ids = {seq: mid for seq, mid in conn.execute("SELECT seq, id FROM messages")}
limit = int(sys.argv[3])
out = []
for conv in conversations:
    where = {m["id"]: thread for thread, messages in conv["threads"] for m in messages}
    for qa in conv["questions"]:
        evidence = [e for e in qa["evidence"] if e in where]
        thread = where[evidence[0]] if evidence else None
        row = {"q": qa["question"], "evidence": evidence}
        for scope, thread_id in (("resource", None), ("thread", thread)):
            if scope == "thread" and thread is None:
                continue
            ranked = search(conn, conv["id"], qa["question"], limit=limit, thread_id=thread_id)
            row[scope] = [ids[r.hit.seq] for r in ranked]
        out.append(row)
print(json.dumps(out))
"""


def answers(checkout: Path, data: Path, limit: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout / "benchmarks"), str(data), str(limit)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(done.stdout)


def recall(rows: list[dict], scope: str) -> float:
    shares = [
        len(set(r["evidence"]) & set(r[scope][:10])) / len(r["evidence"]) for r in rows if r["evidence"] and scope in r
    ]
    return sum(shares) / len(shares) if shares else 0.0


def main() -> int:
    sys.path.insert(0, str(HERE))
    from search_lab import _default_data

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, required=True, help="another checkout of om-mcp")
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    data = args.data or _default_data()
    this, other = answers(HERE.parent, data, args.limit), answers(args.compare.resolve(), data, args.limit)
    differ = 0
    for scope in ("resource", "thread"):
        pairs = [(a, b) for a, b in zip(this, other) if scope in a and scope in b]
        as_sets = sum(1 for a, b in pairs if set(a[scope]) != set(b[scope]))
        in_order = sum(1 for a, b in pairs if a[scope] != b[scope])
        differ += as_sets
        print(
            f"{scope:>8} scope: {len(pairs)} questions; top {args.limit} differ as sets {as_sets}, in order {in_order};"
            f" evidence recall@10 this {recall(this, scope):.4f}, compare {recall(other, scope):.4f}"
        )
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
