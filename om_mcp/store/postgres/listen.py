"""Messages between the processes on one database: NOTIFY out, LISTEN in.

One dedicated connection per process listens (outside the pool: a pooled
connection is shared, and LISTEN belongs to a session). If it drops, it
reconnects with a growing pause. Notifications are not stored: what was sent
while the listener was down is lost, which is acceptable for what travels here
(hints that a resource changed; the data itself is always read from tables).
Messages a process sent itself are not handed back to it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

CHANNEL = "om_updates"
MAX_PAYLOAD = 7900  # PostgreSQL's limit is 8000 bytes


def payload(origin: str, message: dict[str, Any]) -> str:
    text = json.dumps({**message, "origin": origin}, separators=(",", ":"))
    if len(text.encode()) > MAX_PAYLOAD:
        raise ValueError(f"a notification of {len(text)} bytes is over PostgreSQL's limit; send ids, not data")
    return text


class Listener:
    def __init__(
        self, url: str, settings: dict[str, str], origin: str, callback: Callable[[dict[str, Any]], Awaitable[None]]
    ):
        self.url, self.settings, self.origin, self.callback = url, settings, origin, callback
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self._delivering: set[asyncio.Task] = set()  # held, so a running delivery is not collected

    async def start(self, timeout: float = 10.0) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="om-mcp listener")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            log.warning("the change listener could not connect yet; it keeps trying")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass

    async def _run(self) -> None:
        import asyncpg

        pause = 0.5
        while True:
            lost = asyncio.Event()
            try:
                conn = await asyncpg.connect(self.url, server_settings=self.settings)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                log.warning("change listener cannot connect (%s); retrying in %.1f s", error, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 30.0)
                continue
            try:
                conn.add_termination_listener(lambda _conn, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, self._heard)
                pause = 0.5
                self._ready.set()
                await lost.wait()
                log.warning("change listener lost its connection; reconnecting")
            finally:
                if not conn.is_closed():
                    try:
                        await asyncio.wait_for(conn.close(), 5)
                    except (Exception, asyncio.CancelledError):  # noqa: BLE001
                        conn.terminate()

    def _heard(self, _conn: Any, _pid: int, _channel: str, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            return
        if message.pop("origin", None) == self.origin:
            return
        task = asyncio.get_running_loop().create_task(self._deliver(message))
        self._delivering.add(task)
        task.add_done_callback(self._delivering.discard)

    async def _deliver(self, message: dict[str, Any]) -> None:
        try:
            await self.callback(message)
        except Exception as error:  # noqa: BLE001 - a listener must never break the connection
            log.debug("change listener callback failed: %s", error)
