"""Reading Observer and Reflector output.

Models do not always follow the format, so the parser is lenient about what it
accepts but strict about what counts as a tag: a section tag counts only when its
opening tag starts a line (leading spaces allowed). An observation that quotes
"<current-task>" in the middle of a sentence must not cut the log in two.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from om_mcp.config.extractors import BUILTIN_TAGS
from om_mcp.neutral import neutralise
from om_mcp.privacy import scrub

MAX_LINE_CHARS = 10_000
TRUNCATION_NOTE = " … [truncated]"

_FLAGS = re.IGNORECASE | re.MULTILINE
_THREAD_OPEN = re.compile(r"""^[ \t]*<thread\s+id\s*=\s*["']([^"'<>]*)["'][^>\n]*>""", _FLAGS)
# With no <observations> block, only lines that look like log entries are kept:
# list items, plus the Date lines that anchor them in time.
_LIST_LINE = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t]+\S")
_DATE_LINE = re.compile(r"^[ \t]*Date:[ \t]*\S", re.IGNORECASE)


@dataclass
class ParsedOutput:
    observations: str = ""
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, str] = field(default_factory=dict)
    # Multi-thread runs: one entry per <thread id="..."> section, keyed by id, and
    # the log lines written outside every section (a shared goal line, say).
    threads: dict[str, ParsedOutput] = field(default_factory=dict)
    unsectioned: str = ""
    # True when the output looked like a repetition loop; every other field is empty then.
    degenerate: bool = False


# --------------------------------------------------------------------------------------
# Degenerate output
# --------------------------------------------------------------------------------------

# Thresholds, and why:
# - Below 2,000 characters a loop cannot do much harm, and short texts give too
#   little signal; never flag them.
# - One line over 50,000 characters is a runaway: no real observation is that long.
# - Lines: a model stuck in a loop writes the same line again and again. Among the
#   substantive lines (24+ characters after stripping, so short "Date:" or "* ->"
#   lines do not count), if there are at least 20 and more than half repeat an
#   earlier line exactly, the output is a loop. A healthy log has no exact repeats
#   at all (the prompt forbids them), so half is a wide margin.
# - Compression: loops inside a line ("and and and ...") or with a long period
#   escape the line rule but compress extremely well. Measured on samples, healthy
#   logs, even formulaic ones ("ran tests for module_12.py: 40 passed"), compress to
#   10-15% of their size with zlib; a loop compresses to 1-4%. A ratio below 5%
#   means the output is dominated by repetition.
DEGENERATE_MIN_CHARS = 2_000
DEGENERATE_MAX_LINE = 50_000
DEGENERATE_MIN_LINE_CHARS = 24
DEGENERATE_MIN_LINES = 20
DEGENERATE_DUPLICATE_SHARE = 0.5
DEGENERATE_COMPRESSION_RATIO = 0.05


def is_degenerate(text: str) -> bool:
    """True when the output looks like a repetition loop rather than a log."""
    if not text or len(text) < DEGENERATE_MIN_CHARS:
        return False
    lines = text.splitlines()
    if any(len(line) > DEGENERATE_MAX_LINE for line in lines):
        return True

    substantive = [s for s in (line.strip() for line in lines) if len(s) >= DEGENERATE_MIN_LINE_CHARS]
    if len(substantive) >= DEGENERATE_MIN_LINES:
        repeats = len(substantive) - len(set(substantive))
        if repeats / len(substantive) > DEGENERATE_DUPLICATE_SHARE:
            return True

    raw = text.encode("utf-8")
    return len(zlib.compress(raw, 6)) / len(raw) < DEGENERATE_COMPRESSION_RATIO


# --------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------


@dataclass
class _Block:
    start: int  # where the opening tag's line starts
    end: int  # just after the closing tag (or where an unterminated block stops)
    content: str
    attr: str | None = None  # the id of a <thread id="..."> block


def _open_re(tag: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*<{re.escape(tag)}\s*>", _FLAGS)


def _close_re(tag: str) -> re.Pattern[str]:
    return re.compile(rf"</\s*{re.escape(tag)}\s*>", re.IGNORECASE)


def _line_edges(text: str, start: int, end: int) -> int:
    """2 when a closing tag is alone on its line, 1 when it starts or ends it, else 0."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    return (not text[line_start:start].strip()) + (not text[end:line_end].strip())


