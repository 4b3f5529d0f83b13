"""How often the answer is right, and what it costs: om-mcp's whole loop with your own models.

    python benchmarks/answer_quality.py --model openai/gpt-4o-mini [--answer-model M] [--judge-model M]
        [--dataset locomo|longmemeval] [--data PATH] [--limit N] [--arms om,full,none] [--work DIR]
    python benchmarks/answer_quality.py --scripted --limit 20     # the same plumbing, a scripted model, no key

For each conversation of the data file:
1. Memory: a fresh om-mcp database. Each session becomes a thread of the conversation's resource and its turns
   are appended through the MCP tools (`append_messages`, an in-process MCP client against the real server),
   in time order. The configured model (--model) observes and reflects as in real use, at the thresholds given
   (--message-tokens, --observation-tokens: a conversation of 20k tokens never reaches the 30k default); the
   run waits for the background work to finish before the questions.
2. Answers, one per question and arm:
   - om: what om-mcp gives an agent. `get_context` for a new thread of the same resource goes into the answer
     model's system prompt, and the model may call the real `recall` tool (its own description and schema,
     from tools/list) up to --tool-rounds times before it must answer: an agent calls recall when the memory
     it was given does not hold the answer, and so may this one.
   - full: the same answer model with the whole conversation in its prompt (no om-mcp).
   - none: the same answer model with the question alone.
3. Judging: a judge model (--judge-model) applies the grading criteria LongMemEval publishes (Wu et al.,
   "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory", ICLR 2025,
   https://github.com/xiaowu0162/LongMemEval, `get_anscheck_prompt` in src/evaluation/evaluate_qa.py): one
   template per question type (off-by-one day counts accepted for temporal questions, the latest value for
   knowledge updates, a rubric for preferences, recognising an unanswerable question), written here in our own
   words rather than copied, so figures are close to, not identical with, LongMemEval's own judge. "yes" in
   the judge's answer counts as correct. LoCoMo's temporal questions get the temporal template, the others the
   default one; LoCoMo's adversarial questions (category 5) have no reference answer and are left out.

Data:
- LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, evaluation only): the shared development file,
  `shared/data/locomo/locomo_dev.json` beside the checkout (found by default).
- LongMemEval: download `longmemeval_s.json` (or `_oracle`, `_m`) yourself from the dataset page named in the
  repository's README (https://huggingface.co/datasets/xiaowu0162/longmemeval) and pass --data. Its format (a
  list of {question_id, question_type, question, answer, question_date, haystack_dates, haystack_session_ids,
  haystack_sessions: [[{role, content}]]}) is that README's; each question has its own history.

Resumable: everything lands in --work (one database per conversation, `progress.jsonl` with one line per
finished step); run the same command again after a crash or Ctrl-C and it goes on where it stopped.
`results.json` there holds accuracy by question type and arm, context tokens per question, model calls,
tokens and cost (litellm's price list; --price-in/--price-out in $ per million tokens override it). Models
are litellm names; --api-base points all three at one OpenAI-compatible endpoint (a local server, say).
Keys are read by litellm from the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client  # noqa: E402

from om_mcp.config import Config  # noqa: E402
from om_mcp.engine import Memory  # noqa: E402
from om_mcp.engine.tokens import TokenCounter  # noqa: E402
from om_mcp.models.litellm_client import load_litellm  # noqa: E402
from om_mcp.server import build_server  # noqa: E402

ARMS = ("om", "full", "none")
ANSWER_MARK = "You answer a question about earlier conversations."
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5 (adversarial): no answer

# -- the judge: LongMemEval's criteria, in our own words (see the module docstring) ---------------------------------

_JUDGE_ASK = "\n\nQuestion: {}\n\nReference answer: {}\n\nResponse to grade: {}\n\nReply with one word: yes or no."
_JUDGE_BASE = (
    "You grade an assistant's response against a reference answer. Say yes when the response gives the reference "
    "answer, says something equivalent to it, or works through every step that leads to it. Say no when it is "
    "wrong, or gives only part of what the reference answer requires. "
)
JUDGE_TEMPLATES = {
    "default": _JUDGE_BASE + _JUDGE_ASK,
    "temporal-reasoning": _JUDGE_BASE
    + "A count of days, weeks or months that is off by one (19 days where the reference says 18) still counts "
    "as correct. " + _JUDGE_ASK,
    "knowledge-update": _JUDGE_BASE
    + "The fact asked about changed over time: a response that mentions earlier values as well is correct as "
    "long as the value it gives as current is the reference answer. " + _JUDGE_ASK,
    "single-session-preference": "You grade whether an assistant's response is personalised as a rubric "
    "describes. Say yes when it remembers the user's own information and uses it correctly; it need not cover "
    "every point of the rubric. Otherwise say no.\n\nQuestion: {}\n\nRubric: {}\n\nResponse to grade: {}\n\n"
    "Reply with one word: yes or no.",
    "abstention": "The question cannot be answered from the conversation; the explanation says why. Say yes when "
    "the assistant's response recognises that (for example by saying the information was never given, or that "
    "only related information was), otherwise say no.\n\nQuestion: {}\n\nExplanation: {}\n\n"
    "Response to grade: {}\n\nReply with one word: yes or no.",
}


def judge_prompt(question: Question, response: str) -> str:
    if question.abstention:
        template = JUDGE_TEMPLATES["abstention"]
    elif question.type in ("temporal", "temporal-reasoning"):
        template = JUDGE_TEMPLATES["temporal-reasoning"]
    else:
        template = JUDGE_TEMPLATES.get(question.type, JUDGE_TEMPLATES["default"])
    return template.format(question.text, question.answer, response)


# -- data ------------------------------------------------------------------------------------------------------------


@dataclass
class Session:
    thread_id: str
    when: datetime
    turns: list[dict[str, Any]]  # {id, role, content, created_at}


@dataclass
class Question:
    id: str
    text: str
    answer: str
    type: str
    asked_at: datetime
    abstention: bool = False


@dataclass
class Conversation:
    id: str
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)

    def transcript(self) -> str:
        """The whole conversation as the `full` arm reads it: sessions in order, each under its date."""
        blocks = []
        for session in self.sessions:
            lines = [f"{t['role']}: {t['content']}" for t in session.turns]
            blocks.append(f"## Session of {session.when:%Y-%m-%d %H:%M}\n" + "\n".join(lines))
        return "\n\n".join(blocks)


def load_locomo(path: Path) -> list[Conversation]:
    out = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k])
        first = conv["speaker_a"]
        sessions = []
        for n in numbers:
            when = datetime.strptime(conv[f"session_{n}_date_time"].strip(), "%I:%M %p on %d %B, %Y").replace(
                tzinfo=UTC
            )
            turns = []
            for turn in conv[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                # Two people talk: the first speaker is the user, the other the assistant.
                role = "user" if turn["speaker"] == first else "assistant"
                turns.append({"id": turn["dia_id"], "role": role, "content": text, "created_at": when.isoformat()})
            sessions.append(Session(f"{sample['sample_id']}-s{n}", when, turns))
        asked = sessions[-1].when + timedelta(days=1)
        questions = [
            Question(
                f"{sample['sample_id']}-q{i}",
                qa["question"],
                str(qa["answer"]),
                LOCOMO_CATEGORIES[qa["category"]],
                asked,
            )
            for i, qa in enumerate(sample["qa"])
            if qa.get("category") in LOCOMO_CATEGORIES and "answer" in qa
        ]
        out.append(Conversation(sample["sample_id"], sessions, questions))
    return out


def _lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.rsplit(" ", 1)[-1], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def load_longmemeval(path: Path) -> list[Conversation]:
    out = []
    for entry in json.loads(path.read_text()):
        qid = entry["question_id"]
        sessions = []
        for i, (sid, date, turns) in enumerate(
            zip(entry["haystack_session_ids"], entry["haystack_dates"], entry["haystack_sessions"])
        ):
            when = _lme_date(date)
            sessions.append(
                Session(
                    f"{qid}-{i}-{sid}",
                    when,
                    [
                        {"id": f"{sid}:{j}", "role": t["role"], "content": t["content"], "created_at": when.isoformat()}
                        for j, t in enumerate(turns)
                        if t.get("content")
                    ],
                )
            )
        sessions.sort(key=lambda s: s.when)
        question = Question(
            qid,
            entry["question"],
            str(entry["answer"]),
            entry["question_type"],
            _lme_date(entry["question_date"]),
            abstention=qid.endswith("_abs"),
        )
        out.append(Conversation(qid, sessions, [question]))
    return out


# -- model calls, counted ----------------------------------------------------------------------------------------


@dataclass
class Models:
    memory: str
    answer: str
    judge: str
    api_base: str | None = None
    price_in: float | None = None  # $ per million prompt tokens, overriding litellm's price list
    price_out: float | None = None

    def kwargs(self, model: str) -> dict[str, Any]:
        out: dict[str, Any] = {"model": model, "num_retries": 3, "timeout": 120}
        if self.api_base:
            out["api_base"] = self.api_base
            out["api_key"] = "not-needed"  # a local OpenAI-compatible server; litellm insists on some key
        return out


class Ledger:
    """Model calls, tokens and cost by phase. The answer and judge calls are this script's own and counted from
    their responses; the engine's Observer and Reflector calls are counted by a litellm callback, which skips
    the calls marked as this script's."""

    def __init__(self, models: Models):
        self.models = models
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def take(self, phase: str) -> dict[str, float]:
        return {k: round(v, 6) for k, v in self.totals.pop(phase, {}).items()}

    def record(self, phase: str, response: Any, listed_cost: float | None = None) -> None:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if self.models.price_in is not None or self.models.price_out is not None:
            cost = (prompt * (self.models.price_in or 0) + completion * (self.models.price_out or 0)) / 1e6
        elif listed_cost is None:
            cost = _listed_cost(response)
        else:
            cost = listed_cost
        row = self.totals[phase]
        row["calls"] += 1
        row["prompt_tokens"] += prompt
        row["completion_tokens"] += completion
        row["cost"] += cost

    def install(self) -> None:
        litellm = load_litellm()  # first: it imports litellm with no network (the bundled price list)
        from litellm.integrations.custom_logger import CustomLogger

        ledger = self

        def engine_call(kwargs: dict[str, Any]) -> bool:
            return OURS not in ((kwargs.get("litellm_params") or {}).get("metadata") or {})

        class _Count(CustomLogger):
            async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
                if engine_call(kwargs):
                    ledger.record("memory", response_obj, kwargs.get("response_cost") or 0.0)

        litellm.callbacks = [*(litellm.callbacks or []), _Count()]


