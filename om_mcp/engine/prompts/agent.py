"""What the acting agent reads from us: the preamble of its memory, the hint that
closes it, the recall guidance, temporal-gap markers and the working-memory block.

Every token here is read on every turn, so each line earns its place.
"""

from __future__ import annotations

from datetime import timedelta

# What the observations hold, by scope: one log per thread holds this conversation only; one per
# resource (a user, or a project the hooks record) holds every conversation of it.
CONTEXT_HOLDS = {
    "thread": "earlier parts of this conversation",
    "resource": "earlier parts of this conversation and of your other conversations with this user",
}

CONTEXT_PREAMBLE = """\
The observations below are your memory of {holds}. They are notes taken while you \
talked; the original messages are no longer shown to you.

How to use them:
- Draw on specific details from them (names, numbers, dates, what was decided) rather \
than answering in general terms, and use them to fit your answer to this user.
- If two notes disagree, trust the newer one: things change, and the later note \
records the change.
- A plan dated in the past has most likely happened by now; treat it as done unless a \
later note says otherwise.
- The user's most recent message comes first. If it asks for something new, do that, \
even if the notes point at other work.
- Do not mention these notes, your memory or how it works; just use what you know."""

CONTINUATION_HINT = """\
Continue the conversation naturally from the latest message. Earlier parts of it were \
condensed into the observations above; there is no need to mention that. Anything \
said after this note is more recent and outweighs what came before."""

TEMPORAL_GAP = "[{gap} passed since the previous message]"


def temporal_gap_text(delta: timedelta) -> str:
    """The marker text for a pause, e.g. "[3 hours passed since the previous message]"."""
    return TEMPORAL_GAP.format(gap=describe_duration(delta))


def describe_duration(delta: timedelta) -> str:
    """A rough, human duration: "25 minutes", "3 hours", "2 days", "5 weeks"."""
    minutes = max(0, int(delta.total_seconds() // 60))
    for size, unit in ((7 * 24 * 60, "week"), (24 * 60, "day"), (60, "hour")):
        # Switch unit only from two of them up, so 90 minutes stays "90 minutes".
        if minutes >= 2 * size:
            count = minutes // size
            return f"{count} {unit}s"
    if minutes >= 60 and minutes % 60 == 0:
        return "1 hour"
    return f"{minutes} minute" + ("" if minutes == 1 else "s")


# --------------------------------------------------------------------------------------
# Recall: how the acting agent gets from an observation back to the messages
# --------------------------------------------------------------------------------------

RECALL_INSTRUCTIONS = """\
Each group of observations carries a range of message ids (`_range: first:last_`). \
When a note is too thin to answer from (an exact quote, a number, code, a list), read \
the original messages with the `recall` tool: mode="messages" with cursor set to the \
range's first id (page=1 reads forward) or its last id (page=-1 reads backward). \
detail="low" shows every message briefly; detail="high" with part_index shows one part \
whole. mode="search" with a few distinctive words finds messages anywhere in the \
user's history; mode="threads" lists the user's other conversations."""

RECALL_INSTRUCTIONS_THREAD_SCOPE = """\
Each group of observations carries a range of message ids (`_range: first:last_`). \
When a note is too thin to answer from, read the original messages of this \
conversation with the `recall` tool: mode="messages" with cursor set to the range's \
first id (page=1 reads forward) or its last id (page=-1 reads backward)."""

OTHER_CONVERSATIONS_INTRO = """\
The messages below come from the user's OTHER conversations and have not been \
condensed into observations yet. They are here for reference; the current \
conversation is your focus."""


# --------------------------------------------------------------------------------------
# Working memory
# --------------------------------------------------------------------------------------

WORKING_MEMORY_INTRO = (
    "Working memory: your persistent notes about the user and the task, kept across conversations. "
    "Rely on them instead of asking again."
)

WORKING_MEMORY_TEMPLATE_HOW = (
    "When you learn something durable, call `{tool}` with the complete updated Markdown "
    "(it replaces the note, so keep what is still true)."
)

WORKING_MEMORY_SCHEMA_HOW = (
    "When you learn something durable, call `{tool}` with only the changed fields as a JSON object "
    "(objects merge, arrays are replaced, null deletes); it must match the schema."
)

WORKING_MEMORY_READ_ONLY = "These notes are read-only for you."
