"""The status page on a real `om-mcp serve --transport http` over a database filled through
the engine by a scripted run: the API behind bearer tokens bound to resources, series that
end where the memory stands, the page in headless Chromium with its plots drawn, forgetting.
And the series builder on its own."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from support.processes import PYTHON, clean_env, server_command
from support.timeouts import scaled

from om_mcp.config import hash_token
from om_mcp.server.http.ui.contract import EventPage, ThreadDetail, ThreadSeries
from om_mcp.server.http.ui.series import build_series
from om_mcp.testing.headless import find_chromium, open_page, run_chromium, wait_for
from om_mcp.testing.ports import free_port
from om_mcp.testing.recorded_demo import fill_recorded
from om_mcp.testing.status_demo import _config_file, fill

ADMIN, ALICE = "om_admin-token-0123456789abcdef", "om_alice-token-0123456789abcdef"
INFRA = "om_infra-token-0123456789abcdef"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(base URL, database) of a server over a scripted run's database, with two tokens."""
    folder = tmp_path_factory.mktemp("status-page")
    db = folder / "demo.db"
    asyncio.run(fill(db, latency=(0.005, 0.03)))
    config = _config_file(folder)
    config.write_text(
        config.read_text() + '[server.auth]\nmode = "bearer"\ntokens = [\n'
        f'  {{ name = "admin", hash = "{hash_token(ADMIN)}", resources = ["*"] }},\n'
        f'  {{ name = "alice", hash = "{hash_token(ALICE)}", resources = ["alice"] }},\n'
        f'  {{ name = "infra", hash = "{hash_token(INFRA)}", resources = ["team-infra"] }},\n]\n'
    )
    port = free_port()
    log = open(folder / "server.log", "wb")
    proc = subprocess.Popen(
        server_command("--transport", "http", "--port", str(port), "--db", str(db), "--config", str(config)),
        env=clean_env(folder),
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/ui")
        yield url, db
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def get(url: str, path: str, token: str | None = ADMIN) -> httpx.Response:
    return httpx.get(url + path, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=scaled(30))


@pytest.mark.slow
def test_the_page_has_its_icon_and_the_server_log_gives_its_address(site):
    url, db = site
    page = get(url, "/ui", token=None)
    assert '<link rel="icon" href="ui/favicon.svg" type="image/svg+xml">' in page.text
    for path in ("/ui/favicon.svg", "/favicon.ico"):  # what the page names, and what a browser asks first
        icon = get(url, path, token=None)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml" and b"<svg" in icon.content
    port = url.rsplit(":", 1)[1]
    logged = (db.parent / "server.log").read_text()
    assert f"status page: http://127.0.0.1:{port}/ui#token=<a bearer token>" in logged, logged


@pytest.mark.slow
def test_the_page_needs_no_token_and_its_data_needs_one(site):
    url, _ = site
    for path in ("/", "/ui"):
        page = get(url, path, token=None)
        assert page.status_code == 200 and 'src="ui/app.js"' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
    assert get(url, "/ui/app.js", None).headers["content-type"].startswith("text/javascript")
    assert "http" not in get(url, "/ui/app.js", None).text.replace("http://www.w3.org/2000/svg", "")  # nothing remote
    assert get(url, "/api/resources", token=None).status_code == 401
    assert get(url, "/api/resources", token="om_wrong-token-000000000000").status_code == 401
    assert [r["id"] for r in get(url, "/api/resources").json()] == ["alice", "team-infra"]
    info = get(url, "/api/info").json()  # the demo runs with observation off: the page says so, and why
    assert info["model_ready"] is False and "observation is off" in info["model_reason"]
    assert info["readiness"] == "Observation is off: messages are kept and searchable."
    assert "observational_memory.enabled = true" in info["readiness_fix"]


@pytest.mark.slow
def test_a_token_sees_only_its_resources(site):
    url, _ = site
    assert [r["id"] for r in get(url, "/api/resources", ALICE).json()] == ["alice"]
    assert [t["id"] for t in get(url, "/api/resources/alice/threads", ALICE).json()] == [
        "t-lisbon",
        "t-postgres",
        "t-sourdough",
    ]
    for path in (
        "/api/resources/team-infra/threads",
        "/api/threads/t-deploy",
        "/api/threads/t-deploy/series",
        "/api/threads/t-deploy/events",
    ):
        response = get(url, path, ALICE)
        assert response.status_code == 404 and "unknown" in response.json()["error"], path
    denied = httpx.delete(url + "/api/threads/t-deploy", headers={"Authorization": f"Bearer {ALICE}"})
    assert denied.status_code == 404
    assert get(url, "/api/threads/t-deploy").status_code == 200  # still there


@pytest.mark.slow
def test_a_thread_its_generations_and_series_end_where_the_memory_stands(site):
    url, _ = site
    detail = ThreadDetail.model_validate(get(url, "/api/threads/t-lisbon").json())
    assert detail.record_key == "thread:t-lisbon" and detail.thread.messages == 96
    assert len(detail.generations) >= 2 and detail.generations[-1].current
    assert detail.generations[-1].groups[0].kind == "reflection"
    assert detail.working_memory_scope == "resource" and "vegetarian" in detail.working_memory
    assert detail.hints.current_task and detail.observations_window.threshold == 1200
    series = ThreadSeries.model_validate(get(url, "/api/threads/t-lisbon/series").json())
    assert {c.kind for c in series.cycles} >= {"buffering", "activation", "reflection"}
    assert all(c.cost and c.duration_ms is not None for c in series.cycles if c.kind == "buffering")
    last = series.points[-1]
    assert (last.unobserved_tokens, last.observation_tokens) == (
        detail.messages_window.tokens,
        detail.observations_window.tokens,
    )
    assert len(series.points) == 96 + len(series.cycles)  # one rise per message, one sample per cycle
    times = [p.at for p in series.points]
    assert times == sorted(times)


@pytest.mark.slow
def test_events_page_after_an_id(site):
    url, _ = site
    everything = EventPage.model_validate(get(url, "/api/threads/t-lisbon/events?limit=500").json())
    ids = [e.id for e in everything.events]
    assert ids == sorted(ids) and everything.next_after == ids[-1]
    after = EventPage.model_validate(get(url, f"/api/threads/t-lisbon/events?after={ids[-3]}").json())
    assert [e.id for e in after.events] == ids[-2:]
    assert get(url, f"/api/threads/t-lisbon/events?after={ids[-1]}").json() == {"events": [], "next_after": ids[-1]}
    assert get(url, "/api/threads/t-lisbon/events?limit=0").status_code == 400


class _Dom(HTMLParser):
    """The elements the test looks for, with their attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag, cls=None, **attrs):
        return [
            a
            for t, a in self.elements
            if t == tag
            and (cls is None or cls in a.get("class", "").split())
            and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def _chromium():
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary on this machine (apt-get install chromium, or set CHROMIUM)")
    return binary


@pytest.mark.slow
def test_the_page_draws_the_plots_and_the_log_in_a_real_browser(site):
    binary = _chromium()
    url, _ = site
    html = run_chromium(f"{url}/ui#token={ALICE}&thread=t-lisbon", binary=binary, budget_ms=8000)
    dom = _Dom()
    dom.feed(html)
    text = " ".join(dom.text)
    assert dom.find("body")[0].get("data-state") == "ready", re.sub(r"\s+", " ", text)[-400:]
    assert [a["data-thread"] for a in dom.find("a") if "data-thread" in a] == [
        "t-lisbon",
        "t-postgres",
        "t-sourdough",
    ]  # alice's token: no team-infra
    assert dom.find("a", "current", data_thread="t-lisbon")
    series = ThreadSeries.model_validate(get(url, "/api/threads/t-lisbon/series").json())
    for key in ("unobserved_tokens", "observation_tokens"):
        assert dom.find("div", "chart", data_chart=key)
    lines, thresholds = dom.find("path", "series"), dom.find("path", "threshold")
    assert len(lines) == 2 and len(thresholds) == 2
    for path in lines + thresholds:  # a step line through every point of the scripted run
        assert int(path["data-points"]) == len(series.points)
        assert len(re.findall(r"[MHV]", path["d"])) == 1 + 2 * (len(series.points) - 1)
    timed = [c for c in series.cycles if c.duration_ms is not None]
    costed = [c for c in series.cycles if c.cost is not None]
    assert len(dom.find("rect", "bar")) == len(timed) + len(costed) > 20
    assert dom.find("rect", "k-reflection") and dom.find("rect", "k-buffering")
    detail = ThreadDetail.model_validate(get(url, "/api/threads/t-lisbon").json())
    previous = detail.generations[-2]
    assert f"Generation {previous.generation} · {previous.tokens:,} tokens · {len(previous.groups)} groups" in text
    assert f"Generation {detail.generations[-1].generation} (current)" in text
    assert "Itinerary agreed: day 1 Alfama" in text and "vegetarian, no fish" in text
    assert dom.find("li") and "activated" in text
    assert "Forget thread…" in text and "Forget this thread" not in text  # asks only when clicked
    # priorities as words with a colour: the emoji markers need a font many machines lack
    badges = {a["class"].split()[-1] for a in dom.find("span", "priority")}
    assert badges == {"high", "medium", "low"} and not re.search("[🔴🟡🟢✅]", text)
    assert "Lisbon trip 14-17 Oct with Sam" in text


@pytest.mark.slow
def test_a_tenant_reads_and_names_only_its_own_threads(site):
    """The messages view and the title change answer for the token's resources only: another
    tenant's thread, message or cursor is unknown (404), and its title stays as it was."""
    url, _ = site
    auth = {"Authorization": f"Bearer {ALICE}"}
    for path in (
        "/api/threads/t-deploy/messages",
        "/api/threads/t-deploy/messages?q=castle",
        "/api/threads/t-deploy/messages?id=t-deploy-3",
        "/api/threads/t-lisbon/messages?before=t-deploy-3",  # not a cursor into another thread
        "/api/threads/t-lisbon/messages?id=t-deploy-3",
    ):
        response = get(url, path, ALICE)
        assert response.status_code == 404, (path, response.text)
    refused = httpx.put(url + "/api/threads/t-deploy/title", headers=auth, json={"title": "mine now"})
    assert refused.status_code == 404
    infra = {t["id"]: t for t in get(url, "/api/resources/team-infra/threads", INFRA).json()}
    assert infra["t-deploy"]["title"] == "Blue-green deploy runbook"
    found = get(url, "/api/threads/t-lisbon/messages?q=castle&limit=50", ALICE).json()
    assert found["messages"] and all(m["id"].startswith("t-lisbon-") for m in found["messages"])
    assert get(url, "/api/threads/t-lisbon/messages", INFRA).status_code == 404
    # the other tenant, on its own thread: reads it and names it
    own = get(url, "/api/threads/t-deploy/messages?limit=5", INFRA).json()
    assert [m["id"] for m in own["messages"]] == [f"t-deploy-{n}" for n in range(29, 24, -1)]
    renamed = httpx.put(
        url + "/api/threads/t-deploy/title", headers={"Authorization": f"Bearer {INFRA}"}, json={"title": "Runbook v2"}
    )
    assert renamed.status_code == 200 and renamed.json()["title"] == "Runbook v2"
    httpx.put(
        url + "/api/threads/t-deploy/title",
        headers={"Authorization": f"Bearer {INFRA}"},
        json={"title": "Blue-green deploy runbook"},
    )
    for path in ("/api/threads/t-lisbon/messages", "/api/threads/t-lisbon/title"):
        assert httpx.request("GET" if path.endswith("messages") else "PUT", url + path).status_code == 401


@pytest.mark.slow
def test_a_screenshot_is_written(site, tmp_path):
    binary = _chromium()
    url, _ = site
    shot = tmp_path / "status.png"
    run_chromium(f"{url}/ui#token={ADMIN}&thread=t-lisbon", binary=binary, screenshot=shot, size=(1200, 900))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


@pytest.mark.slow
def test_forget_deletes_the_thread_and_its_text(site):
    url, db = site
    gone = httpx.delete(url + "/api/threads/t-sourdough", headers={"Authorization": f"Bearer {ADMIN}"})
    assert gone.json() == {"thread_id": "t-sourdough", "messages": 8}
    assert get(url, "/api/threads/t-sourdough").status_code == 404
    assert [t["id"] for t in get(url, "/api/resources/alice/threads").json()] == ["t-lisbon", "t-postgres"]
    assert httpx.post(url + "/api/threads/t-lisbon", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 405
    files = [Path(str(db) + suffix) for suffix in ("", "-wal")]
    assert b"t-sourdough-3" not in b"".join(f.read_bytes() for f in files if f.exists())


@pytest.fixture
def own_site(tmp_path):
    """A server of its own (the page changes the memory): (base URL, database)."""
    db = tmp_path / "demo.db"
    asyncio.run(fill(db, latency=(0.005, 0.03)))
    config = _config_file(tmp_path)
    config.write_text(
        config.read_text() + '[server.auth]\nmode = "bearer"\ntokens = [\n'
        f'  {{ name = "admin", hash = "{hash_token(ADMIN)}", resources = ["*"] }},\n]\n'
    )
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(
            server_command("--transport", "http", "--port", str(port), "--db", str(db), "--config", str(config)),
            env=clean_env(tmp_path),
            stderr=log,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(f"{url}/ui")
            _until_ready(url)
            yield url, db
        finally:
            proc.terminate()
            proc.wait(10)


def _until_ready(url: str, timeout: float = 60) -> None:
    """Until the API answers (it says 503 while the memory opens)."""
    deadline = time.monotonic() + scaled(timeout)
    while get(url, "/api/info").status_code == 503:
        assert time.monotonic() < deadline, "the status page API never became ready"
        time.sleep(0.05)


def _current_lines(url: str, thread: str) -> list[dict]:
    detail = get(url, f"/api/threads/{thread}").json()
    return [line for g in detail["generations"][-1]["groups"] for line in g["lines"] if line["id"]]


@pytest.mark.slow
@pytest.mark.anyio
async def test_forget_correct_and_restore_one_line_in_a_real_browser(own_site):
    """Clicks in headless Chromium (DevTools protocol): a line is forgotten only after the page
    asks, a line is corrected, an earlier generation is restored; the API shows each change."""
    binary = _chromium()
    url, db = own_site
    before = _current_lines(url, "t-lisbon")
    generations = len(get(url, "/api/threads/t-lisbon").json()["generations"])
    async with await open_page(f"{url}/ui#token={ADMIN}&thread=t-lisbon", binary=binary) as page:
        await page.until("document.body.dataset.state === 'ready'")
        assert "Model spend today" in await page.evaluate("document.getElementById('spend').textContent")
        first = before[0]
        row = f"document.querySelector('.generation-column:last-child .line[data-line=\"{first['id']}\"]')"
        await page.evaluate(f"{row}.querySelector('.forget-line').click()")
        asked = await page.until(f"{row}.querySelector('.confirm')?.textContent")
        assert "Forget this line?" in asked and "cannot be undone" in asked
        assert [line["id"] for line in _current_lines(url, "t-lisbon")] == [
            line["id"] for line in before
        ]  # asked first
        await page.evaluate(f"{row}.querySelector('.forget-line-confirm').click()")
        assert await page.until("document.getElementById('changed')?.textContent") == "Forgotten."
        after = _current_lines(url, "t-lisbon")
        assert first["id"] not in [line["id"] for line in after] and len(after) == len(before) - 1
        second = after[0]
        row = f"document.querySelector('.generation-column:last-child .line[data-line=\"{second['id']}\"]')"
        await page.evaluate(f"{row}.querySelector('.edit').click()")
        await page.until(f"!!{row}.querySelector('input.line-text')")
        await page.evaluate(f"{row}.querySelector('input.line-text').value = 'User is vegan'")
        await page.evaluate(f"{row}.querySelector('.save-line').click()")
        notice = await page.until("document.getElementById('changed')?.textContent.startsWith('Corrected') && 1")
        assert notice
        assert any(line["text"].endswith("User is vegan [user-stated]") for line in _current_lines(url, "t-lisbon"))
        restore = "document.querySelector('.generation-column:first-child button.restore')"
        restored = int(await page.evaluate(f"{restore}.dataset.generation"))
        await page.evaluate(f"{restore}.click()")
        changed = "document.getElementById('changed')"
        text = await page.until(f"{changed}?.textContent.startsWith('Generation') && {changed}.textContent")
        assert f"Generation {restored} is the active log again" in text
    detail = get(url, "/api/threads/t-lisbon").json()
    assert len(detail["generations"]) == generations + 2  # the correction and the restore, each a generation

    def texts(generation: dict) -> list[str]:
        return [line["text"] for g in generation["groups"] for line in g["lines"] if line["id"]]

    vegan = "User is vegan [user-stated]"
    last, then = texts(detail["generations"][-1]), texts(detail["generations"][restored])
    assert any(t.endswith(vegan) for t in last)  # the correction made since the restored generation stays
    assert [t for t in last if not t.endswith(vegan)] == [t for t in then if t != second["text"]]
    kinds = [e["type"] for e in get(url, "/api/threads/t-lisbon/events?limit=500").json()["events"]]
    assert {"data-om-forget", "data-om-edit", "data-om-restore"} <= set(kinds)
    gone = first["text"].split(")", 1)[-1].strip()[:30]
    assert gone.encode() not in b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


@pytest.mark.slow
def test_the_page_api_refuses_bad_changes_and_changes_nothing(own_site):
    url, _ = own_site
    auth = {"Authorization": f"Bearer {ADMIN}"}
    lines = _current_lines(url, "t-lisbon")
    missing = httpx.delete(url + "/api/threads/t-lisbon/observations/0123456789abcdef.abcdef", headers=auth)
    assert missing.status_code == 404 and "unknown observation" in missing.json()["error"]
    form = httpx.put(
        url + f"/api/threads/t-lisbon/observations/{lines[0]['id']}", headers=auth, content=b"text=x"
    )  # what a form on another site could send
    assert form.status_code == 400 and "application/json" in form.json()["error"]
    current = get(url, "/api/threads/t-lisbon").json()["generations"][-1]["generation"]
    again = httpx.post(url + "/api/threads/t-lisbon/restore", headers=auth, json={"generation": current})
    assert again.status_code == 400 and "already the active log" in again.json()["error"]
    assert httpx.post(url + "/api/threads/t-lisbon/restore", headers=auth, json={"generation": 99}).status_code == 404
    assert _current_lines(url, "t-lisbon") == lines


# -- a memory the hooks recorded with no model -----------------------------------------------
#
# Four Claude Code sessions written as Claude Code writes them and stored by `om-mcp ingest`, as the
# hooks store them (`om_mcp.testing.recorded_demo`), served with the default configuration, no model
# key, and a `claude` on PATH that answers `auth status` as a logged-out Claude Code does.

DOCS = Path(__file__).resolve().parents[1] / "docs" / "status-page.md"
LOGGED_OUT = '#!/bin/sh\necho \'{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}\'\nexit 1\n'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(base URL, database, session ids oldest first, the transcripts' folder, env)."""
    folder = tmp_path_factory.mktemp("recorded")
    tools = folder / "bin"
    tools.mkdir()
    (tools / "claude").write_text(LOGGED_OUT)
    (tools / "claude").chmod(0o755)
    env = clean_env(
        folder,
        PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
        XDG_CACHE_HOME=str(folder / "cache"),
        XDG_CONFIG_HOME=str(folder / "config"),
    )
    db = folder / "memory.db"
    sessions = fill_recorded(db, env=env)
    port = free_port()
    with open(folder / "server.log", "wb") as log:
        proc = subprocess.Popen(
            server_command("--transport", "http", "--port", str(port), "--db", str(db)), env=env, stderr=log
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(f"{url}/ui")
            _until_ready(url)
            yield url, db, sessions, folder
        finally:
            proc.terminate()
            proc.wait(10)


def _entries(folder: Path, session: str) -> list[dict]:
    """The transcript's messages (prompts, replies, tool results), in the order they were written."""
    lines = (folder / f"{session}.jsonl").read_text().splitlines()
    return [entry for entry in map(json.loads, lines) if entry["type"] in ("user", "assistant")]


def _texts(message: dict) -> str:
    return " ".join(p["text"] for p in message["parts"])


@pytest.mark.slow
def test_with_no_model_the_readiness_is_one_line_with_the_fix(recorded):
    url, *_ = recorded
    info = get(url, "/api/info", None).json()
    assert info["model_ready"] is False
    assert info["readiness"] == "Recording only: messages are kept and searchable."
    assert info["readiness_fix"] == (
        "To observe them, run `claude auth login` (Claude Code is not logged in), then restart om-mcp."
    )
    assert "\n" not in info["readiness"] + info["readiness_fix"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "claude", "line", "fix"),
    [
        (
            "auto",
            None,
            "Recording only",
            "set a provider key such as GEMINI_API_KEY, or install Claude Code and run `claude auth login`",
        ),
        ("auto", LOGGED_OUT, "Recording only", "run `claude auth login` (Claude Code is not logged in)"),
        ("gemini/gemini-2.5-flash", None, "Observation is paused", "gemini/gemini-2.5-flash needs GEMINI_API_KEY"),
        ("off", None, "Observation is off", "Set observational_memory.enabled = true"),
        (
            "capped",
            None,
            "Observation is paused by a spend cap",
            "daily budget of 1,000 tokens reached; resumes at 00:00 UTC (observational_memory.budget.daily_tokens)",
        ),
    ],
)
async def test_the_readiness_line_names_the_fix(tmp_path, monkeypatch, model, claude, line, fix):
    from om_mcp.config import Config
    from om_mcp.engine import Memory

    tools = tmp_path / "bin"
    tools.mkdir()
    if claude:
        (tools / "claude").write_text(claude)
        (tools / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))  # what this machine has installed plays no part
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in [n for n in os.environ if n.endswith(("_API_KEY", "_APPLICATION_CREDENTIALS"))]:
        monkeypatch.delenv(name)
    om: dict = {"enabled": False} if model == "off" else {"model": model}
    if model == "capped":  # a model that is ready, and today's tokens spent
        monkeypatch.setenv("GEMINI_API_KEY", "not-a-real-key")
        om = {"model": "gemini/gemini-2.5-flash", "budget": {"daily_tokens": 1000}}
    memory = await Memory.open(Config.model_validate({"db_path": str(tmp_path / "m.db"), "observational_memory": om}))
    try:
        if model == "capped":
            from datetime import UTC, datetime

            await memory.store.add_spend(datetime.now(UTC).date().isoformat(), "gemini/gemini-2.5-flash", 900, 200, 0)
        said = await memory.overview.readiness()
    finally:
        await memory.close()
    assert not said.ready and said.line.startswith(line) and fix in (said.fix or ""), said
    assert "`claude login`" not in said.line + (said.fix or "")
    documented = DOCS.read_text()
    assert said.line in documented and (
        model in ("capped",) or model.startswith("gemini") or f"| {said.line} {said.fix} |" in documented
    )


def test_the_docs_list_every_route_of_the_page():
    """docs/status-page.md's API table is the routes the page serves under /api/, method by method."""
    from om_mcp.server.http.ui.routes import ui_routes

    rows = re.findall(r"^\| (GET|PUT|POST|DELETE) \| `(/api/[^`]+)` \|", DOCS.read_text(), re.MULTILINE)
    served = {
        (method, route.path.replace(":path", ""))
        for route in ui_routes(None)  # type: ignore[arg-type]
        if route.path.startswith("/api/")
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert sorted(rows) == sorted(served)


@pytest.mark.slow
def test_sessions_are_titled_by_their_first_prompt_and_paths_stay_as_written(recorded):
    url, _, sessions, folder = recorded
    resources = [r["id"] for r in get(url, "/api/resources", None).json()]
    assert sorted(resources) == ["/home/alice/Projects/TeaShop", "/home/alice/Projects/dotfiles"]
    threads = {t["id"]: t for t in get(url, "/api/resources/%2Fhome%2Falice%2FProjects%2FTeaShop/threads", None).json()}
    login, ci = sessions[3], sessions[1]
    assert threads[ci]["title"] == "Why does test_checkout_total fail on CI but pass on my machine?"
    assert threads[ci]["title_from"] == "first-prompt"
    first = _entries(folder, login)[0]["message"]["content"]
    assert threads[login]["title"] == first[: first[:80].rfind(" ")].rstrip(" ,;:.-") + "…"  # cut on a word
    assert len(threads[login]["title"]) <= 81


@pytest.mark.slow
def test_the_messages_view_pages_newest_first(recorded):
    url, _, sessions, folder = recorded
    login = sessions[3]
    written = [e["uuid"] for e in _entries(folder, login)]
    first = get(url, f"/api/threads/{login}/messages?limit=20", None).json()
    assert first["total"] == len(written) == 36 and first["more"] is True
    assert [m["id"] for m in first["messages"]] == written[::-1][:20]
    assert first["next_before"] == first["messages"][-1]["id"]
    times = [m["created_at"] for m in first["messages"]]
    assert times == sorted(times, reverse=True)
    rest = get(url, f"/api/threads/{login}/messages?limit=20&before={first['next_before']}", None).json()
    assert [m["id"] for m in rest["messages"]] == written[::-1][20:]
    assert rest["more"] is False and rest["next_before"] is None
    tool = next(m for m in first["messages"] if m["role"] == "tool")
    assert tool["parts"][0]["type"] == "tool-result" and tool["parts"][0]["tool_name"]
    for query, status, words in (
        ("before=nope", 404, "no message 'nope'"),
        ("limit=0", 400, "limit: expected 1 to 100"),
        ("limit=101", 400, "limit"),
        ("q=x&before=y", 400, "give one of"),
        ("limit=x", 400, "non-negative integer"),
    ):
        answer = get(url, f"/api/threads/{login}/messages?{query}", None)
        assert answer.status_code == status and words in answer.json()["error"], (query, answer.text)
    assert get(url, "/api/threads/no-such-thread/messages", None).status_code == 404


@pytest.mark.slow
def test_the_messages_view_searches_with_the_engines_search(recorded):
    url, _, sessions, folder = recorded
    login, ci = sessions[3], sessions[1]
    found = get(url, f"/api/threads/{login}/messages?q=checkbox&limit=20", None).json()
    assert found["words"] == ["checkbox"] and found["query"] == "checkbox" and found["more"] is False
    # the engine's ranking: every message with the word, and replies found by the messages before them
    said = [m["id"] for m in get(url, f"/api/threads/{login}/messages?limit=100", None).json()["messages"]]
    holding = {e["uuid"] for e in _entries(folder, login) if "checkbox" in json.dumps(e["message"]).lower()}
    ranked = [m["id"] for m in found["messages"]]
    assert len(holding) >= 3 and holding <= set(ranked) and ranked[0] in holding
    assert all(
        m["id"] in holding or any(said[said.index(m["id"]) + k] in holding for k in (1, 2)) for m in found["messages"]
    )
    scores = [m["score"] for m in found["messages"]]
    assert scores == sorted(scores, reverse=True)
    # paged one at a time: the same ranking
    walked, offset = [], 0
    while offset is not None:
        page = get(url, f"/api/threads/{login}/messages?q=checkbox&limit=1&offset={offset}", None).json()
        walked += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert walked == [m["id"] for m in found["messages"]]
    # one thread's search: the other session's messages about the checkbox are not this thread's
    assert get(url, f"/api/threads/{ci}/messages?q=checkbox", None).json()["messages"] == []
    nothing = get(url, f"/api/threads/{login}/messages?q=the+and+of", None)
    assert nothing.status_code == 400 and "no searchable words" in nothing.json()["error"]
    # a long pasted log is cut in the page and read whole by its id
    paste = next(e["uuid"] for e in _entries(folder, ci) if str(e["message"]["content"]).startswith("Here is"))
    [pasted] = [
        m for m in get(url, f"/api/threads/{ci}/messages?limit=100", None).json()["messages"] if m["id"] == paste
    ]
    part = pasted["parts"][0]
    assert part["chars"] > len(part["text"]) == 4000
    whole = get(url, f"/api/threads/{ci}/messages?id={pasted['id']}", None).json()["messages"][0]["parts"][0]
    assert whole["chars"] == len(whole["text"]) and whole["text"].rstrip().endswith("FAILED [ 50%]")


@pytest.mark.slow
def test_a_thread_is_renamed_through_the_engine(recorded, tmp_path):
    url, db, sessions, _ = recorded
    deploy = sessions[0]
    put = partial(httpx.put, f"{url}/api/threads/{deploy}/title", timeout=30)
    renamed = put(json={"title": "  Index orders by date  "})
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["title"], renamed.json()["title_from"]) == ("Index orders by date", "set")
    listed = get(url, "/api/resources/%2Fhome%2Falice%2FProjects%2FTeaShop/threads", None).json()
    assert {t["id"]: t["title"] for t in listed}[deploy] == "Index orders by date"
    stored = subprocess.run(
        [PYTHON, "-m", "om_mcp", "threads", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=120,
    )
    assert stored.returncode == 0, stored.stderr
    assert "Index orders by date" in stored.stdout  # in the store: every other view sees it
    for body, words in (
        ({"title": ""}, "non-empty"),
        ({"title": "a\nb"}, "one line"),
        ({"title": "x" * 501}, "the limit is 500"),
        ({"name": "x"}, "expected a JSON body"),
    ):
        refused = put(json=body)
        assert refused.status_code == 400 and words in refused.json()["error"], (body, refused.text)
    assert put(content=b"title=x").status_code == 400  # a form another site could post
    assert httpx.put(f"{url}/api/threads/nope/title", json={"title": "x"}).status_code == 404
    assert {
        t["id"]: t["title"]
        for t in get(url, "/api/resources/%2Fhome%2Falice%2FProjects%2FTeaShop/threads", None).json()
    }[deploy] == "Index orders by date"


@pytest.mark.slow
def test_ui_with_and_without_the_slash(recorded):
    url, *_ = recorded
    slash = httpx.get(f"{url}/ui/?a=1", follow_redirects=False)
    assert slash.status_code == 308 and slash.headers["location"] == "../ui?a=1"
    for path in ("/ui", "/ui/"):
        page = httpx.get(url + path, follow_redirects=True)
        assert page.status_code == 200 and 'src="ui/app.js"' in page.text and str(page.url).endswith("/ui")


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_messages_view_shows_messages_in_a_real_browser(recorded, tmp_path):
    """Headless Chromium on `/ui/` (the slash form): a session with nothing observed opens on its
    messages, newest first, drawn where they can be seen; the header's readiness is one line."""
    binary = _chromium()
    url, _, sessions, folder = recorded
    login = sessions[3]
    written = [e["uuid"] for e in _entries(folder, login)][::-1]
    async with await open_page(f"{url}/ui/#thread={login}", binary=binary, size=(1280, 1000)) as page:
        await page.until("document.body.dataset.state === 'ready' && document.querySelectorAll('li.message').length")
        shown = await page.evaluate(
            "[...document.querySelectorAll('#messages li.message')].map((m) => m.dataset.message)"
        )
        assert shown == written[:20]
        assert await page.evaluate("document.getElementById('memory-view').hidden") is True
        assert (
            await page.evaluate("document.querySelector('.tab[data-view=messages]').getAttribute('aria-selected')")
            == "true"
        )
        assert await page.evaluate("location.pathname + location.hash") == f"/ui#thread={login}&view=messages"
        # the newest message is painted on screen: what is drawn at its middle belongs to it
        assert await page.evaluate(
            "(() => { const m = document.querySelector('#messages li.message'), r = m.getBoundingClientRect();"
            " const x = r.left + r.width / 2, y = r.top + r.height / 2;"
            " return r.height > 0 && r.bottom <= innerHeight && m.contains(document.elementFromPoint(x, y)); })()"
        )
        readiness = await page.evaluate("document.getElementById('readiness').innerText")
        assert readiness.startswith("Recording only") and "claude auth login" in readiness
        assert await page.evaluate("document.getElementById('readiness').getBoundingClientRect().height") < 40
        # paths as written (innerText is the text as CSS shows it, text-transform included)
        assert await page.evaluate(
            "[...document.querySelectorAll('#sidebar h2 .resource')].map((h) => h.innerText)"
        ) == ["/home/alice/Projects/TeaShop", "/home/alice/Projects/dotfiles"]
        titles = await page.evaluate("[...document.querySelectorAll('#sidebar a .title')].map((t) => t.textContent)")
        assert "Why does test_checkout_total fail on CI but pass on my machine?" in titles
        shot = await page.screenshot()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    (tmp_path / "messages.png").write_bytes(shot)


@pytest.mark.slow
@pytest.mark.anyio
async def test_older_messages_search_and_rename_in_a_real_browser(recorded):
    binary = _chromium()
    url, _, sessions, _ = recorded
    login, zsh = sessions[3], sessions[2]
    count = "document.querySelectorAll('#messages li.message').length"
    async with await open_page(f"{url}/ui#thread={login}", binary=binary) as page:
        await page.until(f"document.body.dataset.state === 'ready' && {count} === 20")
        await page.evaluate("document.getElementById('messages-more').click()")
        await page.until(f"{count} === 36")
        assert await page.evaluate("document.getElementById('messages-more').hidden") is True
        await page.evaluate("document.getElementById('message-search').value = 'checkbox'")
        await page.evaluate("document.querySelector('form.search').requestSubmit()")
        status = await page.until(
            "!document.getElementById('search-clear').hidden && document.getElementById('messages-status').textContent"
        )
        assert "match “checkbox”, best match first" in status
        marks = await page.evaluate(
            "[...document.querySelectorAll('#messages li.message')]"
            ".map((m) => [...m.querySelectorAll('mark')].map((k) => k.textContent.toLowerCase()))"
        )
        near = await page.evaluate(
            "[...document.querySelectorAll('#messages li.message')].map((m) => !!m.querySelector('.near'))"
        )
        assert any(marks) and all(set(m) <= {"checkbox"} for m in marks)
        assert near == [not m for m in marks]  # a hit without the word says why it is there
        await page.evaluate("document.getElementById('search-clear').click()")
        await page.until(f"document.getElementById('search-clear').hidden && {count} === 20")
        await page.evaluate("location.hash = ''")
        link = f"document.querySelector('#sidebar a[data-thread=\"{zsh}\"]')"
        await page.evaluate(f"{link}.click()")
        await page.until("document.getElementById('thread-title')?.textContent.startsWith('Make my zsh prompt')")
        await page.evaluate("document.getElementById('rename').click()")
        await page.until("!!document.getElementById('title-input')")
        await page.evaluate("document.getElementById('title-input').value = 'zsh: git branch in the prompt'")
        await page.evaluate("document.getElementById('title-save').click()")
        await page.until("document.getElementById('thread-title')?.textContent === 'zsh: git branch in the prompt'")
        await page.until(f"{link}.querySelector('.title').textContent === 'zsh: git branch in the prompt'")
        assert await page.evaluate("document.querySelector('.title-from').textContent") == "named by you or your client"
    listed = get(url, "/api/resources/%2Fhome%2Falice%2FProjects%2Fdotfiles/threads", None).json()
    assert [(t["title"], t["title_from"]) for t in listed] == [("zsh: git branch in the prompt", "set")]


XSS = [  # each, were it ever markup, adds an element with id="pwn"
    '<img id="pwn" src="x" onerror="document.title=\'PWNED\'">',
    '"><svg id="pwn" onload="document.title=\'PWNED\'">',
    '</pre></mark><b id="pwn">x</b> `code` pwn',
]


@pytest.mark.slow
@pytest.mark.anyio
async def test_message_text_and_a_first_prompt_title_stay_text_in_a_real_browser(own_site, tmp_path):
    """Messages are shown as text whatever they hold, in the list, in a search with its words marked,
    and as the title taken from the first prompt."""
    binary = _chromium()
    url, db = own_site
    transcript = tmp_path / "xss.jsonl"
    transcript.write_text("".join(json.dumps({"role": "user", "content": p}) + "\n" for p in XSS))
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "ingest", str(transcript), "--db", str(db), "--thread", "xss", "--resource", "alice"]
        + ["--no-worker"],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    async with await open_page(f"{url}/ui#token={ADMIN}&thread=xss", binary=binary) as page:
        await page.until("document.body.dataset.state === 'ready' && document.querySelectorAll('li.message').length")
        assert await page.evaluate("document.getElementById('thread-title').textContent") == XSS[0]
        await page.evaluate("document.getElementById('message-search').value = 'pwn onerror'")
        await page.evaluate("document.querySelector('form.search').requestSubmit()")
        await page.until("!document.getElementById('search-clear').hidden && !!document.querySelector('mark')")
        texts = await page.evaluate("[...document.querySelectorAll('#messages pre')].map((p) => p.textContent)")
        assert sorted(texts) == sorted(XSS)
        assert await page.evaluate("document.querySelectorAll('#pwn').length") == 0
        assert "PWNED" not in await page.evaluate("document.title")


# -- the series builder ---------------------------------------------------------------------


def test_series_places_messages_by_seq_and_resets_to_the_windows():
    windows = {"message_threshold": 1000, "observation_threshold": 500}
    messages = [
        (1, "2025-01-01T10:00:00+00:00", 400),
        (2, "2025-01-01T10:01:00+00:00", 700),
        (3, "2024-06-01T00:00:00+00:00", 300),
    ]  # appended after the cycle, with an old date
    events = [
        {"id": 7, "type": "data-om-observation-start", "created_at": "2025-01-01T10:01:10+00:00"},
        {
            "id": 8,
            "type": "data-om-observation-end",
            "completed_at": "2025-01-01T10:01:30+00:00",
            "operation_type": "observation",
            "duration_ms": 4000,
            "tokens_observed": 1100,
            "observation_tokens": 120,
            "model": "m",
            "usage": {"cost": 0.002},
            "windows": {**windows, "unobserved_tokens": 0, "observation_tokens": 120, "seq": 2},
        },
    ]
    series = build_series(events, message_threshold=1, observation_threshold=1, messages=messages)
    assert [(p.unobserved_tokens, p.observation_tokens, p.message_threshold) for p in series.points] == [
        (400, 0, 1),
        (1100, 0, 1),
        (0, 120, 1000),
        (300, 120, 1000),
    ]
    assert series.points[-1].at == "2025-01-01T10:01:30+00:00"  # clamped: the line runs forward
    (cycle,) = series.cycles
    assert (cycle.kind, cycle.duration_ms, cycle.cost, cycle.tokens_in, cycle.tokens_out) == (
        "observation",
        4000,
        0.002,
        1100,
        120,
    )


def test_series_without_windows_is_rebuilt_from_messages_and_token_deltas():
    messages = [("2025-01-01T10:00:00+00:00", 400), ("2025-01-01T10:01:00+00:00", 700), ("2025-01-01T10:05:00Z", 300)]
    events = [
        {
            "type": "data-om-buffering-end",
            "created_at": "2025-01-01T10:01:30+00:00",
            "tokens_buffered": 1100,
            "buffered_tokens": 90,
            "duration_ms": 2500,
        },
        {
            "type": "data-om-activation",
            "activated_at": "2025-01-01T10:02:00+00:00",
            "tokens_activated": 1100,
            "observation_tokens": 90,
        },
        {
            "type": "data-om-observation-failed",
            "failed_at": "2025-01-01T10:03:00+00:00",
            "duration_ms": 100,
            "tokens_attempted": 10,
            "error": "timeout",
        },
        {
            "type": "data-om-observation-end",
            "completed_at": "2025-01-01T10:06:00+00:00",
            "operation_type": "reflection",
            "tokens_observed": 90,
            "observation_tokens": 40,
            "duration_ms": 9000,
        },
    ]
    series = build_series(events, message_threshold=1000, observation_threshold=80, messages=messages)
    assert [(p.unobserved_tokens, p.observation_tokens) for p in series.points] == [
        (400, 0),
        (1100, 0),
        (1100, 0),
        (0, 90),
        (0, 90),
        (300, 90),
        (300, 40),
    ]
    assert [(c.kind, c.ok) for c in series.cycles] == [
        ("buffering", True),
        ("activation", True),
        ("observation", False),
        ("reflection", True),
    ]


def test_a_long_series_is_thinned_but_keeps_every_cycle():
    messages = [(n, f"2025-01-01T10:{n // 60:02d}:{n % 60:02d}+00:00", 10) for n in range(1, 3001)]
    events = [
        {
            "id": k,
            "type": "data-om-activation",
            "activated_at": f"2025-01-01T10:{k * 5:02d}:30+00:00",
            "tokens_activated": 10,
            "windows": {
                "unobserved_tokens": 0,
                "observation_tokens": k,
                "message_threshold": 100,
                "observation_threshold": 50,
                "seq": k * 300,
            },
        }
        for k in range(1, 10)
    ]
    series = build_series(events, message_threshold=100, observation_threshold=50, messages=messages, max_points=500)
    assert 400 <= len(series.points) <= 520 and len(series.cycles) == 9
    assert [p.observation_tokens for p in series.points if p.unobserved_tokens == 0] == list(range(1, 10))
    assert json.dumps([p.at for p in series.points]) == json.dumps(sorted(p.at for p in series.points))


def test_the_page_never_opens_the_mcp_endpoint_to_anonymous_callers(tmp_path):
    """With the MCP path at "/", "/" is the endpoint (auth required) and the page stays at /ui."""
    from starlette.testclient import TestClient

    from om_mcp.config import Config
    from om_mcp.server import build_server
    from om_mcp.server.http import build_http_app

    for path, anonymous_root in (("/", 401), ("/mcp", 200)):
        config = Config.model_validate(
            {
                "db_path": str(tmp_path / "x.db"),
                "server": {
                    "transport": "http",
                    "path": path,
                    "auth": {
                        "mode": "bearer",
                        "tokens": [{"name": "a", "hash": hash_token(ADMIN), "resources": ["*"]}],
                    },
                },
            }
        )
        client = TestClient(build_http_app(build_server(config), config))
        assert client.get("/", headers={"Host": "127.0.0.1"}).status_code == anonymous_root
        assert client.get("/ui", headers={"Host": "127.0.0.1"}).status_code == 200
        assert client.get("/api/resources", headers={"Host": "127.0.0.1"}).status_code == 401