def _stop_re(tags: Sequence[str]) -> re.Pattern[str]:
    """Any line-anchored opening tag from `tags`: where an unterminated block ends."""
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"^[ \t]*<(?:{names})(?:\s[^>\n]*)?>", _FLAGS)


def _find_blocks(
    text: str, open_re: re.Pattern[str], close_re: re.Pattern[str], stop_re: re.Pattern[str], prefer_line_edge: bool
) -> list[_Block]:
    """Every block whose opening tag starts a line.

    The closing tag may sit anywhere after the opening. For long blocks a closing
    tag alone on its line is preferred, then one at the start or end of a line, so a
    quoted tag inside the log ("... the user wrote: </observations>") does not end it
    early and drop the lines after it. A block left open runs to the next section
    opener, or to the end of the output.
    """
    blocks: list[_Block] = []
    pos = 0
    while True:
        m = open_re.search(text, pos)
        if not m:
            return blocks
        body = m.end()
        closes = list(close_re.finditer(text, body))
        close = None
        if prefer_line_edge:
            again = open_re.search(text, body)  # a later block's closing tag is not this one's
            mine = [c for c in closes if again is None or c.start() < again.start()]
            edges = [_line_edges(text, c.start(), c.end()) for c in mine]
            for wanted in (2, 1):
                close = next((c for c, e in zip(mine, edges) if e == wanted), None)
                if close is not None:
                    break
        if close is None and closes:
            close = closes[0]
        if close is not None:
            content, end = text[body : close.start()], close.end()
        else:
            nxt = stop_re.search(text, body)
            end = nxt.start() if nxt else len(text)
            content = text[body:end]
        blocks.append(_Block(m.start(), end, content, m.group(1) if m.re.groups else None))
        pos = max(end, body)


def _cut(text: str, blocks: Sequence[_Block]) -> str:
    """Text with the given blocks removed."""
    out, pos = [], 0
    for b in sorted(blocks, key=lambda b: b.start):
        if b.start >= pos:
            out.append(text[pos : b.start])
            pos = b.end
    out.append(text[pos:])
    return "".join(out)


def _cap_lines(text: str) -> str:
    return "\n".join(
        line[:MAX_LINE_CHARS] + TRUNCATION_NOTE if len(line) > MAX_LINE_CHARS else line for line in text.split("\n")
    )


