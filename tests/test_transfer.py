"""Moving a memory: export -> import into an empty database gives the same context, search
results and observation history; importing twice adds nothing; a bad file changes nothing.
And the windows cycle-ending events carry for the status page's plots."""

from __future__ import annotations

import io
import json

import pytest
from support.engine import Memory, Script, at, config, msg

from om_mcp.importers.jsonl_format import ExportFormatError
from om_mcp.store import StoreError

pytestmark = pytest.mark.anyio


async def _filled(path, cfg, script):
    """Two resources, three threads, observed and reflected, with working memory and hints."""
    memory = await Memory.open(cfg, db_path=str(path), client=script.model)
    for i in range(60):
        thread = "t" if i < 40 else "u"
        await memory.append_messages(thread, [msg(i, at=at(i))], resource_id="alice")
        if i % 4 == 3:
            await memory.get_context(thread)
    await memory.append_messages(
        "b1", [msg(900, at=at(1), text="m900 the blue-green deploy runbook")], resource_id="bob"
    )
    await memory.append_messages(
        "t",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "m61 see the attached plan"},
                    {"type": "file", "name": "plan.txt", "mime_type": "text/plain"},
                ],
            }
        ],
    )
    await memory.update_working_memory("t", "# Alice\n- moved to Porto")
    return memory


async def _views(memory, threads=("t", "u", "b1"), queries=("words m12", "m45", "deploy runbook", "Porto")):
    out = {}
    for thread in threads:
        context = await memory.get_context(thread, with_status=False)
        history = await memory.observations(thread, history=True)
        out[thread] = (
            context.model_dump(),
            [(g["generation"], g["text"], g["tokens"]) for g in history["generations"]],
        )
    for query in queries:
        for thread in ("t", "b1"):
            out[(query, thread)] = [r.model_dump() for r in await memory.search(thread, query)]
    return out


@pytest.fixture
def cfg():
    return config(observation__message_tokens=400, reflection__observation_tokens=150)


async def test_round_trip_gives_the_same_context_search_and_history(tmp_path, cfg):
    script = Script()
    source = await _filled(tmp_path / "a.db", cfg, script)
    assert script.observer_calls and script.reflector_calls  # something to carry over
    text = io.StringIO()
    counts = await source.export_to(text)
    assert counts["resource"] == 2 and counts["thread"] == 3 and counts["message"] == 62
    assert counts["observation_group"] > counts["observation_record"] >= 3
    before = await _views(source)

    target = await Memory.open(cfg, db_path=str(tmp_path / "b.db"), client=Script().model)
    result = await target.import_from(io.BytesIO(text.getvalue().encode()))
    assert dict(result.added) == counts and not result.skipped
    assert await _views(target) == before
    assert await target.store.integrity() == []
    again = io.StringIO()
    await target.export_to(again)
    assert again.getvalue().splitlines()[1:] == text.getvalue().splitlines()[1:]  # same records, header aside

    twice = await target.import_from(io.BytesIO(text.getvalue().encode()))
    assert not twice.added and dict(twice.skipped) == counts
    assert await _views(target) == before
    await source.close()
    await target.close()


async def test_one_resource_exports_alone(tmp_path, cfg):
    source = await _filled(tmp_path / "a.db", cfg, Script())
    text = io.StringIO()
    counts = await source.export_to(text, resource_id="bob")
    assert counts == {"resource": 1, "thread": 1, "message": 1, "observation_record": 1}
    assert "alice" not in text.getvalue()
    await source.close()


async def test_a_file_cut_short_or_clashing_changes_nothing(tmp_path, cfg):
    source = await _filled(tmp_path / "a.db", cfg, Script())
    text = io.StringIO()
    await source.export_to(text)
    lines = text.getvalue().splitlines(keepends=True)
    target = await Memory.open(cfg, db_path=str(tmp_path / "b.db"))
    with pytest.raises(ExportFormatError, match="cut short"):
        await target.import_from(io.BytesIO("".join(lines[:-1]).encode()))
    assert (await target.store.stats()).messages == 0 and await target.store.list_resources() == []

    await target.append_messages("t", [{"id": "m0", "role": "user", "content": "other words"}], resource_id="alice")
    with pytest.raises(StoreError, match="'m0' already exists in thread 't' with different content"):
        await target.import_from(io.BytesIO(text.getvalue().encode()))
    assert (await target.store.stats()).messages == 1
    record = json.loads(lines[1])
    assert record["type"] == "resource"
    await source.close()
    await target.close()


async def test_cycle_ending_events_carry_the_windows_after_their_commit(tmp_path):
    """Every commit writes a windowed event, so while no message came after the newest one,
    its windows are exactly where the memory stands."""
    cfg = config(buffering=True, observation__message_tokens=600, reflection__observation_tokens=300)
    memory = await Memory.open(cfg, db_path=str(tmp_path / "w.db"), client=Script().model)
    kinds, checked = set(), 0
    for i in range(60):
        await memory.append_messages("t", [msg(i, at=at(i))])
        await memory.get_context("t")
        events = [e for e in await memory.store.events(thread_id="t", limit=1000) if "windows" in e.payload]
        if not events:
            continue
        last = events[-1]
        kinds.update(e.type for e in events)
        windows = last.payload["windows"]
        assert (windows["message_threshold"], windows["observation_threshold"]) == (600, 300)
        newest = (await memory.store.message_page("t", limit=1, newest_first=True))[0].seq
        if windows["seq"] == newest:
            status = (await memory.status("t")).windows.active
            assert (windows["unobserved_tokens"], windows["observation_tokens"]) == (
                status.messages.tokens,
                status.observations.tokens,
            )
            checked += 1
    assert kinds >= {"data-om-buffering-end", "data-om-activation"} and checked >= 5
    await memory.close()
