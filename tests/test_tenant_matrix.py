"""The tenant conformance matrix (`support/tenancy.py`), generated from the server's own tool list,
resource templates, resources, prompts and status-page routes, over real HTTP: bob's token, given
each of alice's thread, resource, message, line, cursor, generation, phrase and `as_of` values and
one nobody holds, reads nothing of alice's, changes nothing of hers, and gets the same answer for
hers as for nobody's (thread ids apart: that one is in use is what a token may learn); a
`subscriptions/listen` to every resource template filled with her values is honoured for none.

Before issue 33, `delete_thread` with `match` on bob's own thread previewed and deleted alice's
messages: the matrix counted its reads, changes and differences (the access check is planted back
once in `test_the_matrix_sees_a_planted_leak`).
"""

from __future__ import annotations

import pytest
from support import tenancy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.timeout(600)
async def test_bob_learns_and_changes_nothing_of_alices_through_any_surface(tmp_path):
    tally, surfaces, unclassified = await tenancy.run_matrix(tmp_path)
    print(tally.summary(surfaces))
    assert not unclassified, (
        "arguments the tenant matrix cannot classify (add each to ARGUMENTS or ROUTE_INPUTS in"
        f" tests/support/tenancy.py): {unclassified}"
    )
    kinds = {s.kind for s in surfaces}
    assert {"tool", "resource", "route"} <= kinds, kinds  # the enumeration found every kind of surface
    names = {s.name for s in surfaces}
    assert {"delete_thread", "recall", "GET /api/threads/{thread_id:path}/messages"} <= names
    varied = {k for k, n in tally.by_kind.items() if n}
    named = {"thread", "resource", "message", "line", "cursor", "phrase", "as_of", "generation", "grant", "listen"}
    assert named <= varied, varied
    found = [*tally.reads, *tally.changes, *tally.differences]
    assert not found, "\n".join(tenancy.lines(found))


@pytest.mark.timeout(600)
async def test_the_matrix_sees_a_planted_leak(tmp_path, monkeypatch):
    """The access check planted back as it was (a forget by phrase over every resource): the matrix
    counts reads, changes and differences."""
    from om_mcp.engine.control import Control
    from om_mcp.store import EVERY_RESOURCE

    original = Control.forget_match

    async def everywhere(self, phrase, resource_id=None, *, thread_id=None, apply=True):
        return await original(self.with_access(EVERY_RESOURCE), phrase, resource_id, thread_id=None, apply=apply)

    monkeypatch.setattr(Control, "forget_match", everywhere)
    monkeypatch.setattr(tenancy, "surfaces", only_delete_thread(tenancy.surfaces))
    tally, surfaces, _ = await tenancy.run_matrix(tmp_path)
    print(tally.summary(surfaces))
    assert tally.reads and tally.changes and tally.differences


def only_delete_thread(surfaces):
    async def some(client, app, path):
        found, unclassified = await surfaces(client, app, path)
        return [s for s in found if s.name == "delete_thread"], unclassified

    return some
