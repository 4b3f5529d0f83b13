"""get_context fits its JSON to the budget from the stored counts: the newest messages that fit,
hardly fewer (the sizes it reckons err a few tokens high, never low), and the result is never
encoded to be measured."""

from __future__ import annotations

import json

import pytest
from support.mcp import call, connect, ok

from om_mcp.engine.tokens import get_token_counter
from om_mcp.server.output import compact

pytestmark = pytest.mark.anyio

SENTENCES = [
    "The billing service moved to the new region last week.",
    "Rollback steps are in the runbook, section four, with the database snapshot names.",
    "We agreed to keep the quarterly report short.",
    "Ana asked whether the museum trip is still on for Saturday morning, and who brings the tickets.",
]


async def fill(client, count: int) -> None:
    for start in range(0, count, 50):
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                {
                    "id": f"m{n}",
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": f"{SENTENCES[n % len(SENTENCES)]} (note {n})" * (1 + n % 3),
                }
                for n in range(start, min(start + 50, count))
            ],
        )


async def test_get_context_keeps_the_newest_messages_that_fit_and_hardly_fewer(make_server):
    counter = get_token_counter()
    async with connect(make_server(output_token_budget=4000)) as client:
        await fill(client, 120)
        everything = await ok(client, "get_context", thread_id="t1", max_tokens=1_000_000)
        assert len(everything["messages"]) == 120
        for max_tokens in (300, 700, 1500, 4000):
            text = await call(client, "get_context", thread_id="t1", max_tokens=max_tokens)
            assert counter.count_text(text) <= max_tokens
            assert text == compact(json.loads(text))  # assembled from its parts, as compact() writes it
            shown = json.loads(text)
            kept = len(shown["messages"])
            assert 0 < kept < 120
            assert shown["messages"] == everything["messages"][-kept:]  # the newest, in order
            assert shown["omitted_messages"] == 120 - kept
            # one more message (the newest one left out) would have come close to the budget
            one_more = {
                **shown,
                "messages": everything["messages"][-kept - 1 :],
                "omitted_messages": shown["omitted_messages"] - 1,
            }
            assert counter.count_text(compact(one_more)) > 0.9 * max_tokens, max_tokens


async def test_a_long_window_is_fitted_without_encoding_the_result_or_the_messages(make_server, monkeypatch):
    counter = get_token_counter()
    counted: list[str] = []
    original = counter.count_text

    def counting(text: str, *args, **kwargs):
        counted.append(text)
        return original(text, *args, **kwargs)

    async with connect(make_server(output_token_budget=8000)) as client:
        await fill(client, 400)
        monkeypatch.setattr(counter, "count_text", counting)
        shown = await ok(client, "get_context", thread_id="t1", max_tokens=2000)
        assert shown["omitted_messages"] > 100  # many messages were dropped ...
        assert not [t for t in counted if '"messages":[{' in t]  # ... and the result was never encoded
        assert not [t for t in counted if "(note " in t]  # nor any message's text: their stored counts did
        counted.clear()
        again = await ok(client, "get_context", thread_id="t1", max_tokens=2000)
    assert again == shown
    assert len(counted) <= 8  # the next turn sizes nothing again: the envelopes and system text are known
