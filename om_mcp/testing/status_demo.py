"""A realistic scripted run through the real engine: for the status page's screenshot,
its browser test, and trying the page (`python -m om_mcp.testing.status_demo`).

`fill(db_path)` plays four conversations (two resources) into a database through
`Memory`, message by message, with an agent turn (`get_context`) before each reply,
so buffering, activation and reflection happen as they do in use. The model is
scripted (`om_mcp.testing.ScriptedModel`): real calls of a few hundred
milliseconds, with token usage and a cost. The clock is simulated from a fixed
start so that a morning of chatting plays in seconds: every `now_iso` in om_mcp
reads it while the run lasts (durations stay real).
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

START = datetime(2025, 10, 2, 8, 30, tzinfo=UTC)
MODEL = "gemini/gemini-2.5-flash"
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
    "🟡 Assistant checked opening hours: Jerónimos closed on Mondays; day 2 is a Wednesday.",
    "🟢 Sam is allergic to cats; avoid the guesthouse with the resident cat.",
    "🔴 Train to Sintra leaves Rossio every 20 min; user chose the 09:11 train.",
    "🟡 Assistant suggested the Navigator card for trams and metro; user will buy it at the airport.",
    "🟢 User likes bookshops; Livraria Bertrand (oldest bookshop) added to day 1.",
    "🟡 User asked to move the fado evening to 15 Oct because of the 16 Oct call.",
    "🔴 Return flight 17 Oct 19:40 from LIS; leave the hotel by 17:00.",
]
REFLECTION = [
    "🔴 Lisbon trip 14-17 Oct with Sam; hotel Memmo Alfama; budget ~900 EUR; vegetarian, no fish.",
    "🔴 Fixed constraint: back at the hotel by 18:00 on 16 Oct for a work call.",
    "🟡 Itinerary agreed: day 1 Alfama + castle, day 2 Belém, day 3 Sintra (Pena 10:30, train from Rossio).",
    "🟡 Preferences: walking and trams, sunset viewpoints for Sam's photography, fado at Tasca do Chico.",
]
SENTENCES = [
    "The castle opens at nine, and the first hour is the quietest.",
    "Tram 28 fills up by ten in the morning.",
    "Most tascas in Alfama serve fish, so it is worth checking the menu before sitting down.",
    "A Navigator card covers the metro, the trams and the Santa Justa lift.",
    "From Rossio the Sintra train takes about forty minutes.",
    "Pena palace asks for a timed ticket.",
    "The miradouros are free and open late.",
    "October evenings are mild but it can rain in the afternoon.",
    "Belém is a short ride on the 15E tram from Praça da Figueira.",
    "The monastery closes on Mondays.",
    "A fado house usually has a minimum spend rather than a cover charge.",
    "Bookshops in Chiado stay open late.",
]
THREADS = [  # (thread id, resource, title, messages, start offset)
    ("t-lisbon", "alice", "Lisbon trip planning", 96, timedelta(0)),
    ("t-postgres", "alice", "Postgres exclusion constraints", 20, timedelta(days=-3)),
    ("t-sourdough", "alice", "Sourdough starter schedule", 8, timedelta(days=-9)),
    ("t-deploy", "team-infra", "Blue-green deploy runbook", 30, timedelta(days=-1)),
]
WORKING_MEMORY = (
    "# Alice\n- Diet: vegetarian, no fish\n- Travels with: Sam (partner, photography)\n"
    "- Time zone: Europe/Paris\n\n# Lisbon packing list\n- light rain jacket\n- walking shoes"
)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def iso(self) -> str:
        return self.now.isoformat()


@contextmanager
def simulated(clock: Clock) -> Iterator[Clock]:
    """Every om_mcp module's `now_iso` reads `clock` while the block runs."""
    patched: list[Any] = [  # modules, with a `now_iso` of their own
        m
        for name, m in list(sys.modules.items())
        if name.startswith("om_mcp.") and callable(getattr(m, "now_iso", None))
    ]
    saved = [m.now_iso for m in patched]
    for module in patched:
        module.now_iso = clock.iso
    try:
        yield clock
    finally:
        for module, original in zip(patched, saved):
            module.now_iso = original


def demo_config(db_path: str | Path):
    from om_mcp.config import Config

    return Config.model_validate(
        {
            "db_path": str(db_path),
            "default_resource_id": "alice",
            "observational_memory": {
                "scope": "thread",
                "model": MODEL,
                "observation": {"message_tokens": 8000},
                "reflection": {"observation_tokens": 1200},
            },
            "working_memory": {"scope": "resource"},
        }
    )


