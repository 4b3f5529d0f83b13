"""Serve a Starlette app on loopback in a thread, and look at it with headless Chromium.

Used by the status page's browser test and by `python -m om_mcp.testing.status_demo`.
Chromium is driven by its own command-line flags (`--dump-dom`, `--screenshot`)
rather than Playwright: Debian's `chromium` package is all it needs, nothing
downloads a browser, and the page needs no clicking to be checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from om_mcp.testing.ports import free_port

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--force-device-scale-factor=1",
)


def find_chromium() -> str | None:
    """The Chromium binary: $CHROMIUM, else the first of CANDIDATES on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit and Path(explicit).exists():
        return explicit
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


def wait_for(url: str, timeout: float = 60) -> None:
    """Until `url` answers (any HTTP status), e.g. a server process starting up."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered at {url} within {timeout:.0f} s") from None
            time.sleep(0.1)


@contextmanager
def serve(app, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run `app` with uvicorn in a thread; yields its base URL; stops it on exit."""
    import uvicorn

    port = port or free_port(host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the test server did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def run_chromium(
    url: str,
    *,
    screenshot: Path | None = None,
    size: tuple[int, int] = (1400, 1000),
    budget_ms: int = 5000,
    binary: str | None = None,
    timeout: float = 60,
) -> str:
    """Load `url`; return the DOM after `budget_ms` of virtual time, or write a PNG to `screenshot`."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium binary (install Debian's chromium package, or set CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="om-chromium-") as profile:
        command = [
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            f"--window-size={size[0]},{size[1]}",
        ]
        command += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        done = subprocess.run([*command, url], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited with {done.returncode}: {done.stderr.strip()[-600:]}")
    return done.stdout


class Page:
    """A page in headless Chromium driven through the DevTools protocol, for what `--dump-dom`
    cannot do: click, type, and read the page as it changes. `until` settles on a condition."""

    def __init__(self, socket) -> None:
        self._socket = socket
        self._next = 0

    async def send(self, method: str, **params) -> dict:
        self._next += 1
        ident = self._next
        await self._socket.send_json({"id": ident, "method": method, "params": params})
        while True:
            reply = await self._socket.receive_json()
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    async def evaluate(self, expression: str):
        """The value of a JavaScript expression (a promise is awaited)."""
        result = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def until(self, expression: str, timeout: float = 30.0):
        """Evaluate until the expression is truthy (one that throws, the page still loading, is not);
        its value."""
        import anyio

        with anyio.fail_after(timeout):
            while True:
                try:
                    value = await self.evaluate(expression)
                except RuntimeError:
                    value = None
                if value:
                    return value
                await anyio.sleep(0.05)

    async def screenshot(self) -> bytes:
        """The page as it is drawn now, as PNG."""
        import base64

        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])


@contextmanager
def _chromium_process(binary: str, port: int, size: tuple[int, int]) -> Iterator[None]:
    with tempfile.TemporaryDirectory(prefix="om-chromium-") as profile:
        proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                f"--window-size={size[0]},{size[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its renderers in its own group: they are ended with it
        )
        try:
            yield
        finally:
            _end_group(proc)


def _end_group(proc: subprocess.Popen) -> None:
    """End Chromium and the processes it started (a renderer left running writes into the profile
    while it is being removed)."""
    import signal

    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sent)
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            continue
        break
    for _ in range(50):  # until the group is gone: its last members exit after the browser
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


async def open_page(url: str, binary: str | None = None, size: tuple[int, int] = (1280, 900)):
    """An async context manager: `async with open_page(url) as page: await page.until(...)`."""
    from contextlib import asynccontextmanager

    import aiohttp  # litellm's dependency; only the browser test drives a page

    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium binary (install Debian's chromium package, or set CHROMIUM)")

    @asynccontextmanager
    async def page():
        port = free_port()
        with _chromium_process(binary, port, size):
            await _anyio_wait(f"http://127.0.0.1:{port}/json/version")
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                    targets = [t for t in await response.json() if t.get("type") == "page"]
                async with session.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                    driven = Page(socket)
                    await driven.send("Page.enable")
                    await driven.send("Page.navigate", url=url)
                    yield driven

    return page()


async def _anyio_wait(url: str, timeout: float = 60) -> None:
    import anyio

    await anyio.to_thread.run_sync(lambda: wait_for(url, timeout))
