"""A turn never pays for a model that cannot answer: get_context latency and stderr noise over stdio.

Starts the real server (`python -m om_mcp serve`) once per case and plays TURNS turns (append a user/assistant
exchange, then get_context), the thread passing `block_after` (1.2x a 400-token threshold) by turn 4:
  * healthy: the scripted OpenAI-compatible server on loopback answers;
  * no key: gemini/gemini-2.5-flash with no GEMINI_API_KEY;
  * unreachable: an api_base on a closed loopback port;
  * http 503: the scripted server answers every call with 503.
Prints per case the get_context median, p99 and max (ms), the p99 ratio to healthy (target <= 2), turns over
200 ms, and stderr lines. Run with `.venv/bin/python benchmarks/no_key.py [turns] [warm-up seconds]`.
"""

from __future__ import annotations

import os
import shlex
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from om_mcp.testing.fake_server import FakeLLMServer  # noqa: E402

TURNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
# Before the measured turns, a warm-up thread passes the threshold and the server gets this long to import
# litellm (2.5 s idle, 10 s+ on a busy machine) and make its first call: the measured turns then meet a loaded
# client, and a failing model is one the server already knows about.
WARM_SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 15.0
WORDS = "the deployment notes mention regions, budgets and the rollback plan " * 3


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(tmp: Path, model_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(
        HOME=str(tmp),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="400",
        **model_env,
    )
    return env


async def play(tmp: Path, model_env: dict[str, str]) -> tuple[list[float], int]:
    stderr = tmp / "stderr.log"
    command = shlex.join([sys.executable, "-m", "om_mcp", "serve", "--db", str(tmp / "om.db")])
    params = StdioServerParameters(
        command="sh",
        args=["-c", f"exec {command} 2>{shlex.quote(str(stderr))}"],
        env=environment(tmp, model_env),
        cwd=str(REPO),
    )
    times = []
    async with Client(params) as client:
        for turn in range(4):
            await client.call_tool(
                "append_messages", {"thread_id": "warm-up", "user": f"warm {turn}: {WORDS}", "assistant": WORDS}
            )
        await client.call_tool("get_context", {"thread_id": "warm-up"})
        await anyio.sleep(WARM_SECONDS)
        for turn in range(TURNS):
            await client.call_tool(
                "append_messages",
                {"thread_id": "t", "user": f"turn {turn}: {WORDS}", "assistant": f"reply {turn}: {WORDS}"},
            )
            start = time.perf_counter()
            result = await client.call_tool("get_context", {"thread_id": "t"})
            times.append((time.perf_counter() - start) * 1000)
            assert not result.is_error, result.content[0].text
    return times, len(stderr.read_text().splitlines())


def model(base_url: str) -> dict[str, str]:
    return {"OM_OBSERVATIONAL_MEMORY__MODEL": f'{{"model": "openai/fake", "api_base": "{base_url}"}}'}


def main() -> None:
    with FakeLLMServer() as healthy, FakeLLMServer(lambda request: (503, "overloaded")) as failing:
        cases = {
            "healthy": model(healthy.base_url),
            "no key": {"OM_OBSERVATIONAL_MEMORY__MODEL": "gemini/gemini-2.5-flash"},
            "unreachable": model(f"http://127.0.0.1:{closed_port()}/v1"),
            "http 503": model(failing.base_url),
        }
        results = {}
        for name, env in cases.items():
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = anyio.run(play, Path(tmp), env)
    base_p99 = None
    print(f"{TURNS} turns per case, get_context in ms over stdio")
    print(f"{'case':<12} {'median':>7} {'p99':>7} {'max':>7} {'p99/healthy':>12} {'>200ms':>7} {'stderr':>7}")
    for name, (times, lines) in results.items():
        ordered = sorted(times)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        base_p99 = base_p99 or p99
        print(
            f"{name:<12} {statistics.median(times):>7.1f} {p99:>7.1f} {max(times):>7.1f} {p99 / base_p99:>12.2f}"
            f" {sum(t > 200 for t in times):>7} {lines:>7}"
        )


if __name__ == "__main__":
    main()
