"""The status page: its JSON API over a data source, the series builder, and the page in headless Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from om_mcp.server.http.ui.contract import EventPage, ThreadDetail, ThreadSeries
from om_mcp.server.http.ui.demo import DemoDataSource, demo_app
from om_mcp.server.http.ui.headless import find_chromium, run_chromium, serve
from om_mcp.server.http.ui.routes import ui_routes
from om_mcp.server.http.ui.series import build_series


@pytest.fixture
def client():
    return TestClient(Starlette(routes=ui_routes(DemoDataSource.scripted())))


def test_static_files_are_served_with_a_strict_policy(client):
    for path in ("/", "/ui"):
        page = client.get(path)
        assert page.status_code == 200 and 'src="ui/app.js"' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/style.css").headers["content-type"].startswith("text/css")
    assert "http" not in client.get("/ui/app.js").text.replace("http://www.w3.org/2000/svg", "")  # nothing remote


def test_api_lists_resources_threads_and_a_thread(client):
    resources = client.get("/api/resources").json()
    assert [(r["id"], r["threads"]) for r in resources] == [("alice", 3), ("team-infra", 1)]
    threads = client.get("/api/resources/alice/threads").json()
    assert threads[0]["id"] == "t-lisbon" and threads[0]["messages"] == 110
    detail = ThreadDetail.model_validate(client.get("/api/threads/t-lisbon").json())
    assert [g.generation for g in detail.generations] == [0, 1] and detail.generations[-1].current
    assert detail.generations[1].groups[0].kind == "reflection"
    assert detail.observations_window.threshold == 8000
    series = ThreadSeries.model_validate(client.get("/api/threads/t-lisbon/series").json())
    assert len(series.points) > 100 and {c.kind for c in series.cycles} == {"buffering", "activation", "reflection"}


def test_events_page_after_an_id(client):
    first = EventPage.model_validate(client.get("/api/threads/t-lisbon/events?limit=5").json())
    assert [e.id for e in first.events] == [1, 2, 3, 4, 5] and first.next_after == 5
    after = EventPage.model_validate(client.get("/api/threads/t-lisbon/events?after=5&limit=2").json())
    assert [e.id for e in after.events] == [6, 7]
    total = len(client.get("/api/threads/t-lisbon/events?limit=500").json()["events"])
    end = client.get(f"/api/threads/t-lisbon/events?after={total}").json()
    assert end == {"events": [], "next_after": total}


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/api/threads/nope", 404, "unknown thread 'nope'"),
        ("GET", "/api/threads/nope/series", 404, "unknown thread 'nope'"),
        ("GET", "/api/threads/nope/events", 404, "unknown thread 'nope'"),
        ("GET", "/api/resources/nobody/threads", 404, "unknown resource 'nobody'"),
        ("GET", "/api/threads/t-lisbon/events?after=-1", 400, "after: expected a non-negative integer, got '-1'"),
        ("GET", "/api/threads/t-lisbon/events?limit=0", 400, "limit: expected 1 to 500"),
        ("DELETE", "/api/threads/nope", 404, "unknown thread 'nope'"),
    ],
)
def test_bad_requests_say_what_is_wrong(client, method, path, status, error):
    response = client.request(method, path)
    assert response.status_code == status and response.json() == {"error": error}


def test_forget_deletes_the_thread(client):
    assert client.delete("/api/threads/t-sourdough").json() == {"thread_id": "t-sourdough", "messages": 8}
    assert client.get("/api/threads/t-sourdough").status_code == 404
    assert [t["id"] for t in client.get("/api/resources/alice/threads").json()] == ["t-lisbon", "t-postgres"]
    assert client.post("/api/threads/t-lisbon").status_code == 405  # nothing else writes


def test_series_uses_the_windows_events_carry():
    events = [
        {"type": "data-om-tokens", "at": "2025-01-01T10:00:00+00:00",
         "windows": {"unobserved_tokens": 900, "observation_tokens": 0, "message_threshold": 1000,
                     "observation_threshold": 500}},
        {"type": "data-om-observation-start", "started_at": "2025-01-01T10:00:01+00:00"},
        {"type": "data-om-observation-end", "completed_at": "2025-01-01T10:00:05+00:00", "operation_type": "observation",
         "duration_ms": 4000, "tokens_observed": 900, "observation_tokens": 120, "model": "m", "usage": {"cost": 0.002},
         "windows": {"unobserved_tokens": 30, "observation_tokens": 120, "message_threshold": 1000,
                     "observation_threshold": 500}},
    ]
    series = build_series(events, message_threshold=1, observation_threshold=1, messages=[("2025-01-01T09:00", 5)])
    assert [(p.unobserved_tokens, p.observation_tokens, p.message_threshold) for p in series.points] == [
        (900, 0, 1000), (30, 120, 1000)]  # messages ignored: the samples are exact
    (cycle,) = series.cycles
    assert (cycle.kind, cycle.duration_ms, cycle.cost, cycle.tokens_in, cycle.tokens_out) == (
        "observation", 4000, 0.002, 900, 120)


def test_series_without_windows_is_rebuilt_from_messages_and_token_deltas():
    messages = [("2025-01-01T10:00:00+00:00", 400), ("2025-01-01T10:01:00+00:00", 700),
                ("2025-01-01T10:05:00Z", 300)]
    events = [
        {"type": "data-om-buffering-end", "created_at": "2025-01-01T10:01:30+00:00", "tokens_buffered": 1100,
         "buffered_tokens": 90, "duration_ms": 2500},
        {"type": "data-om-activation", "activated_at": "2025-01-01T10:02:00+00:00", "tokens_activated": 1100,
         "observation_tokens": 90},
        {"type": "data-om-observation-failed", "failed_at": "2025-01-01T10:03:00+00:00", "duration_ms": 100,
         "tokens_attempted": 10, "error": "timeout"},
        {"type": "data-om-observation-end", "completed_at": "2025-01-01T10:06:00+00:00", "operation_type": "reflection",
         "tokens_observed": 90, "observation_tokens": 40, "duration_ms": 9000},
    ]
    series = build_series(events, message_threshold=1000, observation_threshold=80, messages=messages)
    assert [(p.unobserved_tokens, p.observation_tokens) for p in series.points] == [
        (400, 0), (1100, 0), (1100, 0), (0, 90), (0, 90), (300, 90), (300, 40)]
    assert [(c.kind, c.ok) for c in series.cycles] == [
        ("buffering", True), ("activation", True), ("observation", False), ("reflection", True)]


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
        return [a for t, a in self.elements if t == tag and (cls is None or cls in a.get("class", "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def _chromium():
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary on this machine (apt-get install chromium, or set CHROMIUM)")
    return binary


def test_the_page_draws_plots_and_the_log_in_a_real_browser():
    binary = _chromium()
    source = DemoDataSource.scripted()
    with serve(demo_app(source)) as url:
        html = run_chromium(f"{url}/#thread=t-lisbon", binary=binary, budget_ms=8000)
    dom = _Dom()
    dom.feed(html)
    text = " ".join(dom.text)
    body = dom.find("body")[0]
    assert body.get("data-state") == "ready", re.sub(r"\s+", " ", text)[-400:]
    assert [a["data-thread"] for a in dom.find("a") if "data-thread" in a] == [
        "t-lisbon", "t-postgres", "t-sourdough", "t-deploy"]
    assert dom.find("a", "current", data_thread="t-lisbon")
    # the two window plots: a series and a dashed threshold, each a path through every point
    for key in ("unobserved_tokens", "observation_tokens"):
        assert dom.find("div", "chart", data_chart=key)
    series = dom.find("path", "series")
    thresholds = dom.find("path", "threshold")
    assert len(series) == 2 and len(thresholds) == 2
    for path in series + thresholds:
        points = int(path["data-points"])
        assert points > 100 and len(re.findall(r"[MHV]", path["d"])) == 1 + 2 * (points - 1)
    # latency and cost: one bar per cycle that called a model (activations call none)
    import asyncio

    cycles = asyncio.run(source.series("t-lisbon")).cycles
    with_model = [c for c in cycles if c.duration_ms is not None]
    assert len(dom.find("rect", "bar")) == len(with_model) + len([c for c in cycles if c.cost is not None])
    assert dom.find("rect", "k-reflection")
    # the log: both generations side by side, with the reflection's text
    first = asyncio.run(source.thread("t-lisbon")).generations[0]
    assert f"Generation 0 · {first.tokens:,} tokens · {len(first.groups)} groups" in text
    assert "Generation 1 (current)" in text
    assert dom.find("div", "group", data_generation="0") and dom.find("div", "reflection", data_generation="1")
    assert "Itinerary agreed: day 1 Alfama" in text
    # events, newest first, token samples left out
    events = dom.find("li")
    assert events and "data-om-tokens" not in text and "activated" in text
    assert "Forget thread…" in text and "Forget this thread" not in text  # asks only when clicked


def test_a_screenshot_is_written(tmp_path):
    binary = _chromium()
    shot = tmp_path / "status.png"
    with serve(demo_app()) as url:
        run_chromium(f"{url}/#thread=t-lisbon", binary=binary, screenshot=shot, size=(1200, 900))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