OURS = "om_answer_quality"


def _listed_cost(response: Any) -> float:
    try:
        return float(load_litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 - a model missing from litellm's price list costs what --price-in says
        return 0.0


async def complete(models: Models, ledger: Ledger, phase: str, model: str, messages: list[dict], **extra: Any) -> Any:
    response = await load_litellm().acompletion(
        messages=messages, metadata={OURS: phase}, **models.kwargs(model), **extra
    )
    ledger.record(phase, response)
    return response


# -- the three arms ----------------------------------------------------------------------------------------------


def answer_system(asked_at: datetime, memory: str) -> str:
    return (
        f"{ANSWER_MARK} Today is {asked_at:%Y-%m-%d}. Answer in a short phrase, with dates as dates. "
        "If what you know does not hold the answer, say you do not know.\n\n" + memory
    )


def recall_tool(listed: Any) -> dict[str, Any]:
    """The real recall tool as the model sees it from tools/list, less the ids the harness fills in."""
    tool = next(t for t in listed.tools if t.name == "recall")
    schema = json.loads(json.dumps(tool.input_schema))
    for name in ("thread_id", "resource_id"):
        schema.get("properties", {}).pop(name, None)
        if name in schema.get("required", []):
            schema["required"].remove(name)
    return {"type": "function", "function": {"name": "recall", "description": tool.description, "parameters": schema}}


@dataclass
class Answer:
    text: str
    context_tokens: int  # what om-mcp (or the baseline) put in front of the answer model, o200k tokens
    tool_calls: int = 0


async def answer_om(
    client: Client, tool: dict, models: Models, ledger: Ledger, conv: Conversation, q: Question, rounds: int, count
):
    # A new conversation of the same user, as a host starts one: the question is recorded (as hooks do), then
    # get_context; the thread is deleted afterwards, so no question is seen by the next one.
    ask_thread = f"ask-{q.id}"
    where = {"thread_id": ask_thread, "resource_id": conv.id}
    await client.call_tool("append_messages", {**where, "user": q.text})
    try:
        return await _answer_om(client, tool, models, ledger, q, rounds, count, where)
    finally:
        await client.call_tool("delete_thread", where)


async def _answer_om(client, tool, models, ledger, q: Question, rounds: int, count, where: dict[str, str]) -> Answer:
    result = await client.call_tool("get_context", where)
    context = json.loads(result.content[0].text)
    memory = context.get("system_text") or ""
    recent = "\n".join(
        f"{m.get('role')}: {json.dumps(m.get('content'), ensure_ascii=False)}" for m in context.get("messages", [])
    )
    prompt = answer_system(q.asked_at, memory + (f"\n\nRecent messages:\n{recent}" if recent else ""))
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}, {"role": "user", "content": q.text}]
    read = count(prompt)
    calls = 0
    for round_ in range(rounds + 1):
        last = round_ == rounds
        response = await complete(
            models, ledger, "answer", models.answer, messages, tools=[tool], tool_choice="none" if last else "auto"
        )
        message = response.choices[0].message
        wanted = [] if last else (message.tool_calls or [])
        if not wanted:
            return Answer((message.content or "").strip(), read, calls)
        messages.append(message.model_dump(exclude_none=True))
        for call in wanted:
            calls += 1
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except ValueError:
                arguments = {}
            arguments = {k: v for k, v in arguments.items() if k not in ("thread_id", "resource_id")}
            found = await client.call_tool("recall", {**arguments, **where})
            text = found.content[0].text if found.content else ""
            read += count(text)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return Answer("", read, calls)