def _clean(text: str) -> str:
    """Trim the block and drop blank lines at its edges, keeping inner indentation."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if lines:
        lines[0] = lines[0].lstrip()
    return _cap_lines("\n".join(line.rstrip() for line in lines))


def _value(text: str | None) -> str | None:
    if text is None:
        return None
    cleaned = _clean(text)
    return cleaned or None


def _list_lines_only(text: str) -> str:
    keep = [line for line in text.split("\n") if _LIST_LINE.match(line) or _DATE_LINE.match(line)]
    return _clean("\n".join(keep))


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


def _parse_body(text: str, slugs: Sequence[str], bare_is_log: bool) -> ParsedOutput:
    """Hints, extractor values and observations of one output (or one thread section).

    bare_is_log: text outside any tag is the log itself (inside a thread section),
    rather than chatter to be filtered down to list lines (a whole output).
    """
    hint_tags = [*BUILTIN_TAGS, *slugs]
    stop = _stop_re(["observations", "thread", *hint_tags])

    found: dict[str, list[_Block]] = {}
    for tag in hint_tags:
        found[tag] = _find_blocks(text, _open_re(tag), _close_re(tag), stop, prefer_line_edge=False)
    hint_blocks = [b for blocks in found.values() for b in blocks]

    def first(tag: str) -> str | None:
        return _value(found[tag][0].content) if found[tag] else None

    extracted = {}
    for slug in slugs:
        if found[slug]:
            # The last value wins: a model that corrects itself writes the tag again.
            value = _value(found[slug][-1].content)
            if value is not None:
                extracted[slug] = value

    obs_blocks = _find_blocks(text, _open_re("observations"), _close_re("observations"), stop, prefer_line_edge=True)
    if obs_blocks:
        # Hints are sometimes written inside the observations block; lift them out.
        pieces = (_clean(_cut(b.content, _hints_in(b.content, hint_tags, stop))) for b in obs_blocks)
        observations = "\n".join(p for p in pieces if p)
    else:
        rest = _cut(text, hint_blocks)
        observations = _clean(rest) if bare_is_log else _list_lines_only(rest)

    return ParsedOutput(
        observations=observations,
        current_task=first("current-task"),
        suggested_response=first("suggested-response"),
        thread_title=first("thread-title"),
        extracted=extracted,
    )


def _hints_in(text: str, hint_tags: Sequence[str], stop: re.Pattern[str]) -> list[_Block]:
    return [
        b for tag in hint_tags for b in _find_blocks(text, _open_re(tag), _close_re(tag), stop, prefer_line_edge=False)
    ]


def parse_output(text: str, extractor_slugs: Sequence[str] = (), multi_thread: bool = False) -> ParsedOutput:
    """Parse an Observer or Reflector reply.

    - Tags count only when the opening tag starts a line; case does not matter.
    - Several <observations> blocks are joined. With none, only list lines (and
      Date lines) of the reply are kept, so chatter around the log is dropped.
    - <current-task>, <suggested-response>, <thread-title>: the first one wins.
      Extractor tags: the last one wins.
    - A block left open at the end runs to the end of the reply.
    - Lines longer than MAX_LINE_CHARS are cut, with TRUNCATION_NOTE.
    - A degenerate reply (repetition loop) yields an empty result with degenerate=True.
    - multi_thread: each <thread id="..."> section is parsed on its own into
      `threads`; `observations` is then the sections rebuilt without their hint tags.
      If the model wrote no sections, the reply is parsed as a single thread.
    """
    text = (text or "").replace("\r\n", "\n")
    if is_degenerate(text):
        return ParsedOutput(degenerate=True)
    slugs = [s for s in extractor_slugs if s]

    if multi_thread:
        stop = _stop_re(["observations", "thread"])
        sections = _find_blocks(text, _THREAD_OPEN, _close_re("thread"), stop, prefer_line_edge=True)
        if sections:
            threads: dict[str, ParsedOutput] = {}
            for section in sections:
                parsed = _parse_body(section.content, slugs, bare_is_log=True)
                thread_id = (section.attr or "").strip()
                if thread_id in threads:
                    # The same id twice: keep both logs, and the first hints.
                    prev = threads[thread_id]
                    prev.observations = "\n".join(x for x in (prev.observations, parsed.observations) if x)
                    prev.extracted.update(parsed.extracted)
                    continue
                threads[thread_id] = parsed
            # Values outside every section (e.g. a title for the whole batch) still count.
            outside = _parse_body(_cut(text, sections), slugs, bare_is_log=False)
            outside.unsectioned = outside.observations
            outside.observations = "\n\n".join(
                f'<thread id="{tid}">\n{p.observations}\n</thread>' for tid, p in threads.items() if p.observations
            )
            outside.threads = threads
            return outside

    return _parse_body(text, slugs, bare_is_log=False)


def edits_block(text: str) -> tuple[str | None, str]:
    """A Reflector answer's `<edits>` block (its opening tag starting a line), and the answer
    without it; (None, the answer) when it has none."""
    text = (text or "").replace("\r\n", "\n")
    stop = _stop_re(["observations", "edits", *BUILTIN_TAGS])
    blocks = _find_blocks(text, _open_re("edits"), _close_re("edits"), stop, prefer_line_edge=True)
    if not blocks:
        return None, text
    return "\n".join(b.content for b in blocks), _cut(text, blocks)


EXCERPT_CHARS = 120
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, quoted, one-line excerpt of an answer that could not be used, fit to show in a status
    or a log: secrets out (the built-in rules), control characters out, neutral."""
    flat = " ".join(_CONTROL.sub(" ", scrub(None, text)[0]).split())  # before it is cut: a cut secret still leaks
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return f"“{neutralise(flat)}”" if flat else "nothing"
