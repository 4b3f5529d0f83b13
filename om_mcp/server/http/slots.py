"""Fair connection slots: no one client, address or token holds the server's connections.

A connection is *idle* while no request of it is being served (fresh, between requests on
keep-alive, or sending a request head); it is *busy* from a whole request head to the end of
its response (an SSE stream is busy for as long as it streams). A busy connection whose request
body arrives below `min_body_bytes_per_second` is *trickling*: it is closed for room like an
idle one, after them, so clients sending bodies a byte at a time cannot hold the slots. Every connection belongs to
its client address until a request on it carries a valid bearer token; from then on it
belongs to that token. The caps, each met by closing the least recently used *idle*
connection of the same group (else its least recently used *trickling* one), and by refusing
the newcomer (503 to its request, then closed) only when that group has neither:

* all connections: `max_connections`;
* connections of one address that carried no valid token: `max_connections_per_address`
  (off on loopback without auth, where every client is the one local user);
* with bearer auth, those of every address together: `unauthenticated_share` of the total,
  so clients without a token can never crowd out those with one;
* connections of one token: `max_connections_per_token`.

So a client that opens hundreds of connections and leaves them idle (after one `GET /ui`
each, say) only ever closes its own older ones, and a legitimate request always finds a
slot unless every connection is busy. The table lives in the event loop's thread and is
changed synchronously: `GuardedH11` (`connections.py`) opens, touches and closes slots, the
`Gate` claims one for a token.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from om_mcp.config import Config

log = logging.getLogger(__name__)

REPORT_SECONDS = 60.0


class Connection(Protocol):
    """What the table needs of a connection (`GuardedH11`)."""

    @property
    def idle(self) -> bool: ...

    @property
    def trickling(self) -> bool: ...

    def shed(self) -> None: ...


@dataclass
class _Slot:
    connection: Connection
    client: tuple[str, int] | None
    owner: str | None = None  # the token's subject once a request carried one

    @property
    def address(self) -> str:
        return self.client[0] if self.client else "unknown"


class Group:
    """Slots in least-recently-used order (a dict keeps insertion order; a touch re-inserts)."""

    def __init__(self) -> None:
        self.slots: OrderedDict[int, _Slot] = OrderedDict()

    def __len__(self) -> int:
        return len(self.slots)

    def add(self, key: int, slot: _Slot) -> None:
        self.slots[key] = slot
        self.slots.move_to_end(key)

    def oldest_idle(self, besides: int | None = None) -> int | None:
        """The least recently used connection closing which loses nothing: an idle one, else one
        trickling its request body."""
        found = next((k for k, s in self.slots.items() if k != besides and s.connection.idle), None)
        if found is None:
            found = next((k for k, s in self.slots.items() if k != besides and s.connection.trickling), None)
        return found


@dataclass(frozen=True)
class SlotLimits:
    total: int
    per_address: int | None  # None: no cap
    per_token: int
    unauthenticated: int | None  # None: no bearer auth, so no share

    @classmethod
    def of(cls, config: Config, loopback: bool) -> SlotLimits:
        """`loopback`: the server binds a loopback address."""
        http, bearer = config.server.http, config.server.auth.mode == "bearer"
        per_address = http.max_connections_per_address or None
        if not bearer and loopback:
            per_address = None
        share = max(1, math.ceil(http.max_connections * http.unauthenticated_share)) if bearer else None
        return cls(http.max_connections, per_address, http.max_connections_per_token, share)


class Slots:
    def __init__(self, limits: SlotLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._slots: dict[int, _Slot] = {}  # by id(connection)
        self._by_client: dict[tuple[str, int], int] = {}
        self._all = Group()
        self._anonymous = Group()  # no valid token yet
        self._addresses: dict[str, Group] = {}
        self._owners: dict[str, Group] = {}
        self._clock = clock
        self._reported_at: float | None = None
        self._unreported = 0

    # -- the connection's life ------------------------------------------------------------

    def open(self, connection: Connection, client: tuple[str, int] | None) -> str | None:
        """Admit a new connection (closing idle ones to make room): None, or why it is refused."""
        address = client[0] if client else "unknown"
        limits = self.limits
        checks = [
            (self._addresses.get(address), limits.per_address, "server.http.max_connections_per_address", address),
            (self._anonymous, limits.unauthenticated, "server.http.unauthenticated_share", None),
            (self._all, limits.total, "server.http.max_connections", None),
        ]
        for group, cap, option, who in checks:
            if group is None or cap is None or len(group) < cap:
                continue
            # At the total, shed a connection without a token first: they are the cheapest to lose.
            victim = (self._anonymous.oldest_idle() if group is self._all else None) or group.oldest_idle()
            if victim is None:
                return self._refuse(option, cap, who)
            self._shed(victim)
        key = id(connection)
        slot = _Slot(connection, client)
        self._slots[key] = slot
        self._enter(key, slot)
        return None

    def touch(self, connection: Connection) -> None:
        """It was just used: the last to be closed for room."""
        slot = self._slots.get(id(connection))
        if slot is not None:
            for group in self._groups(slot):
                group.add(id(connection), slot)

    def close(self, connection: Connection) -> None:
        key = id(connection)
        slot = self._slots.pop(key, None)
        if slot is not None:
            self._leave(key, slot)

    def claim(self, client: tuple[str, int] | None, owner: str, name: str) -> str | None:
        """A request on the connection from `client` carried the valid token `owner` (its subject;
        `name` for messages): from now on the connection counts against the token, not its address.
        None, or why the token may not hold one more connection."""
        key = self._by_client.get(client) if client else None
        slot = self._slots.get(key) if key is not None else None
        if slot is None or slot.owner == owner:
            return None
        group = self._owners.get(owner)
        if group is not None and len(group) >= self.limits.per_token:
            victim = group.oldest_idle(besides=key)
            if victim is None:
                return self._refuse("server.http.max_connections_per_token", self.limits.per_token, f"token {name!r}")
            self._shed(victim)
        assert key is not None
        self._leave(key, slot)
        slot.owner = owner
        self._enter(key, slot)
        return None

    # -- inside ------------------------------------------------------------------------------

    def _groups(self, slot: _Slot) -> list[Group]:
        if slot.owner is not None:
            return [self._all, self._owners.setdefault(slot.owner, Group())]
        return [self._all, self._anonymous, self._addresses.setdefault(slot.address, Group())]

    def _enter(self, key: int, slot: _Slot) -> None:
        if slot.client:
            self._by_client[slot.client] = key
        for group in self._groups(slot):
            group.add(key, slot)

    def _leave(self, key: int, slot: _Slot) -> None:
        if slot.client and self._by_client.get(slot.client) == key:
            del self._by_client[slot.client]
        for group in self._groups(slot):
            group.slots.pop(key, None)
        for table, name in ((self._owners, slot.owner), (self._addresses, slot.address)):
            if name is not None and name in table and not table[name]:
                del table[name]

    def _shed(self, key: int) -> None:
        slot = self._slots.pop(key)
        self._leave(key, slot)
        slot.connection.shed()

    def _refuse(self, option: str, cap: int, who: str | None) -> str:
        self._unreported += 1
        whose = f" for {who}" if who else ""
        message = (
            f"every one of the {cap} connection slots{whose} is busy ({option}); retry in a moment,"
            " or close a connection you hold"
        )
        now = self._clock()
        if self._reported_at is None or now - self._reported_at >= REPORT_SECONDS:
            log.warning("refused %d connection(s): %s", self._unreported, message)
            self._reported_at, self._unreported = now, 0
        return message
