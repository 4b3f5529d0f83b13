"""Reading Observer and Reflector replies: sections, leniency, loops, thread sections."""

from __future__ import annotations

import random

from om_mcp.engine.observation.parsing import MAX_LINE_CHARS, TRUNCATION_NOTE, is_degenerate, parse_output


def test_parse_basic_sections():
    out = parse_output(
        "Sure, here you go.\n"
        "<observations>\nDate: May 20, 2026\n* 🔴 (10:00) User has a cat named Miso\n</observations>\n"
        "<current-task>\nFind a vet\n</current-task>\n"
        "<suggested-response>Ask which district</suggested-response>\n"
        "<thread-title>Cat care questions</thread-title>\n"
    )
    assert out.observations == "Date: May 20, 2026\n* 🔴 (10:00) User has a cat named Miso"
    assert out.current_task == "Find a vet"
    assert out.suggested_response == "Ask which district"
    assert out.thread_title == "Cat care questions"
    assert not out.degenerate and out.threads == {} and out.unsectioned == ""


def test_empty_reply():
    out = parse_output("")
    assert out.observations == "" and out.current_task is None and not out.degenerate
    assert parse_output(None).observations == ""  # type: ignore[arg-type]


def test_crlf_line_endings():
    out = parse_output("<observations>\r\n* 🔴 (10:00) a\r\n* b\r\n</observations>\r\n")
    assert out.observations == "* 🔴 (10:00) a\n* b"


def test_tags_mid_line_are_ignored_and_case_insensitive():
    out = parse_output(
        "I will write <observations> now.\n"
        "  <OBSERVATIONS>\n* 🟡 (10:00) User quoted <current-task>x</current-task> in a sentence\n</Observations>\n"
        "<Current-Task>Real task</current-task>"
    )
    assert out.observations == "* 🟡 (10:00) User quoted <current-task>x</current-task> in a sentence"
    assert out.current_task == "Real task"
    # A closing tag quoted inside a log line does not end the block early.
    out = parse_output("<observations>\n* User asked what </observations> means\n* next\n</observations>")
    assert out.observations == "* User asked what </observations> means\n* next"


def test_multiple_blocks_joined():
    out = parse_output("<observations>\n* a line\n</observations>\ntext\n<observations>\n* b line\n</observations>")
    assert out.observations == "* a line\n* b line"


def test_no_tags_keeps_list_lines():
    out = parse_output(
        "Here are my notes:\nDate: May 20, 2026\n* 🔴 (10:00) first\n- second\n1. third\nThanks!\n"
        "<current-task>\n* not a log line\n</current-task>"
    )
    assert out.observations == "Date: May 20, 2026\n* 🔴 (10:00) first\n- second\n1. third"
    assert out.current_task == "* not a log line"


def test_indentation_inside_the_block_is_kept():
    out = parse_output("<observations>\n\n   * 🟡 (10:00) ran tests\n  * -> 12 passed   \n\n</observations>")
    assert out.observations == "* 🟡 (10:00) ran tests\n  * -> 12 passed"


def test_unterminated_blocks():
    out = parse_output("<observations>\n* one\n* two")
    assert out.observations == "* one\n* two"
    out = parse_output("<observations>\n* one\n<current-task>\nDoing X\n<suggested-response>\nSay Y")
    assert out.observations == "* one"
    assert out.current_task == "Doing X"
    assert out.suggested_response == "Say Y"


def test_first_match_for_hints_last_for_extractors():
    out = parse_output(
        "<observations>\n* x\n</observations>\n"
        "<current-task>first</current-task>\n<current-task>second</current-task>\n"
        "<suggested-response>s1</suggested-response>\n<suggested-response>s2</suggested-response>\n"
        "<mood>happy</mood>\n<mood>tired</mood>\n<other>ignored</other>",
        extractor_slugs=["mood"],
    )
    assert out.current_task == "first"
    assert out.suggested_response == "s1"
    assert out.extracted == {"mood": "tired"}