async def answer_plain(models: Models, ledger: Ledger, q: Question, memory: str, count) -> Answer:
    prompt = answer_system(q.asked_at, memory)
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": q.text}]
    response = await complete(models, ledger, "answer", models.answer, messages)
    return Answer((response.choices[0].message.content or "").strip(), count(prompt))


async def judge(models: Models, ledger: Ledger, q: Question, response: str) -> bool:
    reply = await complete(
        models,
        ledger,
        "judge",
        models.judge,
        [{"role": "user", "content": judge_prompt(q, response)}],
        temperature=0,
        max_tokens=10,
    )
    return "yes" in (reply.choices[0].message.content or "").lower()


# -- the run -----------------------------------------------------------------------------------------------------


class Progress:
    """progress.jsonl: one line per finished step, flushed at once, read back on a restart."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    self.rows.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a crash: that step runs again
        self.done = {self.key(r) for r in self.rows}

    @staticmethod
    def key(row: dict[str, Any]) -> tuple:
        return (row["kind"], row.get("conversation"), row.get("question"), row.get("arm"))

    def add(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
        self.rows.append(row)
        self.done.add(self.key(row))


def memory_config(args, models: Models, db: Path) -> Config:
    model: dict[str, Any] = {"model": models.memory}
    if models.api_base:
        model["api_base"] = models.api_base
    return Config.model_validate(
        {
            "db_path": str(db),
            "observational_memory": {
                "model": model,
                "scope": "resource",
                "observation": {"message_tokens": args.message_tokens},
                "reflection": {"observation_tokens": args.observation_tokens},
            },
        }
    )


async def settle(memory: Memory) -> None:
    """Until the background worker has nothing running or queued, a few checks in a row."""
    quiet = 0
    while quiet < 3:
        quiet = quiet + 1 if memory.worker.active == 0 else 0
        await anyio.sleep(0.2)


async def run_conversation(args, models, ledger, progress, conv: Conversation, questions: list[Question], bar) -> None:
    count = TokenCounter().count_text
    work = Path(args.work)
    arms = [a for a in args.arms.split(",") if a]
    memory = await Memory.open(memory_config(args, models, work / f"{conv.id}.db"))
    async with AsyncExitStack() as stack:
        stack.push_async_callback(memory.close)
        await stack.enter_async_context(memory.running())
        client = await stack.enter_async_context(Client(build_server(memory.config, memory), raise_exceptions=True))
        if ("ingested", conv.id, None, None) not in progress.done:
            ledger.take("memory")
            started = time.perf_counter()
            for session in conv.sessions:
                # Re-sending after a crash is harmless: a message is stored once per id.
                result = await client.call_tool(
                    "append_messages",
                    {"thread_id": session.thread_id, "resource_id": conv.id, "messages": session.turns},
                )
                if result.is_error:
                    raise SystemExit(f"append_messages failed: {result.content[0].text}")
                await settle(memory)
            progress.add(
                {
                    "kind": "ingested",
                    "conversation": conv.id,
                    "messages": sum(len(s.turns) for s in conv.sessions),
                    "message_tokens": sum(count(t["content"]) for s in conv.sessions for t in s.turns),
                    "seconds": round(time.perf_counter() - started, 1),
                    "models": {"memory": ledger.take("memory")},
                }
            )
        bar.advance(1)
        for left in await memory.threads(conv.id, limit=100_000):
            if left.id.startswith("ask-"):  # a question's thread that a stop left behind: no later one may see it
                await client.call_tool("delete_thread", {"thread_id": left.id, "resource_id": conv.id})
        tool = recall_tool(await client.list_tools()) if "om" in arms else None
        transcript = conv.transcript()
        for q in questions:
            for arm in arms:
                if ("answer", conv.id, q.id, arm) in progress.done:
                    bar.advance(1)
                    continue
                if arm == "om":
                    got = await answer_om(client, tool, models, ledger, conv, q, args.tool_rounds, count)
                elif arm == "full":
                    got = await answer_plain(models, ledger, q, "The conversations so far:\n\n" + transcript, count)
                else:
                    got = await answer_plain(models, ledger, q, "", count)
                answered = ledger.take("answer")
                correct = await judge(models, ledger, q, got.text)
                judged = ledger.take("judge")
                progress.add(
                    {
                        "kind": "answer",
                        "conversation": conv.id,
                        "question": q.id,
                        "arm": arm,
                        "type": "abstention" if q.abstention else q.type,
                        "question_text": q.text,
                        "reference": q.answer,
                        "response": got.text,
                        "correct": correct,
                        "context_tokens": got.context_tokens,
                        "recall_calls": got.tool_calls,
                        "models": {"answer": answered, "judge": judged},
                    }
                )
                bar.advance(1)


def summarize(rows: list[dict[str, Any]], models: Models) -> dict[str, Any]:
    answers = [r for r in rows if r["kind"] == "answer"]
    ingests = [r for r in rows if r["kind"] == "ingested"]
    by_arm: dict[str, Any] = {}
    for arm in dict.fromkeys(r["arm"] for r in answers):
        mine = [r for r in answers if r["arm"] == arm]
        types: dict[str, list[bool]] = defaultdict(list)
        for r in mine:
            types[r["type"]].append(r["correct"])
        spent = _sum([r["models"]["answer"] for r in mine])
        judged = _sum([r["models"]["judge"] for r in mine])
        by_arm[arm] = {
            "questions": len(mine),
            "accuracy": round(100 * sum(r["correct"] for r in mine) / len(mine), 1),
            "by_type": {
                t: {"n": len(v), "accuracy": round(100 * sum(v) / len(v), 1)} for t, v in sorted(types.items())
            },
            "context_tokens_per_question": round(sum(r["context_tokens"] for r in mine) / len(mine)),
            "recall_calls_per_question": round(sum(r["recall_calls"] for r in mine) / len(mine), 2),
            "answer_model": spent,
            "judge_model": judged,
        }
    memory = _sum([r["models"].get("memory", {}) for r in ingests])
    return {
        "models": {"memory": models.memory, "answer": models.answer, "judge": models.judge},
        "conversations": len(ingests),
        "messages": sum(r["messages"] for r in ingests),
        "message_tokens": sum(r["message_tokens"] for r in ingests),
        "memory_model": memory,
        "memory_model_per_conversation": {k: round(v / max(len(ingests), 1), 4) for k, v in memory.items()},
        "arms": by_arm,
    }


def _sum(parts: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for part in parts:
        for k, v in part.items():
            total[k] += v
    return {k: round(v, 6) for k, v in total.items()}


def report(summary: dict[str, Any]) -> None:
    print(
        f"\n{summary['conversations']} conversations, {summary['messages']} messages"
        f" ({summary['message_tokens']} tokens)"
    )
    memory = summary["memory_model"]
    print(
        f"memory model ({summary['models']['memory']}): {memory.get('calls', 0):.0f} calls,"
        f" {memory.get('prompt_tokens', 0):.0f} + {memory.get('completion_tokens', 0):.0f} tokens,"
        f" ${memory.get('cost', 0):.4f}"
    )
    types = sorted({t for arm in summary["arms"].values() for t in arm["by_type"]})
    print(
        f"\n{'arm':<6}{'n':>6}{'acc':>7}"
        + "".join(f"{t[:12]:>14}" for t in types)
        + f"{'ctx tok/q':>11}{'calls':>7}{'$':>9}"
    )
    for name, arm in summary["arms"].items():
        cells = "".join(
            f"{arm['by_type'][t]['accuracy']:>14.1f}" if t in arm["by_type"] else f"{'-':>14}" for t in types
        )
        calls = arm["answer_model"].get("calls", 0) + arm["judge_model"].get("calls", 0)
        cost = arm["answer_model"].get("cost", 0) + arm["judge_model"].get("cost", 0)
        print(
            f"{name:<6}{arm['questions']:>6}{arm['accuracy']:>7.1f}{cells}{arm['context_tokens_per_question']:>11}{calls:>7.0f}{cost:>9.4f}"
        )


async def run(args) -> dict[str, Any]:
    from rich.progress import Progress as Bar

    models = Models(
        args.model,
        args.answer_model or args.model,
        args.judge_model or args.answer_model or args.model,
        args.api_base,
        args.price_in,
        args.price_out,
    )
    conversations = (load_locomo if args.dataset == "locomo" else load_longmemeval)(Path(args.data))
    plan: list[tuple[Conversation, list[Question]]] = []
    left = args.limit if args.limit is not None else sum(len(c.questions) for c in conversations)
    for conv in conversations:
        if left <= 0:
            break
        plan.append((conv, conv.questions[:left]))
        left -= len(plan[-1][1])
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    progress = Progress(work / "progress.jsonl")
    ledger = Ledger(models)
    ledger.install()
    arms = [a for a in args.arms.split(",") if a]
    total = sum(1 + len(qs) * len(arms) for _, qs in plan)
    with Bar(disable=args.quiet) as bar:
        task = bar.add_task("answer quality", total=total)

        class Step:
            def advance(self, n: int) -> None:
                bar.advance(task, n)

        for conv, questions in plan:
            await run_conversation(args, models, ledger, progress, conv, questions, Step())
    summary = summarize(progress.rows, models)
    (work / "results.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    if not args.quiet:
        report(summary)
        print(f"\nresults: {work / 'results.json'}")
    return summary


# -- the scripted model (--scripted): the plumbing with no key --------------------------------------------------


def scripted_responder(request: dict[str, Any]) -> Any:
    """Observer and Reflector: valid observations; answer model: one recall search, then the first hit's words;
    judge: yes when the response holds the reference answer."""
    from om_mcp.testing.fake_server import FakeReply, default_responder

    messages = request.get("messages") or []
    first = messages[0].get("content") if messages else ""
    if isinstance(first, str) and first.startswith(ANSWER_MARK):
        question = messages[1]["content"] if len(messages) > 1 else ""
        tool_results = [m.get("content") or "" for m in messages if m.get("role") == "tool"]
        if request.get("tools") and request.get("tool_choice") != "none" and not tool_results:
            return FakeReply(tool_calls=[{"name": "recall", "arguments": {"mode": "search", "query": question}}])
        hits = re.findall(r"^- \[[^\]]+\] \w+: (.*)$", "\n".join(tool_results), re.M)
        return hits[0] if hits else "I do not know."
    if isinstance(first, str) and first.endswith("yes or no."):
        answer = first.split("Reference answer: ", 1)[-1].split("\n\nResponse to grade: ", 1)
        correct = len(answer) == 2 and answer[0].strip().lower() in answer[1].lower()
        return "yes" if correct else "no"
    last = messages[-1].get("content") if messages else ""
    sections = re.findall(r'<thread id="([^"]+)">\n(.*?)\n</thread>', last if isinstance(last, str) else "", re.S)
    if sections:  # a resource-scope Observer call: one section per thread, each line the start of its text
        out = [
            f'<thread id="{label}">\nDate: Jan 1, 2026\n* 🔴 (10:00) {" ".join(body.split())[:200]}\n</thread>'
            for label, body in sections
        ]
        return "<observations>\n" + "\n".join(out) + "\n</observations>"
    return default_responder(request)


def _default_data() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/data/locomo/locomo_dev.json"
        if candidate.exists():
            return candidate
    return Path("shared/data/locomo/locomo_dev.json")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=["locomo", "longmemeval"], default="locomo")
    p.add_argument("--data", help="the data file (default: the shared LoCoMo development file)")
    p.add_argument("--model", help="the model that observes and reflects (litellm name)")
    p.add_argument("--answer-model", help="the model that answers (default: --model)")
    p.add_argument("--judge-model", help="the model that judges (default: --answer-model)")
    p.add_argument("--api-base", help="an OpenAI-compatible endpoint for all three models")
    p.add_argument("--scripted", action="store_true", help="a scripted model on loopback: the plumbing, no key")
    p.add_argument("--limit", type=int, help="answer only the first N questions (a quick run)")
    p.add_argument("--arms", default=",".join(ARMS), help="om (om-mcp), full (whole conversation), none (no memory)")
    p.add_argument("--work", help="folder for databases, progress and results (default: answer-quality-<dataset>)")
    p.add_argument("--message-tokens", type=int, default=3000, help="observation threshold (default 3000)")
    p.add_argument("--observation-tokens", type=int, default=6000, help="reflection threshold (default 6000)")
    p.add_argument("--tool-rounds", type=int, default=3, help="recall calls the answer model may make (default 3)")
    p.add_argument("--price-in", type=float, help="$ per million prompt tokens (default: litellm's price list)")
    p.add_argument("--price-out", type=float, help="$ per million completion tokens")
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    args.data = args.data or (str(_default_data()) if args.dataset == "locomo" else None)
    if not args.data:
        raise SystemExit("--data: LongMemEval is not shipped; download longmemeval_s.json (see --help) and pass it")
    args.work = args.work or f"answer-quality-{args.dataset}"
    if args.scripted:
        from om_mcp.testing.fake_server import FakeLLMServer

        with FakeLLMServer(scripted_responder) as server:
            args.api_base = server.base_url
            args.model = args.model or "openai/scripted"
            return anyio.run(run, args)
    if not args.model:
        raise SystemExit("--model: name the model that observes and answers (e.g. openai/gpt-4o-mini), or --scripted")
    return anyio.run(run, args)


if __name__ == "__main__":
    main()
