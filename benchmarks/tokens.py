"""How fast token counting is, cold and from the per-message cache.

Corpus: every LoCoMo dev turn as a chat message (evaluation use, as its README
allows), topped up with Python stdlib source as tool results until it passes
1 MB. Prints figures only; run with `.venv/bin/python benchmarks/tokens.py`.
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


if __name__ == "__main__":
    main()
