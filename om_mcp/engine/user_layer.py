"""The person layer: what the user asked to be remembered everywhere, in every resource's context.

Off by default (`[observational_memory.user] enabled = false`): memory stays per resource (a
host's hooks make the project the resource), and nothing crosses from one to another. On, the
lines remembered with `om-mcp remember --user TEXT` and the person's working memory live in a
resource of their own, USER_RESOURCE, and every other resource's `get_context` and the hooks'
SessionStart show them in a `<user-memory>` block, within `user.tokens` tokens, the newest
lines first. They are ordinary user-stated lines of that resource's log: `om-mcp show --user`
lists them with their ids, and `om-mcp forget --observation ID` (or `forget --match`) removes one.

The Observer never writes here: a preference it notices stays in its project's log, and
the user decides what crosses (`om-mcp remember --user`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from om_mcp.engine.observation import lines
from om_mcp.neutral import fence, neutralise
from om_mcp.store import Group

USER_RESOURCE = "~user"
INTRO = "About the user, in every project (they asked for these to be remembered):"


def block(groups: Sequence[Group], working_memory: str | None, budget: int, count: Callable[[str], int]) -> str:
    """The `<user-memory>` block within `budget` tokens (empty when there is nothing, or no room)."""
    said = [
        lines.strip_prefix(t).removesuffix(lines.USER_STATED).strip() for g in groups for t in lines.user_stated(g.text)
    ]
    if (not said and not working_memory) or budget <= 0:
        return ""
    used = count(fence("user-memory", INTRO))
    kept: list[str] = []
    for words in reversed(said):  # the newest first, shown oldest first
        entry = f"- {neutralise(words)}"
        cost = count(entry) + 1
        if used + cost > budget:
            break
        kept.insert(0, entry)
        used += cost
    memory: list[str] = []
    for row in (working_memory or "").strip().splitlines():
        cost = count(row) + 1
        if used + cost > budget:
            break
        memory.append(neutralise(row))
        used += cost
    if not kept and not memory:
        return ""
    return fence("user-memory", "\n".join([INTRO, *kept, *memory]))