def test_empty_extractor_value_is_left_out():
    out = parse_output("<observations>\n* x\n</observations>\n<mood>  \n</mood>", extractor_slugs=["mood", ""])
    assert out.extracted == {}


def test_thread_title_close_anywhere_open_at_line_start():
    out = parse_output(
        "<observations>\n* x\n</observations>\nsee <thread-title>No</thread-title>\n"
        "<thread-title>Tax return help</thread-title>"
    )
    assert out.thread_title == "Tax return help"


def test_hints_inside_observations_are_lifted_out():
    out = parse_output("<observations>\n* x\n<current-task>Task</current-task>\n</observations>")
    assert out.observations == "* x"
    assert out.current_task == "Task"


def test_extractor_tags_inside_observations_are_lifted_out():
    out = parse_output("<observations>\n* x\n<mood>calm</mood>\n* y\n</observations>", ["mood"])
    assert [line for line in out.observations.split("\n") if line] == ["* x", "* y"]
    assert out.extracted == {"mood": "calm"}


def test_overlong_line_capped():
    rng = random.Random(7)
    long_line = "* " + "".join(rng.choice("abcdefghij klmnop") for _ in range(MAX_LINE_CHARS + 500))
    out = parse_output(f"<observations>\n{long_line}\n* short\n</observations>")
    first, second = out.observations.split("\n")
    assert first.endswith(TRUNCATION_NOTE) and len(first) == MAX_LINE_CHARS + len(TRUNCATION_NOTE)
    assert second == "* short"


# --------------------------------------------------------------------------------------
# Degenerate output
# --------------------------------------------------------------------------------------


def _healthy_log(lines: int) -> str:
    rng = random.Random(42)
    words = (
        "user asked about flights hotel budget tests passed failed module config database migration "
        "Lisbon Porto Miso vet invoice deadline Friday renovation quote kitchen worktop oak steel".split()
    )
    out = ["Date: May 20, 2026"]
    for i in range(lines):
        marker = rng.choice("🔴🟡🟢✅")
        text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))
        out.append(f"* {marker} ({i // 60 % 24:02d}:{i % 60:02d}) {text} #{rng.randint(1, 999)}")
        if i % 7 == 0:
            out.append(f"  * -> ran tests for module_{i}.py: {rng.randint(1, 300)} passed")
    return "\n".join(out)


def test_degenerate_detection():
    healthy = _healthy_log(400)
    assert len(healthy) > 20_000
    assert not is_degenerate(healthy)
    formulaic = "\n".join(
        f"* 🟡 (10:{i % 60:02d}) Assistant ran tests for module_{i}.py: {i * 7 % 300} passed" for i in range(300)
    )
    assert not is_degenerate(formulaic)
    assert not is_degenerate("* 🔴 (10:00) same line again and again\n" * 20)  # short output: never flagged

    looping_lines = _healthy_log(20) + "\n" + "* 🟡 (10:00) User asked about the weather again\n" * 200
    assert is_degenerate(looping_lines)
    assert is_degenerate("<observations>\n* " + "and then " * 2000)
    assert is_degenerate("x" * 60_000)
    out = parse_output("<observations>\n" + looping_lines + "\n</observations>")
    assert out.degenerate and out.observations == "" and out.current_task is None


def test_a_degenerate_multi_thread_reply_yields_nothing():
    loop = "* 🟡 (10:00) User asked about the weather again\n" * 200
    out = parse_output(f'<observations>\n<thread id="a">\n{loop}</thread>\n</observations>', multi_thread=True)
    assert out.degenerate and out.threads == {} and out.observations == ""


# --------------------------------------------------------------------------------------
# Several threads
# --------------------------------------------------------------------------------------


