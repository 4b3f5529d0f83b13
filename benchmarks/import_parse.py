"""Parse time of the export importers on a generated export.

Usage: python benchmarks/import_parse.py [--messages 10000] [--per-thread 20] [--runs 5]

Writes a Claude-style and a ChatGPT-style `conversations.json` with the given
number of messages (about 600 characters each, like a chat turn), then times
`iter_conversations` over each (median of the runs, in fresh iterators) and
reports the file size, the rate, and the peak resident memory of a child
process that streams the file versus one that `json.load`s it whole.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "memory observation thread reflect token budget window context user assistant note plan "
    "index query schema retry timeout cache model export import stream parse"
).split()


def _text(i: int, n: int = 95) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def make_claude(path: Path, messages: int, per_thread: int) -> None:
    convs = []
    for c in range(messages // per_thread):
        msgs = []
        for k in range(per_thread):
            i = c * per_thread + k
            t = f"2025-01-{1 + c % 28:02d}T{k % 24:02d}:{k % 60:02d}:00.000000Z"
            text = _text(i)
            msgs.append(
                {
                    "uuid": f"m-{i:08d}",
                    "text": text,
                    "sender": "human" if k % 2 == 0 else "assistant",
                    "content": [
                        {"type": "text", "text": text, "start_timestamp": t, "stop_timestamp": t, "citations": []}
                    ],
                    "created_at": t,
                    "updated_at": t,
                    "attachments": [],
                    "files": [],
                }
            )
        convs.append(
            {
                "uuid": f"c-{c:06d}",
                "name": f"conversation {c}",
                "created_at": msgs[0]["created_at"],
                "updated_at": msgs[-1]["created_at"],
                "account": {"uuid": "a"},
                "chat_messages": msgs,
            }
        )
    path.write_text(json.dumps(convs))


def make_chatgpt(path: Path, messages: int, per_thread: int) -> None:
    convs = []
    for c in range(messages // per_thread):
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        base = 1.7e9 + c * 86400
        for k in range(per_thread):
            i = c * per_thread + k
            nid = f"n-{i:08d}"
            role = "user" if k % 2 == 0 else "assistant"
            mapping[parent]["children"].append(nid)
            mapping[nid] = {
                "id": nid,
                "parent": parent,
                "children": [],
                "message": {
                    "id": nid,
                    "author": {"role": role, "name": None, "metadata": {}},
                    "create_time": base + k * 30,
                    "update_time": None,
                    "content": {"content_type": "text", "parts": [_text(i)]},
                    "status": "finished_successfully",
                    "end_turn": role == "assistant",
                    "weight": 1.0,
                    "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {},
                    "recipient": "all",
                },
            }
            parent = nid
        convs.append(
            {
                "id": f"c-{c:06d}",
                "conversation_id": f"c-{c:06d}",
                "title": f"conversation {c}",
                "create_time": base,
                "update_time": base + per_thread * 30,
                "mapping": mapping,
                "current_node": parent,
                "moderation_results": [],
                "safe_urls": [],
            }
        )
    path.write_text(json.dumps(convs))


_CHILD = """
import json, sys
mode, source, path = sys.argv[1:4]
if mode == "stream":
    from om_mcp.importers import claude_export, chatgpt_export
    mod = claude_export if source == "claude" else chatgpt_export
    n = sum(len(t.messages) for t in mod.iter_conversations(path))
else:
    n = len(json.load(open(path)))
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork+exec.
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) // 1024)
"""


def _peak_mb(mode: str, source: str, path: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, source, str(path)], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--per-thread", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from om_mcp.importers import chatgpt_export, claude_export

    with tempfile.TemporaryDirectory() as tmp:
        for source, make, mod in (("claude", make_claude, claude_export), ("chatgpt", make_chatgpt, chatgpt_export)):
            path = Path(tmp) / f"{source}.json"
            make(path, args.messages, args.per_thread)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                count = sum(len(t.messages) for t in mod.iter_conversations(path))
                times.append(time.perf_counter() - start)
            med = statistics.median(times)
            size = path.stat().st_size / 1e6
            print(
                f"{source:8s} {count} messages, {size:.1f} MB: median {med * 1000:.0f} ms "
                f"({count / med:,.0f} msg/s, {size / med:.0f} MB/s); peak RSS stream "
                f"{_peak_mb('stream', source, path)} MB vs json.load {_peak_mb('load', source, path)} MB"
            )


if __name__ == "__main__":
    main()
