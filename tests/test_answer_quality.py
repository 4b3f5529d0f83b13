"""benchmarks/answer_quality.py end to end on a tiny slice, with the scripted model on loopback: conversations
appended through the MCP tools, observed by the model, questions answered (get_context plus the recall tool),
judged, counted, resumed after a stop. Writes only into tmp_path."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import anyio
import pytest

from om_mcp.config import Config
from om_mcp.engine import Memory

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "answer_quality.py"


@pytest.fixture(scope="module")
def answer_quality():
    spec = importlib.util.spec_from_file_location("answer_quality", BENCHMARK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def locomo_file(tmp_path: Path) -> Path:
    chat = [
        ("Alice", "I adopted a puppy named Biscuit last week."),
        ("Bob", "That is lovely! What breed is Biscuit?"),
        ("Alice", "A beagle. He loves the park by the river."),
    ]
    later = [
        ("Bob", "I finally started my pottery class on Monday."),
        ("Alice", "Nice, how was the first lesson at the studio?"),
        ("Bob", "Messy but fun, I made a small bowl."),
    ]

    def session(n: int, turns):
        return [{"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(turns)]

    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1": session(1, chat),
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": session(2, later),
            "session_2_date_time": "10:00 am on 20 May, 2023",
        },
        "qa": [
            {"question": "What is the name of the puppy Alice adopted?", "answer": "Biscuit", "category": 4},
            {"question": "When did Bob start his pottery class?", "answer": "15 May 2023", "category": 2},
            {"question": "What did Alice paint?", "adversarial_answer": "a bowl", "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    return path


def _memory(db: Path):
    config = Config.model_validate({"db_path": str(db), "observational_memory": {"enabled": False}})
    return Memory.open(config)


async def leave_a_question_thread(db: Path) -> None:
    memory = await _memory(db)
    await memory.append_messages("ask-conv-x-q7", [{"role": "user", "content": "half asked"}], resource_id="conv-x")
    await memory.close()


async def thread_ids(db: Path) -> list[str]:
    memory = await _memory(db)
    try:
        return sorted(t.id for t in await memory.threads("conv-x", limit=100))
    finally:
        await memory.close()


def answers(work: Path) -> list[dict]:
    return [json.loads(line) for line in (work / "progress.jsonl").read_text().splitlines() if '"answer"' in line]


@pytest.mark.slow
def test_locomo_runs_end_to_end_and_resumes(answer_quality, tmp_path):
    data, work = locomo_file(tmp_path), tmp_path / "work"
    common = ["--scripted", "--data", str(data), "--work", str(work), "--message-tokens", "40", "--quiet"]

    first = answer_quality.main([*common, "--limit", "1"])
    assert [(r["question"], r["arm"]) for r in answers(work)] == [("conv-x-q0", a) for a in ("om", "full", "none")]
    assert first["conversations"] == 1 and first["messages"] == 6
    assert first["memory_model"]["calls"] >= 1  # the Observer ran through litellm on the scripted server

    # A stop in the middle of a question leaves its thread behind; the next run removes it before answering.
    anyio.run(leave_a_question_thread, work / "conv-x.db")

    # Started again with more questions, it keeps what was done: the conversation is not appended again.
    summary = answer_quality.main([*common])
    assert anyio.run(thread_ids, work / "conv-x.db") == ["conv-x-s1", "conv-x-s2"]
    rows = answers(work)
    assert sorted((r["question"], r["arm"]) for r in rows) == sorted(
        (q, a) for q in ("conv-x-q0", "conv-x-q1") for a in ("om", "full", "none")
    )  # the adversarial question has no reference answer: left out
    ingested = [line for line in (work / "progress.jsonl").read_text().splitlines() if '"ingested"' in line]
    assert len(ingested) == 1

    om = {r["question"]: r for r in rows if r["arm"] == "om"}
    # The scripted answer model searched with recall and answered with the first hit: the puppy's name.
    assert om["conv-x-q0"]["recall_calls"] == 1 and "Biscuit" in om["conv-x-q0"]["response"]
    assert om["conv-x-q0"]["correct"] is True
    assert om["conv-x-q0"]["context_tokens"] > 0
    none = {r["question"]: r for r in rows if r["arm"] == "none"}
    assert none["conv-x-q0"]["correct"] is False and none["conv-x-q0"]["recall_calls"] == 0

    saved = json.loads((work / "results.json").read_text())
    assert saved == summary
    arms = saved["arms"]
    assert set(arms) == {"om", "full", "none"}
    assert arms["om"]["by_type"]["single-hop"] == {"n": 1, "accuracy": 100.0}
    assert arms["none"]["accuracy"] == 0.0
    assert arms["full"]["context_tokens_per_question"] > arms["none"]["context_tokens_per_question"]
    for arm in arms.values():
        assert arm["questions"] == 2
        assert arm["judge_model"]["calls"] == 2
    assert arms["om"]["answer_model"]["calls"] == 4  # a recall round, then the answer, per question


@pytest.mark.slow
def test_longmemeval_format(answer_quality, tmp_path):
    entry = {
        "question_id": "q1_abs",
        "question_type": "single-session-user",
        "question": "What is the name of my cat?",
        "answer": "You did not mention a cat.",
        "question_date": "2023/05/30 (Tue) 12:00",
        "haystack_session_ids": ["s2", "s1"],
        "haystack_dates": ["2023/05/21 (Sun) 09:30", "2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [
            [{"role": "user", "content": "My dog is called Rex."}, {"role": "assistant", "content": "Nice name!"}],
            [{"role": "user", "content": "I live in Porto.", "has_answer": True}],
        ],
        "answer_session_ids": ["s1"],
    }
    data = tmp_path / "longmemeval_s.json"
    data.write_text(json.dumps([entry]))
    [conv] = answer_quality.load_longmemeval(data)
    assert [s.when.day for s in conv.sessions] == [20, 21]  # in time order
    assert conv.questions[0].abstention and conv.questions[0].asked_at.day == 30
    assert "cannot be answered" in answer_quality.judge_prompt(conv.questions[0], "I don't know")

    work = tmp_path / "work"
    summary = answer_quality.main(
        ["--scripted", "--dataset", "longmemeval", "--data", str(data), "--work", str(work), "--quiet"]
    )
    assert summary["arms"]["om"]["by_type"] == {"abstention": {"n": 1, "accuracy": 0.0}}
