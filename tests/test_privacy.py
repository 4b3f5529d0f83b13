"""Secrets never reach the model or the file: `<private>` spans and the named detectors, each
against what it must catch and what it must leave alone; the whole set against the
repository's own tests; the `[privacy]` section refused at start when a rule is wrong; and
the redaction on every path that stores a message (MCP tools, the host hook, `om-mcp ingest`,
`om-mcp import`), counted per rule in the events and the status, never the secret."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from support.files import raw_bytes
from support.hooks import SESSION_ID, Box
from support.mcp import connect, ok
from support.processes import PYTHON, clean_env
from support.timeouts import scaled

from om_mcp.config import ConfigError, load_config
from om_mcp.engine import Memory
from om_mcp.privacy import RULES, redactor_for
from om_mcp.server import build_server
from om_mcp.testing.transcripts import ClaudeTranscript

AWS = "AKIA" + "QWERTYUIOPASDFGH"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
KEY_BLOCK = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nq3Kx9\n-----END RSA PRIVATE KEY-----"

# rule -> (texts it must redact, texts it must leave alone)
EXAMPLES: dict[str, tuple[list[str], list[str]]] = {
    "private-key": (
        [f"the key:\n{KEY_BLOCK}\nok", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (cut short"],
        ["-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQ\n-----END PUBLIC KEY-----", "a private key is a file"],
    ),
    "aws-access-key": (
        [f"aws_access_key_id = {AWS}", f"id {AWS}."],
        ["AKIA is the prefix of AWS key ids", "AKIASHORT1", "XAKIAQWERTYUIOPASDFGHJ"],
    ),
    "aws-secret-key": (
        [
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            'AWS_SECRET_KEY="abcdEFGH1234abcdEFGH1234abcdEFGH1234abcd"',
        ],
        ["the AWS secret key goes in ~/.aws/credentials", "aws_region = eu-west-1"],
    ),
    "google-api-key": (["key=AIza" + "SyB-1234567890abcdefghijklmnopqrstu"], ["AIza alone", "AIzaShort-123"]),
    "github-token": (
        [
            f"token {GITHUB}",
            "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123",
        ],
        ["ghp_short", "see github.com/ghp_/settings"],
    ),
    "gitlab-token": (["glpat-" + "xY9zAbCdEfGh12345678"], ["glpat- is GitLab's prefix"]),
    "slack-token": (
        [SLACK, "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"],
        ["xoxb- tokens are Slack bot tokens", "https://hooks.slack.com/"],
    ),
    "stripe-key": (["sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"], ["sk_live_ is Stripe's prefix", "sk_live_short"]),
    "anthropic-key": (
        ["ANTHROPIC=" + "sk-ant-api03-" + "a" * 40 + "-bCd"],
        ["sk-ant-api03- is the prefix", "the sk-ant- keys"],
    ),
    "openai-key": (
        ["sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3"],
        ["sk-proj-", "a task-oriented sk- prefix", "risk-averse-approach-to-ai-safety-and-more-words"],
    ),
    "npm-token": (["//registry.npmjs.org/:_authToken=npm_" + "a" * 36], ["npm_config_cache=/tmp"]),
    "pypi-token": (["pypi-AgEIcHlwaS5vcmc" + "Cj" * 30], ["pypi-server is a package"]),
    "jwt": ([f"Cookie: session={JWT}"], ["eyJ is how base64 JSON starts", "eyJhbGciOiJIUzI1NiJ9 alone"]),
    "bearer-header": (
        ["Authorization: Bearer abcDEF123456ghiJKL789", 'curl -H "Authorization: Basic dXNlcjpwYXNzd29yZA=="'],
        ["the bearer of bad news", "Authorization: Bearer <token>", "Bearer ${TOKEN}", "Bearer sk-no-key-required"],
    ),
    "url-password": (
        ["postgresql://om:Tr0ub4dor3x@db.internal:5432/memory", "https://user:hunter22@example.com/x"],
        ["postgresql://om@localhost/memory", "http://localhost:8080/path@x", "redis://user:${PASSWORD}@host"],
    ),
    "secret-assignment": (
        [
            "DB_PASSWORD=hunter22",
            'password = "s3cr3t-value"',
            "client_secret: 8f14e45fceea167a5a36dedd4bea2543",
            '{"api_key": "abcd1234efgh"}',
            "export OM_HTTP_TOKEN=om_live-9f8e7d6c5b4a",
        ],
        [
            "password = get_password()",
            "token = self.token",
            "password: str",
            "api_key: SecretStr = None",
            "max_tokens=2000",
            'tokenizer = "cl100k_base"',
            "password_file = secrets.txt",
            "the secret: keep it simple",
            'GEMINI_API_KEY="your-key-here"',
            'OPENAI_API_KEY="sk-..."',
            '"token": "create a bearer token for the HTTP server"',
            "secret_word=quokkavelvet",
        ],
    ),
}


def redact(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    return redactor_for(None).text(text, counts), counts


def test_every_rule_has_examples():
    assert set(EXAMPLES) == {r.name for r in RULES}


@pytest.mark.parametrize("rule", sorted(EXAMPLES))
def test_each_detector_catches_its_secrets_and_leaves_the_rest(rule: str):
    positives, negatives = EXAMPLES[rule]
    for text in positives:
        out, counts = redact(text)
        assert counts[rule] >= 1, f"{rule} missed {text!r}: {out!r}"
        assert f"[redacted:{rule}]" in out
    for text in negatives:
        out, counts = redact(text)
        assert out == text and not counts, f"{rule}: {text!r} became {out!r} ({dict(counts)})"


def test_only_the_secret_part_goes_and_the_sentence_still_reads():
    out, _ = redact("connect with DB_PASSWORD=hunter22 then run it")
    assert out == "connect with DB_PASSWORD=[redacted:secret-assignment] then run it"
    out, _ = redact("curl -H 'Authorization: Bearer abcDEF123456ghiJKL789' x")
    assert out == "curl -H 'Authorization: Bearer [redacted:bearer-header]' x"
    out, counts = redact(f"GITHUB_TOKEN={GITHUB}")  # the specific rule wins; the assignment is not counted twice
    assert out == "GITHUB_TOKEN=[redacted:github-token]" and counts == Counter({"github-token": 1})


def test_private_spans_become_a_marker():
    out, counts = redact("I live at <private>12 Rua Augusta, Lisbon</private>. And <PRIVATE>\nsecond\n</Private>")
    assert out == "I live at [private]. And [private]" and counts == Counter({"private": 2})
    assert redact("an unclosed <private> tag is left as it is")[1] == Counter()


def test_structured_values_are_scanned_at_any_depth_but_file_data_is_not():
    redactor = redactor_for(None)
    data = "AKIA" + "A" * 16  # base64 may hold a key prefix by chance
    out = redactor.message(
        "assistant",
        [
            {"type": "tool-call", "tool_name": "deploy", "args": {"env": {"password": "hunter2xx"}, "note": AWS}},
            {"type": "tool-result", "tool_name": "sh", "result": [f"export TOKEN={GITHUB}"]},
            {"type": "image", "mime_type": "image/png", "data": data},
        ],
        {"speaker": "ops"},
    )
    assert out.parts[0]["args"] == {
        "env": {"password": "[redacted:secret-assignment]"},
        "note": "[redacted:aws-access-key]",
    }
    assert out.parts[1]["result"] == ["export TOKEN=[redacted:github-token]"]
    assert out.parts[2]["data"] == data
    assert out.counts == Counter({"secret-assignment": 1, "aws-access-key": 1, "github-token": 1})


# Credential-shaped literals the repository's tests assign to credential names on purpose (fake
# keys and tokens): matching them is the detectors working. Anything else found is a false positive.
FIXTURE_CREDENTIALS = {
    "om_not-a-real-token-000000",
    "a-long-enough-plain-token",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "sk-ant-api03-realkey123",
    "AIzaSyD-realkey12345",
    "sk-proj-realkey12345",
    "om_wrong-token-000000000000",
}
# The sample: the repository's test modules as they were when the detectors were written (the
# README's figure). A module written to hold secrets is not in it.
SAMPLE = """
claude_code_transcript commands config context_build context_fit context_text crash_safety database_refusal
database_runtime deleted_means_gone export_format fuzz_stdio fuzz_tools gemini_cli heap hook_command hook_glue
hook_protocol http_security importers ingest_command intake invariants layout listen_scoped litellm_path
model_backends model_faults model_health models multiprocess no_model observation openai_messages_import output
overview parsing postgres_fixture postgres_store prompts resource_scope resources scaling_out search_index
search_query second_order_injection selection side_effects status_page stdio_robust thresholds tokens tools
transcript transfer transports working_memory
""".split()


def test_no_false_positive_on_the_repositorys_own_tests():
    sample = [Path(__file__).parent / f"test_{name}.py" for name in SAMPLE]
    assert len(sample) == 57 and all(p.exists() for p in sample)
    redactor, found, false_positives = redactor_for(None), Counter(), []
    for path in sample:
        text = path.read_text(encoding="utf-8")
        for rule in redactor.rules:
            for match in rule.pattern.finditer(text):
                if rule.check is not None and not rule.check(match):
                    continue
                start, end = rule.secret_span(match)
                secret = text[start:end]
                if redactor.text(match.group(0), Counter()) == match.group(0):
                    continue  # a placeholder, left alone
                found[rule.name] += 1
                if secret not in FIXTURE_CREDENTIALS:
                    false_positives.append(f"{path.name}: {rule.name} on {match.group(0)[:80]!r}")
    assert false_positives == [], "\n".join(false_positives)
    assert sum(found.values()) == 12, found  # the fixture credentials above, each where it is used


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


def test_a_rule_that_does_not_compile_is_refused_at_start_naming_it(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"privacy\.extra: rule 'employee-id' does not compile"):
        load_config(env={"OM_PRIVACY__EXTRA": json.dumps({"employee-id": "EMP-(\\d{6}"})})
    with pytest.raises(ConfigError, match=r"privacy\.rules: unknown rule 'jwtt'"):
        load_config(env={"OM_PRIVACY__RULES": json.dumps({"jwtt": False})})
    with pytest.raises(ConfigError, match=r"privacy\.before_observation: .*cannot import 'nowhere\.at_all:scrub'"):
        load_config(env={"OM_PRIVACY__BEFORE_OBSERVATION": "nowhere.at_all:scrub"})
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "serve"],
        env={**clean_env(tmp_path), "OM_PRIVACY__EXTRA": '{"bad": "(("}'},
        capture_output=True,
        timeout=scaled(60),
    )
    assert done.returncode == 2 and b"rule 'bad' does not compile" in done.stderr


def test_rules_switch_off_extra_rules_and_the_hook_run_in_order():
    config = load_config(
        env={
            "OM_PRIVACY__RULES": json.dumps({"jwt": False}),
            "OM_PRIVACY__EXTRA": json.dumps({"employee-id": r"EMP-\d{6}", "ticket": r"ticket (?P<secret>\d+)"}),
            "OM_PRIVACY__BEFORE_OBSERVATION": "support.privacy_hook:mark_scrubbed",
        }
    )
    redactor = redactor_for(config.privacy.settings())
    out = redactor.message("user", [{"type": "text", "text": f"{JWT} EMP-123456 ticket 42 {AWS}"}], None)
    expected = f"{JWT} [redacted:employee-id] ticket [redacted:ticket] [redacted:aws-access-key] (scrubbed)"
    assert out.parts == [{"type": "text", "text": expected}]
    assert out.counts == Counter({"employee-id": 1, "ticket": 1, "aws-access-key": 1})
    off = redactor_for(load_config(env={"OM_PRIVACY__ENABLED": "false"}).privacy.settings())
    assert off.message("user", [{"type": "text", "text": AWS}], None).parts == [{"type": "text", "text": AWS}]


# --------------------------------------------------------------------------------------
# Every path that stores a message
# --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_failing_hook_stores_nothing_and_says_which(tmp_path: Path):
    from om_mcp.engine import InputError

    config = load_config(
        env={
            "OM_DB_PATH": str(tmp_path / "om.db"),
            "OM_OBSERVATIONAL_MEMORY__ENABLED": "false",
            "OM_PRIVACY__BEFORE_OBSERVATION": "support.privacy_hook:refuse",
        }
    )
    async with await Memory.open(config) as memory:
        with pytest.raises(InputError, match=r"privacy.before_observation \(support.privacy_hook:refuse\) failed"):
            await memory.append_turn("t", user="hello")
        assert await memory.thread("t") is None


@pytest.mark.anyio
async def test_mcp_appends_store_no_secret_and_count_each_rule(tmp_path: Path):
    db = tmp_path / "om.db"
    memory = await Memory.open(load_config(env={"OM_DB_PATH": str(db), "OM_OBSERVATIONAL_MEMORY__ENABLED": "false"}))
    try:
        async with connect(build_server(memory.config, memory)) as client:
            await ok(client, "append_messages", thread_id="t", user=f"my key is {AWS}, <private>my diagnosis</private>")
            batch = [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool-call", "tool_name": "sh", "args": {"cmd": "cat .env"}, "tool_call_id": "c1"}
                    ],
                },
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool-result",
                            "tool_name": "sh",
                            "tool_call_id": "c1",
                            "result": f"DB_PASSWORD=hunter22\nGH={GITHUB}",
                        }
                    ],
                },
            ]
            await ok(client, "append_messages", thread_id="t", messages=batch)
            context = await ok(client, "get_context", thread_id="t", include_status=True)
            assert context["status"]["redactions"] == {
                "aws-access-key": 1,
                "github-token": 1,
                "private": 1,
                "secret-assignment": 1,
            }
            assert "[redacted:aws-access-key]" in json.dumps(context) and AWS not in json.dumps(context)
            # the last batch again is a re-send: stored once, counted once
            await ok(client, "append_messages", thread_id="t", messages=batch)
        events = [e.payload for e in await memory.store.events(thread_id="t") if e.type == "data-om-redaction"]
        assert [e["redactions"] for e in events] == [
            {"aws-access-key": 1, "private": 1},
            {"github-token": 1, "secret-assignment": 1},
        ]
        assert await memory.store.redaction_counts() == {
            "aws-access-key": 1,
            "github-token": 1,
            "private": 1,
            "secret-assignment": 1,
        }
    finally:
        await memory.close()
    for secret in (AWS, GITHUB, "hunter22", "my diagnosis"):
        assert secret.encode() not in raw_bytes(db), secret


@pytest.mark.slow
def test_the_host_hook_and_ingest_store_no_secret(tmp_path: Path):
    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / f"{SESSION_ID}.jsonl", SESSION_ID, str(box.project))
    transcript.turn(
        f"deploy with {AWS} please",
        "done",
        tool=("Bash", {"command": "cat .env"}, f"SLACK={SLACK}\nDB_PASSWORD=hunter22"),
    )
    done = box.hook(box.event("UserPromptSubmit", transcript.path), "--no-worker")
    assert done.returncode == 0 and box.log_lines() == []
    bodies = " ".join(r[0] for r in box.query("SELECT body FROM messages"))
    assert "[redacted:aws-access-key]" in bodies and "[redacted:slack-token]" in bodies
    assert box.query("SELECT rule, count FROM om_redactions ORDER BY rule") == [
        ("aws-access-key", 1),
        ("secret-assignment", 1),
        ("slack-token", 1),
    ]
    events = box.query("SELECT payload FROM om_events WHERE type = 'data-om-redaction'")
    assert [json.loads(p)["total"] for (p,) in events] == [3]
    # `om-mcp ingest` of another session goes through the same rows
    other = ClaudeTranscript(tmp_path / "other.jsonl", "other-session", str(box.project))
    other.turn(f"the JWT is {JWT}", "noted")
    ingested = subprocess.run(
        [PYTHON, "-m", "om_mcp", "ingest", str(other.path), "--no-worker"],
        env=box.env,
        capture_output=True,
        timeout=scaled(60),
    )
    assert ingested.returncode == 0, ingested.stderr
    assert box.query("SELECT count FROM om_redactions WHERE rule = 'jwt'") == [(1,)]
    for secret in (AWS, SLACK, "hunter22", JWT):
        assert secret.encode() not in raw_bytes(box.db), secret


@pytest.mark.slow
def test_imports_store_no_secret(tmp_path: Path):
    """A Claude export (through append_messages) and an om-mcp JSONL export (its own intake)."""
    env = clean_env(tmp_path, OM_DB_PATH=str(tmp_path / "om.db"))
    claude = tmp_path / "conversations.json"
    claude.write_text(
        json.dumps(
            [
                {
                    "uuid": "c-1",
                    "name": "deploy",
                    "created_at": "2026-03-02T09:00:00Z",
                    "updated_at": "2026-03-02T09:05:00Z",
                    "chat_messages": [
                        {"uuid": "u1", "sender": "human", "text": f"key {AWS}", "created_at": "2026-03-02T09:00:00Z"},
                        {"uuid": "a1", "sender": "assistant", "text": "ok", "created_at": "2026-03-02T09:01:00Z"},
                    ],
                }
            ]
        )
    )
    # A memory written before redaction existed (privacy off), exported, then imported here.
    old = clean_env(tmp_path, OM_DB_PATH=str(tmp_path / "old.db"), OM_PRIVACY__ENABLED="false")
    own = tmp_path / "memory.jsonl"
    for argv in (["ingest", str(_openai_file(tmp_path, f"token {GITHUB}")), "--no-worker"], ["export", "-o", str(own)]):
        done = subprocess.run([PYTHON, "-m", "om_mcp", *argv], env=old, capture_output=True, timeout=scaled(120))
        assert done.returncode == 0, done.stderr.decode()
    assert GITHUB in own.read_text()
    for source in (claude, own):
        done = subprocess.run(
            [PYTHON, "-m", "om_mcp", "import", str(source)], env=env, capture_output=True, timeout=scaled(120)
        )
        assert done.returncode == 0, done.stderr.decode()
    status = json.loads(
        subprocess.run(
            [PYTHON, "-m", "om_mcp", "status", "--json"], env=env, capture_output=True, timeout=scaled(60)
        ).stdout
    )
    assert status["redactions"] == {"aws-access-key": 1, "github-token": 1}
    for secret in (AWS, GITHUB):
        assert secret.encode() not in raw_bytes(tmp_path / "om.db"), secret


def _openai_file(folder: Path, text: str) -> Path:
    path = folder / "chat.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": text}) + "\n" + json.dumps({"role": "assistant", "content": "ok"}) + "\n"
    )
    return path
