"""A `UiDataSource` over a scripted, simulated memory: for tests, screenshots and `--demo`.

`DemoDataSource.scripted()` plays a few hours of a conversation through a tiny
model of the engine (buffer every `buffer_tokens`, activate at the message
threshold keeping ~20%, reflect at the observation threshold) and records the
events the engine would, with the `windows` field the contract proposes. The
series the page draws is then built by the real `build_series`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from om_mcp.server.http.ui.contract import (
    Buffered, Event, EventPage, Forgotten, Generation, Group, Hints, ResourceSummary, ServerInfo, ThreadDetail,
    ThreadSeries, ThreadSummary, Window,
)
from om_mcp.server.http.ui.series import build_series

OBSERVATIONS = [
    "🔴 User is vegetarian and does not eat fish; every restaurant suggestion must respect it.",
    "🔴 User travels to Lisbon 14-17 October with their partner Sam; flights already booked.",
    "🟡 Assistant proposed Alfama and São Jorge castle for day 1; user liked it.",
    "🟡 User asked for a tasca without fish on the menu; assistant suggested Ao 26 Vegan Food Project.",
    "🔴 Budget for the trip is about 900 EUR excluding flights.",
    "🟡 User prefers walking and trams over taxis; tram 28 goes early to avoid queues.",
    "🟢 User mentioned Sam likes photography at sunset.",
    "🟡 Day 2 plan: Belém (monastery, MAAT), pastéis de Belém in the morning before 10:00.",
    "🔴 User must be back at the hotel by 18:00 on 16 Oct for a work call (Europe/Paris time).",
    "🟡 Assistant recommended Miradouro da Senhora do Monte for the sunset.",
    "🟢 User is reading Pessoa's Book of Disquiet before the trip.",
    "🟡 Day 3: Sintra day trip by train from Rossio, Pena palace tickets booked online for 10:30.",
    "🔴 Hotel: Memmo Alfama, check-in 15:00, confirmation in the user's email.",
    "🟡 User asked about rain: October averages 8 rainy days; pack a light jacket.",
    "🟢 User wants a fado evening; assistant suggested Tasca do Chico (no reservations).",
    "🟡 User asked to keep a running packing list in working memory.",
    "🟡 Assistant checked opening hours: Jerónimos closed on Mondays; day 2 is a Wednesday.",
    "🟢 Sam is allergic to cats; avoid the guesthouse with the resident cat.",
    "🟡 User asked for a vegetarian pastel de nata alternative; all are vegetarian (no fish).",
    "🔴 Train to Sintra leaves Rossio every 20 min; user chose the 09:11 train.",
    "🟡 Assistant suggested the Navigator card for trams and metro; user will buy it at the airport.",
    "🟢 User likes bookshops; Livraria Bertrand (oldest bookshop) added to day 1.",
    "🟡 User asked to move the fado evening to 15 Oct because of the 16 Oct call.",
    "🔴 User's phone plan has no EU roaming data after 5 GB; offline maps downloaded.",
    "🟡 Assistant proposed LX Factory on day 2 afternoon; user agreed, Sam wants the bookshop there too.",
    "🟢 User wants to try ginjinha in a small cup of chocolate.",
    "🟡 Packing list updated: adapters not needed (same plugs as France).",
    "🟡 Pena palace: park tickets are separate; user booked the combined ticket.",
    "🔴 Return flight 17 Oct 19:40 from LIS; leave the hotel by 17:00.",
    "🟡 User asked for a quiet dinner spot near the hotel on the last night.",
]
REFLECTIONS = [
    "🔴 Lisbon trip 14-17 Oct with Sam; hotel Memmo Alfama; budget ~900 EUR; vegetarian, no fish.",
    "🔴 Fixed constraint: back at the hotel by 18:00 on 16 Oct for a work call.",
    "🟡 Itinerary agreed: day 1 Alfama + castle, day 2 Belém, day 3 Sintra (Pena 10:30, train from Rossio).",
    "🟡 Preferences: walking and trams, sunset viewpoints for Sam's photography, a fado evening at Tasca do Chico.",
    "🟢 Reading Pessoa before the trip; light jacket for rain.",
]
WORKING_MEMORY = """# Alice
- Diet: vegetarian, no fish
- Travels with: Sam (partner, photography)
- Time zone: Europe/Paris

