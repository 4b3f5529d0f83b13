"""Fair legacy sessions: the least recently used idle session ends before a new one is refused.

The SDK keeps legacy (2025-11-25) sessions until the client deletes them or they have been
idle for `session_idle_seconds` (30 minutes), and refuses an `initialize` with 503 while
`max_sessions` are open: abandoned sessions filled the pool for half an hour. Here, before
the SDK sees a request that opens a session, room is made:

* the opener's own share first: a token holds at most `max_sessions_per_token`, an address
  without a token `max_sessions_per_address` (off on loopback without auth); at its share,
  the opener's own least recently used idle session ends;
* then the pool: at `max_sessions`, the least recently used idle session of anyone ends.

A session is idle while none of its requests is in flight (no POST being served, no GET
stream open); its client gets 404 for it afterwards and, as the protocol says, starts a new
one. Only when every candidate is busy is the newcomer refused (503).

The SDK's session table is reached through `server/sdk.py` (mcp 2.3 has no public way to list
or end sessions); each transport's `idle_scope` is its public attribute.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope, Send

from om_mcp.server import sdk

log = logging.getLogger(__name__)

_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode()


class SessionPool:
    def __init__(self, manager: StreamableHTTPSessionManager, total: int) -> None:
        self.manager = manager
        self.total = total
        self._owners: dict[str, str] = {}  # session id -> who opened it ("token:..." or "address:...")
        self._opening: Counter[str | None] = Counter()  # admitted, not yet answered by the SDK

    async def open(
        self, owner: str | None, cap: int | None, scope: Scope, receive: Receive, send: Send, app: Any
    ) -> str | None:
        """Make room for one more session of `owner` (None: no share of its own) within `cap`,
        then let `app` (the SDK) open it. Returns why it was refused instead, or None."""
        async with sdk.session_creation_lock(self.manager):
            live = self._live()
            if owner is not None and cap is not None:
                mine = [sid for sid in live if self._owners.get(sid) == owner]
                if len(mine) + self._opening[owner] >= cap and not await self._end_oldest_idle(mine, live):
                    return f"holds {len(mine)} open sessions, every one busy"
            if len(live) + sum(self._opening.values()) >= self.total:
                await self._end_oldest_idle(list(live), live)  # else the SDK answers 503 itself
            self._opening[owner] += 1

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and owner is not None:
                sid = dict(message.get("headers", [])).get(_SESSION_HEADER)
                if sid:
                    self._owners[sid.decode("latin-1")] = owner
            await send(message)

        try:
            await app(scope, receive, noting)
        finally:
            self._opening[owner] -= 1
            if self._opening[owner] <= 0:
                del self._opening[owner]
        return None

    def _live(self) -> dict[str, Any]:
        live = sdk.live_sessions(self.manager)
        for sid in [sid for sid in self._owners if sid not in live]:
            del self._owners[sid]  # ended (deleted, expired, crashed) since
        return live

    async def _end_oldest_idle(self, candidates: Iterable[str], live: dict[str, Any]) -> bool:
        """End the least recently used idle session among `candidates`; False when none is idle."""
        idle = [(deadline, sid) for sid in candidates if (deadline := _idle_until(live.get(sid))) is not None]
        if not idle:
            return False
        _, sid = min(idle)
        transport = live[sid]
        log.debug("ending the idle session %s to make room", sid[:8])
        transport.idle_scope.cancel()  # its server task ends as on an idle timeout
        await sdk.discard_session(self.manager, sid, transport)  # its id answers 404 from now on
        return True


def _idle_until(transport: Any) -> float | None:
    """When an idle session would expire (earlier: less recently used), or None if it is busy."""
    scope = getattr(transport, "idle_scope", None)
    if scope is None or getattr(transport, "is_terminated", False) or math.isinf(scope.deadline):
        return None
    return float(scope.deadline)
