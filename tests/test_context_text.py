"""Observation text made ready for the agent: compaction, relative times, gap lines."""

from __future__ import annotations

from datetime import UTC, date, datetime

from om_mcp.engine.context.observations import (
    add_relative_times,
    compact_observations,
    gap_phrase,
    parse_date,
    prepare_observations_for_context,
    relative_phrase,
)

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)


def test_relative_phrase():
    today = date(2026, 5, 20)
    cases = {
        date(2026, 5, 20): "today",
        date(2026, 5, 19): "yesterday",
        date(2026, 5, 21): "tomorrow",
        date(2026, 5, 15): "5 days ago",
        date(2026, 5, 13): "1 week ago",
        date(2026, 4, 29): "3 weeks ago",
        date(2026, 3, 1): "2 months ago",
        date(2023, 5, 15): "3 years ago",
        date(2026, 5, 25): "in 5 days",
        date(2026, 7, 20): "in 2 months",
    }
    for then, phrase in cases.items():
        assert relative_phrase(then, today) == phrase, then
    assert relative_phrase(datetime(2026, 5, 18, 23, 0), NOW) == "2 days ago"


def test_month_and_year_boundaries():
    # A month counts only once the day of the month is reached again.
    assert relative_phrase(date(2026, 4, 21), date(2026, 5, 20)) == "4 weeks ago"
    assert relative_phrase(date(2026, 4, 20), date(2026, 5, 20)) == "1 month ago"
    assert relative_phrase(date(2025, 5, 21), date(2026, 5, 20)) == "11 months ago"
    assert relative_phrase(date(2025, 5, 20), date(2026, 5, 20)) == "1 year ago"


def test_gap_phrase():
    assert gap_phrase(date(2026, 4, 21), date(2026, 5, 15)) == "[3 weeks later]"
    assert gap_phrase(date(2026, 5, 1), date(2026, 5, 3)) == "[2 days later]"


def test_parse_date_forms():
    for text in (
        "May 15, 2023",
        "May 15 2023",
        "2023-05-15",
        "Monday, May 15, 2023",
        "15 May 2023",
        "may 15th, 2023",
        "  MAY 15, 2023  ",
        "15th May, 2023",
    ):
        assert parse_date(text) == date(2023, 5, 15), text
    assert parse_date("Sept 3, 2024") == date(2024, 9, 3)
    assert parse_date("Dec. 4, 2025") == date(2025, 12, 4)
    for bad in ("sometime in May", "Feb 30, 2024", "2023-13-01", "", "Smarch 3, 2024", "May 2024"):
        assert parse_date(bad) is None, bad


def test_compaction():
    text = (
        "Date: May 1, 2026\n"
        "* 🔴 (10:00) User likes tea\n"
        "* 🟡 (10:01) [Group 3] Assistant   checked [the docs](https://x.test) and [Image #1: a.png]\n"
        "  * 🟢 -> minor\n\n\n\n"
        "* ✅ (10:05) Done … [truncated]"
    )
    assert compact_observations(text) == (
        "Date: May 1, 2026\n"
        "* 🔴 (10:00) User likes tea\n"
        "* (10:01) Assistant checked [the docs](https://x.test) and [Image #1: a.png]\n"
        "  * -> minor\n\n"
        "* ✅ (10:05) Done … [truncated]"
    )


def test_compaction_keeps_gap_lines_references_and_indentation():
    text = "[3 weeks later]\n[1]: https://x.test\n    * -> deep step\r\n* [Tool] [12 items collapsed]"
    assert (
        compact_observations(text) == "[3 weeks later]\n[1]: https://x.test\n    * -> deep step\n* [12 items collapsed]"
    )


def test_relative_times_and_gaps():
    text = (
        "Date: Apr 20, 2026\n"
        "* 🔴 (09:00) User will visit Porto next week (meaning 2026-04-27)\n"
        "* 🔴 (09:05) User's exam is scheduled (estimated May 30, 2026)\n"
        "* 🟢 (09:06) User visited Braga last week (meaning 2026-04-13)\n"
        "Date: Apr 21, 2026\n"
        "* 🔴 (10:00) note\n"
        "Date: May 15, 2026\n"
        "* 🔴 (11:00) vague (estimated sometime soon)\n"
        "Date: not a date\n"
    )
    assert prepare_observations_for_context(text, NOW) == (
        "Date: Apr 20, 2026 (1 month ago)\n"
        "* 🔴 (09:00) User will visit Porto next week (meaning 2026-04-27 - 3 weeks ago, likely already happened)\n"
        "* 🔴 (09:05) User's exam is scheduled (estimated May 30, 2026 - in 1 week)\n"
        "* (09:06) User visited Braga last week (meaning 2026-04-13 - 1 month ago)\n"
        "Date: Apr 21, 2026 (4 weeks ago)\n"
        "* 🔴 (10:00) note\n"
        "[3 weeks later]\n"
        "Date: May 15, 2026 (5 days ago)\n"
        "* 🔴 (11:00) vague (estimated sometime soon)\n"
        "Date: not a date"
    )


def test_relative_times_idempotent_and_thread_sections():
    once = add_relative_times("Date: May 1, 2026\n* x\nDate: May 15, 2026", NOW)
    assert add_relative_times(once, NOW) == once
    sections = '<thread id="a">\nDate: Jan 1, 2026\n</thread>\n<thread id="b">\nDate: May 1, 2026\n</thread>'
    assert "later]" not in add_relative_times(sections, NOW)
    assert prepare_observations_for_context("  \n", NOW) == ""
    assert prepare_observations_for_context("", NOW) == ""


def test_days_in_a_row_get_no_gap_line_and_a_date_is_enough_for_now():
    text = "Date: May 18, 2026\n* a\nDate: May 19, 2026\n* b"
    assert add_relative_times(text, date(2026, 5, 20)) == (
        "Date: May 18, 2026 (2 days ago)\n* a\nDate: May 19, 2026 (yesterday)\n* b"
    )
