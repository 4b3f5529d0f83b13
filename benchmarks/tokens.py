"""How fast token counting is, cold and from the per-message cache, and the two routes to
a tokenizer no request waits for.

Corpus: every LoCoMo dev turn as a chat message (evaluation use, as its README
allows), topped up with Python stdlib source as tool results until it passes
1 MB. Prints figures only; run with `.venv/bin/python benchmarks/tokens.py`.

The routes, each measured in a fresh process (median of --route-runs):
  * estimate now, exact later: a byte estimate at append, the exact count settled in the
    background by tiktoken's o200k_base, built from litellm's rank file (what om-mcp did);
  * the prebuilt table (engine/o200k.py): opened, not built; counting in Python.
For each: time to the first exact count, the memory it keeps (RSS after, minus before), and
the counting rate on the chat messages (the appends' case) and on the tool outputs, with
an empty and with a warm piece cache.
"""

from __future__ import annotations

import json
import statistics
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from om_mcp.engine.tokens import TokenCounter  # noqa: E402

LOCOMO = Path("/work/shared/data/locomo/locomo_dev.json")
TARGET_BYTES = 1_200_000
CHUNK_CHARS = 2_000  # a tool result of a typical size
RUNS = 5


def locomo_messages() -> list[dict]:
    messages = []
    for sample in json.loads(LOCOMO.read_text()):
        conversation = sample["conversation"]
        first_speaker = conversation["speaker_a"]
        for key, turns in conversation.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for turn in turns:
                role = "user" if turn["speaker"] == first_speaker else "assistant"
                messages.append({"role": role, "parts": [{"type": "text", "text": turn["text"]}]})
    return messages


def stdlib_messages(budget: int) -> list[dict]:
    messages: list[dict] = []
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.glob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        for start in range(0, len(source), CHUNK_CHARS):
            if budget <= 0:
                return messages
            chunk = source[start : start + CHUNK_CHARS]
            budget -= len(chunk.encode())
            messages.append(
                {"role": "tool", "parts": [{"type": "tool-result", "tool_name": "read_file", "result": chunk}]}
            )
    return messages


def message_bytes(message: dict) -> int:
    return sum(len((p.get("text") or p.get("result") or "").encode()) for p in message["parts"])


def median_seconds(run) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    messages = locomo_messages()
    size = sum(message_bytes(m) for m in messages)
    messages += stdlib_messages(TARGET_BYTES - size)
    size = sum(message_bytes(m) for m in messages)
    whole_text = "\n".join(p.get("text") or p.get("result") for m in messages for p in m["parts"])

    counter = TokenCounter()
    start = time.perf_counter()
    counter.count_text("warm up")  # the first count builds the encoding
    load_seconds = time.perf_counter() - start

    results = [counter.count_message(m) for m in messages]
    caches = [cache for _, cache in results]
    total_tokens = counter.count_messages(messages)

    cold = median_seconds(lambda: [counter.count_message(m) for m in messages])
    cached = median_seconds(lambda: [counter.count_message(m, c) for m, c in zip(messages, caches)])
    text_tokens = counter.count_text(whole_text)
    one_text = median_seconds(lambda: counter.count_text(whole_text))

    print(f"tokenizer            {counter.name} ({counter.cache_key})")
    print(f"load time            {load_seconds * 1000:.0f} ms")
    print(f"corpus               {len(messages)} messages, {size / 1e6:.2f} MB of part text")
    print(f"tokens counted       {total_tokens:,} (count_messages, with overheads)")
    print(f"cold                 {cold * 1000:.1f} ms  {total_tokens / cold / 1e6:.2f} M tok/s  (median of {RUNS})")
    print(f"cached               {cached * 1000:.2f} ms  {total_tokens / cached / 1e6:.1f} M tok/s  (median of {RUNS})")
    print(f"cached/cold speed    {cold / cached:.0f}x")
    print(
        f"one count_text       {len(whole_text.encode()) / 1e6:.2f} MB -> {text_tokens:,} tokens"
        f" in {one_text * 1000:.1f} ms"
        f"  {text_tokens / one_text / 1e6:.2f} M tok/s"
    )


ROUTE = """
import json, sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
texts = json.load(open(sys.argv[2]))
chat, tools = texts["chat"], texts["tools"]
before = rss()
start = time.perf_counter()
if sys.argv[1] == "tiktoken":
    import base64, tiktoken
    from om_mcp.engine import o200k
    fields = o200k.bundled_rank_file().read_bytes().split()
    ranks = dict(zip(map(base64.b64decode, fields[0::2]), map(int, fields[1::2])))
    encoding = tiktoken.Encoding("o200k_base", pat_str=o200k.PATTERN, mergeable_ranks=ranks, special_tokens={})
    encoding._mergeable_ranks = {}
    del ranks, fields
    import gc; gc.collect()
    count = lambda text: len(encoding.encode_ordinary(text))
else:
    from om_mcp.engine.o200k import O200k
    count = O200k().count
count("warm up")
ready = time.perf_counter() - start
rates = []
for corpus in (chat, tools, chat, tools):
    t = time.perf_counter(); n = sum(count(x) for x in corpus); rates.append(n / (time.perf_counter() - t))
print(json.dumps({"ready": ready, "rss": rss() - before, "rates": rates}))
"""


def routes(runs: int) -> None:
    import subprocess
    import tempfile

    chat = [m["parts"][0]["text"] for m in locomo_messages()]
    tools = [m["parts"][0]["result"] for m in stdlib_messages(300_000)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"chat": chat, "tools": tools}, f)
    root = Path(__file__).resolve().parents[1]
    print(f"\nroutes (fresh process each, median of {runs}; {len(chat)} chat messages, {len(tools)} tool outputs)")
    print(
        f"  {'route':<34} {'first exact count':>17} {'memory kept':>12}   chat M tok/s (cold, warm)  tools (cold, warm)"
    )
    for name, label in (
        ("tiktoken", "estimate now, tiktoken exact later"),
        ("table", "prebuilt table (engine/o200k.py)"),
    ):
        found = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", ROUTE, name, f.name], capture_output=True, text=True, check=True, cwd=root
                ).stdout
            )
            for _ in range(runs)
        ]
        ready = statistics.median(r["ready"] for r in found) * 1000
        rss = statistics.median(r["rss"] for r in found)
        rates = [statistics.median(r["rates"][i] for r in found) / 1e6 for i in range(4)]
        print(
            f"  {label:<34} {ready:>14.0f} ms {rss:>8.1f} MiB   {rates[0]:>6.2f}, {rates[2]:>5.2f}"
            f"              {rates[1]:>5.2f}, {rates[3]:>5.2f}"
        )
    Path(f.name).unlink()


if __name__ == "__main__":
    main()
    routes(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
