"""The Reflector's edits: an answer over line labels instead of a whole new log.

The Reflector reads the log with a label after each line (`* 🔴 (10:00) ... [L12]`) and
answers with what changes, one edit a line, in an `<edits>` block:

    drop L4 L9
    merge L5 L7 => * 🔴 (14:30) the one line that says what they said
    supersede L3 by L12
    keep L1

A line it does not name stays as it is, in its group, so the groups keep their ranges and
threads; a merged line takes the place of the latest line it merges. Lines ending in
`[user-stated]` are the user's own words: edits naming them are left out. What the edits
remove goes to the retired pile with its reason (engine/observation/retire.py), so nothing
is lost by accident and the answer costs a fraction of a rewrite's tokens. An answer whose
`<edits>` block holds nothing that reads as an edit falls back to today's rewriting (its
`<observations>`), which reflection.py handles as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from om_mcp.engine.observation import lines
from om_mcp.engine.observation.retire import Reason, norm
from om_mcp.engine.observation.transcript import thread_label
from om_mcp.neutral import neutralise
from om_mcp.store import Group

_LABEL = re.compile(r"\[?\bL(\d+)\b\]?", re.IGNORECASE)
_EDIT = re.compile(r"^\s*(?:[-*•]\s*|\d+[.)]\s*)?(keep|drop|merge|supersede)\b\s*(.*)$", re.IGNORECASE)
_BY = re.compile(r"\b(?:by|with)\b", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[*-]\s")
_LINE_LABEL = re.compile(r"[ \t]*\[L\d+\][ \t]*$", re.MULTILINE)


@dataclass
class Edit:
    verb: str  # keep | drop | merge | supersede
    labels: list[str]
    text: str = ""  # merge: the new line
    by: str | None = None  # supersede: the line that replaces


@dataclass
class Labelled:
    """The log as the Reflector reads it in edits mode, and where each label points."""

    text: str
    groups: list[Group]
    lines: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (group index, line index)


@dataclass
class Applied:
    """The log after the edits: each covered group's new text ("" when nothing is left), and why
    each line it no longer holds went (by the line's text, whitespace collapsed)."""

    texts: list[str]
    reasons: dict[str, Reason]
    changed: int  # lines the edits removed or replaced

    @property
    def text(self) -> str:
        return "\n\n".join(t for t in self.texts if t.strip())


def label_log(groups: list[Group], sections: bool, obscure: bool) -> Labelled:
    """Each line of the log after its label; in resource scope, one section per thread."""
    out = Labelled("", groups)
    blocks, n = [], 0
    for gi, group in enumerate(groups):
        rendered = []
        # neutralise keeps the lines where they are, so line i is the group's line i
        for li, (line, shown) in enumerate(zip(lines.lines(group.text), neutralise(group.text).splitlines())):
            if line.hash is None:
                rendered.append(shown)
                continue
            n += 1
            label = f"L{n}"
            out.lines[label] = (gi, li)
            rendered.append(f"{shown} [{label}]")
        text = "\n".join(rendered).strip("\n")
        if sections and group.thread_id:
            text = f'<thread id="{thread_label(group.thread_id, obscure)}">\n{text}\n</thread>'
        blocks.append(text)
    out.text = "\n\n".join(blocks)
    return out


def unlabel(text: str) -> str:
    """A rewrite that copied the labels, without them."""
    return _LINE_LABEL.sub("", text)


def parse(block: str) -> list[Edit] | None:
    """The edits of an `<edits>` block; None when it holds text but no edit (the answer then
    falls back to its rewrite)."""
    edits: list[Edit] = []
    written = False
    for row in block.splitlines():
        if not row.strip():
            continue
        written = True
        found = _EDIT.match(row)
        if found is None:
            continue
        verb, rest = found.group(1).lower(), found.group(2)
        if verb == "merge":
            head, sep, text = rest.partition("=>")
            labels = _labels(head)
            if sep and labels and text.strip():
                edits.append(Edit("merge", labels, text=unlabel(" ".join(text.split()))))
        elif verb == "supersede":
            parts = _BY.split(rest, maxsplit=1)
            old, new = _labels(parts[0]), _labels(parts[1]) if len(parts) == 2 else []
            if old and len(new) == 1:
                edits.append(Edit("supersede", old, by=new[0]))
        elif labels := _labels(rest):
            edits.append(Edit(verb, labels))
    return edits if edits or not written else None


def _labels(text: str) -> list[str]:
    return [f"L{int(n)}" for n in _LABEL.findall(text)]


def apply(log: Labelled, edits: list[Edit]) -> Applied:
    """The log with the edits made. An edit naming an unknown label, a line already named by an
    earlier edit, or a user-stated line leaves that line alone; in resource scope a merge keeps
    to the thread of the line it takes the place of."""
    rows = [lines.lines(g.text) for g in log.groups]
    removed: set[tuple[int, int]] = set()
    replaced: dict[tuple[int, int], str] = {}
    reasons: dict[str, Reason] = {}
    named: set[tuple[int, int]] = set()

    def free(label: str) -> tuple[int, int] | None:
        where = log.lines.get(label)
        if where is None or where in named or lines.is_user_stated(rows[where[0]][where[1]].text):
            return None
        return where

    for edit in edits:
        if edit.verb == "drop":
            for where in filter(None, map(free, edit.labels)):
                named.add(where)
                removed.add(where)
                reasons[norm(_text(rows, where))] = ("dropped", None)
        elif edit.verb == "merge":
            members = sorted({w for w in map(free, edit.labels) if w is not None})
            if not members:
                continue
            target = members[-1]
            thread = log.groups[target[0]].thread_id
            members = [w for w in members if log.groups[w[0]].thread_id == thread]
            latest = rows[target[0]][target[1]].text
            indent = latest[: len(latest) - len(latest.lstrip())]
            new = indent + (edit.text if _BULLET.match(edit.text) else f"* {edit.text}")
            for where in members:
                named.add(where)
                reasons[norm(_text(rows, where))] = ("merged", lines.line_hash(new))
                if where != target:
                    removed.add(where)
            replaced[target] = new
        elif edit.verb == "supersede" and edit.by is not None:
            by = log.lines.get(edit.by)
            for where in filter(None, map(free, edit.labels)):
                if by is None or where == by:
                    continue
                named.add(where)
                removed.add(where)
                reasons[norm(_text(rows, where))] = ("superseded", lines.line_hash(_text(rows, by)))
    texts = []
    touched = {gi for gi, _ in removed | set(replaced)}
    for gi, found in enumerate(rows):
        if gi not in touched:
            texts.append(log.groups[gi].text)
            continue
        kept: list[str] = []
        skip_below: int | None = None  # the depth under a removed or replaced line: its sub-bullets go too
        for li, line in enumerate(found):
            depth = len(line.text) - len(line.text.lstrip())
            if skip_below is not None and line.hash is not None and depth > skip_below:
                continue
            skip_below = None
            if (gi, li) in removed or (gi, li) in replaced:
                skip_below = depth
                if (gi, li) in replaced:
                    kept.append(replaced[(gi, li)])
                continue
            kept.append(line.text)
        texts.append(lines.tidy(kept))
    return Applied(texts, reasons, len(removed) + len(replaced))


def _text(rows: list[list[lines.Line]], where: tuple[int, int]) -> str:
    return rows[where[0]][where[1]].text
