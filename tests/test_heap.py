"""A serving process freezes its start-up heap once the engine is open (full collections then
skip it); a library user's process, and this test run, keep their collector untouched."""

from __future__ import annotations

import gc

import pytest
from support.mcp import connect, ok

from om_mcp import heap

pytestmark = pytest.mark.anyio


@pytest.fixture
def unfrozen(monkeypatch):
    monkeypatch.setattr(heap, "_enabled", False)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_leaves_the_collector_alone_unless_the_process_is_ours(unfrozen):
    heap.settle()
    assert gc.get_freeze_count() == 0
    heap.enable()
    heap.settle()
    assert gc.get_freeze_count() > 1000  # everything alive now, the imported modules among it


async def test_a_serving_process_freezes_its_heap_once_the_engine_is_open(unfrozen, make_server):
    server = make_server()
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", user="hello")
    assert gc.get_freeze_count() == 0  # not ours: a library user's (or pytest's) process

    heap.enable()
    server = make_server()
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", user="hello again")
        assert gc.get_freeze_count() > 1000