def test_multi_thread_sections():
    text = (
        "<observations>\n"
        '<thread id="a1">\nDate: May 20, 2026\n* 🔴 (09:00) User renovates kitchen\n'
        "<current-task>Quotes</current-task>\n<suggested-response>Wait</suggested-response>\n"
        "<thread-title>Kitchen renovation</thread-title>\n<mood>busy</mood>\n</thread>\n"
        "<thread id='b2'>\nDate: May 20, 2026\n* 🟡 (10:00) Cover letter drafted\n"
        "<current-task>Letter</current-task>\n</thread>\n"
        "</observations>"
    )
    out = parse_output(text, ["mood"], multi_thread=True)
    assert set(out.threads) == {"a1", "b2"}
    a = out.threads["a1"]
    assert a.observations == "Date: May 20, 2026\n* 🔴 (09:00) User renovates kitchen"
    assert (a.current_task, a.suggested_response, a.thread_title) == ("Quotes", "Wait", "Kitchen renovation")
    assert a.extracted == {"mood": "busy"}
    assert out.threads["b2"].current_task == "Letter"
    assert out.threads["b2"].suggested_response is None
    assert out.observations.startswith('<thread id="a1">\nDate: May 20, 2026')
    assert "<current-task>" not in out.observations
    assert out.unsectioned == ""

    # No sections at all: parsed like a single thread.
    flat = parse_output("<observations>\n* x\n</observations>", multi_thread=True)
    assert flat.threads == {} and flat.observations == "* x"


def test_lines_outside_every_section_are_kept_apart():
    out = parse_output(
        "<observations>\n* 🔴 (09:00) User's goal: ship v2\n"
        '<thread id="a">\nDate: May 20, 2026\n* x\n</thread>\n'
        "* 🔴 (10:00) Shared deadline is Friday\n</observations>\n"
        "<current-task>Overall task</current-task>",
        multi_thread=True,
    )
    assert set(out.threads) == {"a"}
    assert out.observations == '<thread id="a">\nDate: May 20, 2026\n* x\n</thread>'
    assert "User's goal: ship v2" in out.unsectioned and "Shared deadline is Friday" in out.unsectioned
    assert "* x" not in out.unsectioned
    # Values written outside every section still count.
    assert out.current_task == "Overall task"


def test_without_an_observations_block_only_list_lines_outside_sections_count():
    out = parse_output('<thread id="a">\n* x\n</thread>\nSome chatter.\n* stray line', multi_thread=True)
    assert out.threads["a"].observations == "* x"
    assert out.unsectioned == "* stray line"


def test_inside_a_section_bare_text_is_the_log():
    out = parse_output('<thread id="a">\nUser moved to Porto\n</thread>', multi_thread=True)
    assert out.threads["a"].observations == "User moved to Porto"


def test_the_same_section_twice_keeps_both_logs_and_the_first_hints():
    out = parse_output(
        '<observations>\n<thread id="a">\n* x\n<current-task>t1</current-task>\n<mood>ok</mood>\n</thread>\n'
        '<thread id="a">\n* y\n<current-task>t2</current-task>\n<mood>tired</mood>\n</thread>\n</observations>',
        ["mood"],
        multi_thread=True,
    )
    assert list(out.threads) == ["a"]
    a = out.threads["a"]
    assert a.observations == "* x\n* y"
    assert a.current_task == "t1"
    assert a.extracted == {"mood": "tired"}
    assert out.observations == '<thread id="a">\n* x\n* y\n</thread>'


def test_a_section_with_nothing_logged_is_left_out_of_the_rebuilt_log():
    out = parse_output(
        '<observations>\n<thread id="a">\n<current-task>only a task</current-task>\n</thread>\n'
        '<thread id="b">\n* y\n</thread>\n</observations>',
        multi_thread=True,
    )
    assert out.threads["a"].observations == "" and out.threads["a"].current_task == "only a task"
    assert out.observations == '<thread id="b">\n* y\n</thread>'