# Lisbon packing list
- light rain jacket
- walking shoes
- camera charger (Sam)
- printed Pena tickets"""


@dataclass
class _Thread:
    summary: ThreadSummary
    generations: list[Generation] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    messages: list[tuple[str, int]] = field(default_factory=list)
    hints: Hints = field(default_factory=Hints)
    buffered: Buffered = field(default_factory=Buffered)


class DemoDataSource:
    def __init__(self, message_threshold: int = 12_000, observation_threshold: int = 8_000) -> None:
        self.message_threshold = message_threshold
        self.observation_threshold = observation_threshold
        self._resource_wm: dict[str, str | None] = {}
        self._threads: dict[str, _Thread] = {}

    @classmethod
    def scripted(cls, seed: int = 7, start: datetime | None = None) -> "DemoDataSource":
        demo = cls()
        start = start or datetime(2025, 10, 2, 8, 30, tzinfo=timezone.utc)
        demo._resource_wm["alice"] = WORKING_MEMORY
        demo._simulate("t-lisbon", "alice", "Lisbon trip planning", start, 110, random.Random(seed))
        demo._simulate("t-postgres", "alice", "Postgres exclusion constraints", start - timedelta(days=3), 24,
                       random.Random(seed + 1))
        demo._simulate("t-sourdough", "alice", "Sourdough starter schedule", start - timedelta(days=9), 8,
                       random.Random(seed + 2))
        demo._resource_wm["team-infra"] = None
        demo._simulate("t-deploy", "team-infra", "Blue-green deploy runbook", start - timedelta(days=1), 40,
                       random.Random(seed + 3))
        return demo

    # -- the UiDataSource methods --------------------------------------------------------

    async def info(self) -> ServerInfo:
        return ServerInfo(version="demo", database="demo (simulated memory)", scope="thread",
                          message_threshold=self.message_threshold, observation_threshold=self.observation_threshold,
                          observer_model="gemini/gemini-2.5-flash", reflector_model="gemini/gemini-2.5-flash")

    async def resources(self) -> list[ResourceSummary]:
        out = []
        for rid, wm in self._resource_wm.items():
            threads = [t.summary for t in self._threads.values() if t.summary.resource_id == rid]
            out.append(ResourceSummary(id=rid, threads=len(threads), messages=sum(t.messages for t in threads),
                                       updated_at=max((t.updated_at for t in threads), default=None),
                                       working_memory=wm))
        return out

    async def threads(self, resource_id: str) -> list[ThreadSummary] | None:
        if resource_id not in self._resource_wm:
            return None
        found = [t.summary for t in self._threads.values() if t.summary.resource_id == resource_id]
        return sorted(found, key=lambda s: s.updated_at, reverse=True)

    async def thread(self, thread_id: str) -> ThreadDetail | None:
        t = self._threads.get(thread_id)
        if t is None:
            return None
        s = t.summary
        return ThreadDetail(
            thread=s, record_key=f"thread:{thread_id}", scope="thread",
            working_memory=self._resource_wm.get(s.resource_id), working_memory_scope="resource",
            hints=t.hints, extracted={"thread_title": s.title},
            messages_window=Window(tokens=s.unobserved_tokens, threshold=self.message_threshold),
            observations_window=Window(tokens=s.observation_tokens, threshold=self.observation_threshold),
            buffered=t.buffered, generations=t.generations,
        )

    async def events(self, thread_id: str, after: int | None, limit: int) -> EventPage | None:
        t = self._threads.get(thread_id)
        if t is None:
            return None
        page = [e for e in t.events if after is None or e.id > after][:limit]
        return EventPage(events=page, next_after=page[-1].id if page else after)

    async def series(self, thread_id: str) -> ThreadSeries | None:
        t = self._threads.get(thread_id)
        if t is None:
            return None
        raw = [{"type": e.type, "created_at": e.at, "cycle_id": e.cycle_id, **e.payload} for e in t.events]
        return build_series(raw, message_threshold=self.message_threshold,
                            observation_threshold=self.observation_threshold, messages=t.messages)

    async def forget_thread(self, thread_id: str) -> Forgotten | None:
        t = self._threads.pop(thread_id, None)
        return None if t is None else Forgotten(thread_id=thread_id, messages=t.summary.messages)

    # -- the simulation ------------------------------------------------------------------

    def _simulate(self, tid: str, rid: str, title: str, start: datetime, count: int, rng: random.Random) -> None:
        buffer_tokens = self.message_threshold // 5
        t = _Thread(ThreadSummary(id=tid, resource_id=rid, title=title, messages=count, unobserved_tokens=0,
                                  observation_tokens=0, generation=0, created_at=start.isoformat(),
                                  updated_at=start.isoformat()))
        self._threads[tid] = t
        groups: list[Group] = []
        chunks: list[tuple[int, int, str]] = []  # (message tokens, observation tokens, text)
        unobserved = observations = buffered_from = generation = 0
        lines = iter(OBSERVATIONS * 50)
        now = start

        def emit(kind: str, at: datetime, **payload: Any) -> None:
            payload["windows"] = {"unobserved_tokens": unobserved, "observation_tokens": observations,
                                  "message_threshold": self.message_threshold,
                                  "observation_threshold": self.observation_threshold}
            cycle = payload.pop("cycle_id", None)
            t.events.append(Event(id=len(t.events) + 1, type=kind, at=at.isoformat(), cycle_id=cycle, payload=payload))

        for i in range(count):
            now += timedelta(seconds=rng.randint(40, 150))
            tokens = rng.randint(150, 500) if i % 2 == 0 else rng.randint(500, 1900)
            t.messages.append((now.isoformat(), tokens))
            unobserved += tokens
            emit("data-om-tokens", now)
            if unobserved - buffered_from >= buffer_tokens:
                cycle = f"c{tid}{len(t.events)}"
                took = rng.randint(3000, 9000)
                done = now + timedelta(milliseconds=took)
                size = unobserved - buffered_from
                picked = [next(lines) for _ in range(rng.randint(1, 2))]
                text = "\n".join(f"* {line[0]} ({now:%H:%M}){line[1:]}" for line in picked)
                chunks.append((size, int(size * rng.uniform(0.11, 0.16)), text))
                buffered_from = unobserved
                emit("data-om-buffering-start", now, cycle_id=cycle, operation_type="observation",
                     tokens_to_buffer=size)
                emit("data-om-buffering-end", done, cycle_id=cycle, operation_type="observation",
                     trigger="async-buffer", duration_ms=took, tokens_buffered=size, buffered_tokens=chunks[-1][1],
                     model="gemini/gemini-2.5-flash", usage={"cost": round(size * 3e-7 + 2e-4, 6)}, observations=text)
            if unobserved >= self.message_threshold and chunks:
                keep = self.message_threshold * 0.2
                while chunks and unobserved > keep + 200:
                    size, obs, text = chunks.pop(0)
                    unobserved -= size
                    buffered_from -= size
                    observations += obs
                    groups.append(Group(id=f"g{tid}{len(t.events)}", position=len(groups), kind="observation",
                                        text=text, tokens=obs, thread_id=tid, observed_at=now.isoformat(),
                                        created_at=now.isoformat()))
                    emit("data-om-activation", now, cycle_id=f"a{tid}{len(t.events)}", operation_type="observation",
                         triggered_by="threshold", tokens_activated=size, observation_tokens=obs, chunks_activated=1)
            if observations >= self.observation_threshold:
                took = rng.randint(14000, 32000)
                done = now + timedelta(milliseconds=took)
                t.generations.append(Generation(generation=generation, current=False,
                                                created_at=groups[0].created_at if groups else None,
                                                tokens=observations, groups=groups))
                before = observations
                observations = int(before * rng.uniform(0.3, 0.4))
                generation += 1
                lines = iter(OBSERVATIONS[::-1] * 50)  # what comes after the reflection is new
                text = "\n".join(f"* {line}" for line in REFLECTIONS)
                groups = [Group(id=f"r{tid}{generation}", position=0, kind="reflection", text=text,
                                tokens=observations, observed_at=now.isoformat(), created_at=done.isoformat())]
                emit("data-om-observation-end", done, cycle_id=f"r{tid}{generation}", operation_type="reflection",
                     trigger="threshold", duration_ms=took, tokens_observed=before, observation_tokens=observations,
                     model="gemini/gemini-2.5-flash", usage={"cost": round(before * 3e-7 + 1e-3, 6)})
        t.generations.append(Generation(generation=generation, current=True,
                                        created_at=groups[0].created_at if groups else None,
                                        tokens=observations, groups=groups))
        t.buffered = Buffered(chunks=len(chunks), message_tokens=sum(c[0] for c in chunks),
                              observation_tokens=sum(c[1] for c in chunks))
        t.hints = Hints(current_task="Finalising day 3 (Sintra) and the packing list",
                        suggested_response="Confirm the Pena palace time slot, then update the packing list.")
        t.summary = t.summary.model_copy(update={
            "unobserved_tokens": unobserved, "observation_tokens": observations, "generation": generation,
            "updated_at": now.isoformat(), "last_observed_at": groups[-1].observed_at if groups else None})


def demo_app(source: DemoDataSource | None = None):
    """A Starlette app serving the status page over the scripted demo memory."""
    from starlette.applications import Starlette

    from om_mcp.server.http.ui.routes import ui_routes

    return Starlette(routes=ui_routes(source or DemoDataSource.scripted()))


def main(argv: list[str] | None = None) -> None:
    """Serve the demo (`--port`), or write a screenshot of a thread and exit (`--screenshot`)."""
    import argparse
    import time
    from pathlib import Path

    from om_mcp.server.http.ui.headless import run_chromium, serve

    parser = argparse.ArgumentParser(prog="python -m om_mcp.server.http.ui.demo")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--screenshot", type=Path, help="write a PNG of the thread view and exit")
    parser.add_argument("--thread", default="t-lisbon")
    parser.add_argument("--size", default="1400x1750", help="WIDTHxHEIGHT of the screenshot")
    args = parser.parse_args(argv)
    with serve(demo_app(), port=args.port) as url:
        if args.screenshot:
            width, height = (int(v) for v in args.size.split("x"))
            run_chromium(f"{url}/#thread={args.thread}", screenshot=args.screenshot, size=(width, height))
            print(f"wrote {args.screenshot}")
            return
        print(f"status page demo at {url}/  (Ctrl-C stops)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