def _model(clock: Clock, rng: random.Random, latency: tuple[float, float]):
    from om_mcp.models.base import Completion, Usage
    from om_mcp.testing import ScriptedModel

    lines = iter(OBSERVATIONS * 40)

    async def reply(messages: list[dict[str, Any]], target: Any) -> Completion:
        took = rng.uniform(*latency)
        await anyio.sleep(took)
        clock.now += timedelta(seconds=took)
        prompt = "\n".join(str(m.get("content")) for m in messages)
        if "<memory-log>" in prompt:  # the Reflector
            text = "<observations>\nDate: Oct 2, 2025\n" + "\n".join(f"* {r}" for r in REFLECTION) + "\n</observations>"
        else:
            stamp = clock.now.strftime("%H:%M")
            picked = [next(lines) for _ in range(rng.randint(2, 4))]
            text = (
                "<observations>\nDate: Oct 2, 2025\n"
                + "\n".join(f"* {p[0]} ({stamp}){p[1:]}" for p in picked)
                + "\n</observations>\n<current-task>Finalising day 3 (Sintra) and the packing list</current-task>"
                "\n<suggested-response>Confirm the Pena time slot, then update the packing list.</suggested-response>"
            )
        tokens_in, tokens_out = len(prompt) // 4, len(text) // 4
        return Completion(
            text=text,
            model=MODEL,
            usage=Usage(
                input_tokens=tokens_in, output_tokens=tokens_out, cost=round(tokens_in * 3e-7 + tokens_out * 2.5e-6, 6)
            ),
        )

    return ScriptedModel(reply)


def _text(rng: random.Random, role: str) -> str:
    count = rng.randint(2, 6) if role == "user" else rng.randint(18, 70)
    return " ".join(rng.choice(SENTENCES) for _ in range(count))


async def fill(db_path: str | Path, *, seed: int = 7, latency: tuple[float, float] = (0.05, 0.3)) -> None:
    """Play the scripted conversations into `db_path` through the engine."""
    from om_mcp.engine.memory import Memory

    # Loaded before `simulated` patches what is loaded: the SQLite store, and the rules the store
    # itself loads on their first call (`store/operations.py`).
    for name in ("sqlite.store", "commits", "forget", "overview", "spend", "transfer", "vectors"):
        importlib.import_module(f"om_mcp.store.{name}")

    clock = Clock(START)
    rng = random.Random(seed)
    with simulated(clock):
        memory = await Memory.open(demo_config(db_path), client=_model(clock, rng, latency))
        try:
            for thread_id, resource, title, count, offset in THREADS:
                clock.now = START + offset
                for n in range(count):
                    role = "user" if n % 2 == 0 else "assistant"
                    clock.now += timedelta(seconds=rng.randint(40, 150))
                    if role == "assistant":
                        await memory.get_context(thread_id, resource)  # the agent's turn
                    await memory.append_messages(
                        thread_id,
                        [
                            {
                                "id": f"{thread_id}-{n}",
                                "role": role,
                                "content": _text(rng, role),
                                "created_at": clock.iso(),
                            }
                        ],
                        resource,
                        thread_metadata={"title": title},
                    )
                if thread_id == "t-lisbon":
                    await memory.update_working_memory(thread_id, WORKING_MEMORY, resource)
        finally:
            await memory.close()


def main(argv: list[str] | None = None) -> int:
    """Fill a database (`--db`, default a temporary one) and serve it with `om-mcp serve
    --transport http`, or write a screenshot of a thread and exit (`--screenshot`). With
    `--recorded`, the memory is what the hooks record with no model (`recorded_demo`), served
    with no model key and a home of its own, so no login of this machine's is used."""
    import argparse
    import os
    import subprocess
    import tempfile

    from om_mcp.testing.headless import run_chromium, wait_for
    from om_mcp.testing.ports import free_port
    from om_mcp.testing.recorded_demo import fill_recorded

    parser = argparse.ArgumentParser(prog="python -m om_mcp.testing.status_demo")
    parser.add_argument("--db", type=Path, help="the database to fill (default: a temporary file)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--screenshot", type=Path, help="write a PNG of the thread view and exit")
    parser.add_argument("--thread", help="the thread to show (default: t-lisbon; recorded: the newest session)")
    parser.add_argument("--recorded", action="store_true", help="a model-less memory recorded by the hooks")
    parser.add_argument("--size", default="1280x1240", help="WIDTHxHEIGHT of the screenshot")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="om-demo-") as folder:
        db = args.db or Path(folder) / "demo.db"
        env = None
        thread = args.thread or "t-lisbon"
        if args.recorded:
            home = Path(folder) / "home"
            home.mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
            env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"))
            env.update(XDG_CONFIG_HOME=str(home / "config"))
            sessions = fill_recorded(db, env=env)
            thread = args.thread or sessions[-1]
        elif not db.exists():
            anyio.run(fill, db)
        port = args.port or free_port()
        config = [] if args.recorded else ["--config", str(_config_file(Path(folder)))]
        server = subprocess.Popen(
            [sys.executable, "-m", "om_mcp", "serve", "--transport", "http", "--port", str(port), "--db", str(db)]
            + config,
            env=env,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(f"{url}/ui")
            if args.screenshot:
                width, height = (int(v) for v in args.size.split("x"))
                run_chromium(f"{url}/ui#thread={thread}", screenshot=args.screenshot, size=(width, height))
                print(f"wrote {args.screenshot}")
                return 0
            print(f"status page at {url}/ui  (Ctrl-C stops)")
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.terminate()
            server.wait(10)
    return 0


def _config_file(folder: Path) -> Path:
    """The demo's thresholds and scope for the server (its model is never called: nothing is pending)."""
    path = folder / "demo.toml"
    path.write_text(
        f'default_resource_id = "alice"\n[observational_memory]\nscope = "thread"\nenabled = false\n'
        f'model = "{MODEL}"\n'
        "[observational_memory.observation]\nmessage_tokens = 8000\n"
        "[observational_memory.reflection]\nobservation_tokens = 1200\n"
    )
    return path


if __name__ == "__main__":
    raise SystemExit(main())
