"""The caller's access as a type: every operation of `Memory` works within the resources its caller
may touch (`memory.with_access(...)`), and another tenant's thread, message, line, generation or
phrase is answered exactly as one nobody holds. What the first attack of issue 33 did, at the engine:
`forget_match` on the caller's own thread previewed and deleted every tenant's messages, and a phrase
only another tenant's title or working memory held answered differently from one nobody held.

The same promises over real HTTP, for every tool, resource and page route, are the generated matrix
in test_tenant_matrix.py.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
from support.backends import location
from support.engine import Memory, config

from om_mcp.engine import EVERY_RESOURCE, NO_RESOURCE, Access, EngineError, InputError

pytestmark = pytest.mark.anyio

ALPHA = "quokka-alpha-7f3e"  # in alice's message only
TITLED = "wombat-title-91c2"  # in alice's title only
NOTED = "numbat-memory-5d0a"  # in alice's working memory only
NOBODY = "platypus-nobody-0b6e"


async def planted() -> Memory:
    mem = await Memory.open(config(scope="resource"), db_path=location())
    await mem.append_messages("ta", [{"id": "a1", "role": "user", "content": f"my {ALPHA} plan"}], "alice")
    await mem.update_thread("ta", title=f"about {TITLED}")
    await mem.update_working_memory("ta", f"# Notes\n- {NOTED}")
    await mem.remember(f"alice likes {ALPHA}", thread_id="ta")
    await mem.append_messages("tb", [{"id": "b1", "role": "user", "content": "bob's own words"}], "bob")
    return mem


async def answer(call) -> str:
    """What a call answers, as text: its error (field and words) or its result."""
    try:
        return repr(await call)
    except EngineError as error:
        return f"{type(error).__name__}({error.field}): {error}"


def same(one: str, value: str, other: str, nobody: str) -> None:
    assert one.replace(value, "<V>") == other.replace(nobody, "<V>"), (one, other)


def test_access_is_a_value_of_its_own():
    assert EVERY_RESOURCE.allows("anything") and not NO_RESOURCE.allows("anything")
    assert Access.to(["alice"]).only == "alice" and Access.to(["a", "b"]).only is None
    assert Access.to(["alice"]) == Access.to(["alice"])  # hashable, equal by what it grants
    with pytest.raises(ValueError):
        Access(frozenset({"alice"}), every_resource=True)
    assert EVERY_RESOURCE.describe() == "every resource" and NO_RESOURCE.describe() == "nothing"


async def test_forget_by_phrase_stays_within_the_callers_resources():
    mem = await planted()
    bob = mem.with_access(Access.to(["bob"]))
    for phrase in (ALPHA, TITLED, NOTED):
        for apply in (False, True):
            theirs = await answer(bob.control.forget_match(phrase, thread_id="tb", apply=apply))
            nobodys = await answer(bob.control.forget_match(NOBODY, thread_id="tb", apply=apply))
            same(theirs, phrase, nobodys, NOBODY)
            assert theirs.startswith("NotFound(match): nothing stored holds")
    # Nothing of alice's went: her message, title, working memory and remembered line are all there.
    assert f"my {ALPHA} plan" in repr(await mem.messages("ta"))
    assert (await mem.thread("ta")).title == f"about {TITLED}"
    assert NOTED in (await mem.get_working_memory("ta")).memory
    assert ALPHA in (await mem.observations("ta"))["text"]
    # The owner's forget still reaches every resource.
    done = await mem.control.forget_match(ALPHA)
    assert done.messages == 1 and done.lines == 1
    await mem.close()


async def test_another_tenants_ids_read_as_ids_nobody_holds():
    mem = await planted()
    bob = mem.with_access(Access.to(["bob"]))
    line = re.search(r"\b([0-9a-f]{16}\.[0-9a-f]{6})\b", repr(await mem.observations("ta")))
    assert line is not None
    line_id = line.group(1)
    pairs = [
        (lambda v: bob.control.forget_message("tb", v), "a1", "zz9"),
        (lambda v: bob.control.forget_observation(v, "tb"), line_id, "0123456789abcdef.abcdef"),
        (lambda v: bob.control.forget_observation(v), line_id, "0123456789abcdef.abcdef"),
        (lambda v: bob.control.forget_observation(v), line_id.split(".")[1], "abcdef"),
        (lambda v: bob.control.edit_observation(v, "mine now"), line_id, "0123456789abcdef.abcdef"),
        (lambda v: bob.control.restore_line(v), line_id, "0123456789abcdef.abcdef"),
        (lambda v: bob.observations(resource_id=v), "alice", "nobody"),
        (lambda v: bob.threads(v), "alice", "nobody"),
        (lambda v: bob.resource_working_memory(v), "alice", "nobody"),
        (lambda v: bob.append_messages("new", [{"role": "user", "content": "x"}], v), "alice", "nobody"),
    ]
    for call, theirs, nobodys in pairs:
        same(await answer(call(theirs)), theirs, await answer(call(nobodys)), nobodys)
    # A thread id is one space for the server: another tenant's reads as unknown, and is not taken over.
    assert await bob.thread("ta") is None
    for call in (
        bob.get_context("ta"),
        bob.messages("ta"),
        bob.status("ta"),
        bob.update_thread("ta", title="mine"),
        bob.delete_thread("ta"),
        bob.control.restore_generation("ta", 0),
        bob.remember("x", thread_id="ta"),
    ):
        assert await answer(call) == "NotFound(thread_id): unknown thread 'ta'"
    taken = await answer(bob.append_messages("ta", [{"role": "user", "content": "x"}]))
    assert taken.startswith("InputError(thread_id): 'ta' is already in use on this server")
    assert f"my {ALPHA} plan" in repr(await mem.messages("ta"))
    await mem.close()


async def test_what_spans_every_resource_is_the_owners_alone():
    mem = await planted()
    bob = mem.with_access(Access.to(["bob"]))
    for call in (bob.backup("x.db"), bob.user_layer(), bob.export_to(None)):
        with pytest.raises(InputError):
            await call
    assert mem.with_access(EVERY_RESOURCE) is mem and mem.with_access(Access.to(["bob"])) is bob
    with pytest.raises(PermissionError):  # a view never widens itself
        bob.with_access(EVERY_RESOURCE)
    nothing = mem.with_access(NO_RESOURCE)
    assert await answer(nothing.get_context("new")) == (
        "InputError(resource_id): resource 'default' is not allowed for this token (it may use: nothing)"
    )
    await mem.close()


async def test_a_tenants_client_is_never_asked_to_observe_anyones_conversation(make_config):
    """The `sampling` model runs a cycle's prompt on a connected client that offers sampling: any
    record's, any tenant's. Only a caller that reaches every resource lends its client; before, bob's
    client was shown alice's conversation when her thread was observed."""
    from contextlib import asynccontextmanager

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import CreateMessageResult, TextContent
    from support.mcp import ok
    from test_http_security import ADMIN, ALICE, BOB, bearer, serving

    seen: dict[str, list[str]] = defaultdict(list)

    def sampler(who: str):
        async def answer(context, params):
            seen[who].append(" ".join(getattr(m.content, "text", "") for m in params.messages))
            text = "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) heard it\n</observations>"
            return CreateMessageResult(role="assistant", model="host", content=TextContent(type="text", text=text))

        return answer

    @asynccontextmanager
    async def legacy(url: str, token: str, who: str):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            async with Client(
                streamable_http_client(url, http_client=http), mode="legacy", sampling_callback=sampler(who)
            ) as client:
                yield client

    def sampling(**options):
        return make_config(observational_memory={"enabled": True, "model": "sampling"}, **options)

    async with serving(sampling, **bearer()) as url:
        async with legacy(url, BOB, "bob") as bob, legacy(url, ALICE, "alice") as alice:
            await ok(bob, "append_messages", thread_id="tb", user="bob's own words")
            await ok(alice, "append_messages", thread_id="ta", user="alice's launch code is quokka-19")
            refused = await ok(alice, "observe", thread_id="ta")
            assert not refused["ran"] and "no connected client offers sampling" in json.dumps(refused), refused
            assert seen["bob"] == [] and seen["alice"] == []
            async with legacy(url, ADMIN, "admin") as admin:
                await ok(admin, "get_context", thread_id="ta")  # the owner's client may be asked
                assert (await ok(alice, "observe", thread_id="ta"))["ran"]
            assert any("quokka-19" in text for text in seen["admin"]) and seen["bob"] == []
