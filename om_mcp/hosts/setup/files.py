"""Changing a host's config file without damaging it.

* JSON, and JSONC as VS Code and Cursor allow it (comments, trailing commas):
  read by blanking comments and trailing commas in place (same length, same
  lines), so a parse error names the file's own line. A file with comments
  is never rewritten: rewriting would drop them, so it is left as it is and
  the entry to paste is printed instead. Trailing commas alone are rewritten
  away (nothing is lost).
* TOML (Codex): our table is one block of text, appended, replaced or removed
  as text; the rest of the file, comments included, stays byte for byte.
  `tomllib` checks the file parses before and after.

Every change of a host is computed first (old text -> new text), and all of
them are checked before any is written (`write_all`): a file that cannot be
changed means none is, and a write that fails puts back the ones before it.
Nothing changes when the texts are equal; otherwise, when setup adds its
entries, the old file is copied to `<file>.om-mcp.bak` before the new one is
written (atomically, through a temporary file). Removing them (`--uninstall`)
makes no backup and takes away the one setup made, and a file or folder left
empty by it goes too, so the tree is as setup found it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKUP_SUFFIX = ".om-mcp.bak"


class ConfigProblem(Exception):
    """A config file that cannot be changed safely; the message is one line naming the file."""


@dataclass
class Change:
    path: Path
    old: str | None  # None: the file does not exist
    new: str | None  # None: the file is (to be) removed
    what: str  # "MCP server", "hooks", ...
    manual: str | None = None  # set when the file is left alone: what to add by hand

    @property
    def changed(self) -> bool:
        return self.manual is None and self.old != self.new

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.old or "").splitlines(keepends=True),
            (self.new or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.old is not None else "/dev/null",
            tofile=str(self.path) if self.new is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigProblem(f"{path}: cannot be read ({error}); left untouched") from None


# --------------------------------------------------------------------------------------
# JSON and JSONC
# --------------------------------------------------------------------------------------

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def blank_jsonc(text: str) -> tuple[str, bool]:
    """(plain JSON text of the same length and lines, whether it had comments)."""
    had_comments = False

    def blank(match: re.Match[str]) -> str:
        nonlocal had_comments
        token = match.group(0)
        if token.startswith('"'):
            return token
        if token.startswith("/"):
            had_comments = True
        return re.sub(r"[^\n]", " ", token)

    return _TOKENS.sub(blank, text), had_comments


def parse_json(path: Path, text: str | None) -> tuple[dict[str, Any], bool]:
    """(the file's object, whether it has comments); ConfigProblem naming the line when it does not parse."""
    if text is None or not text.strip():
        return {}, False
    plain, had_comments = blank_jsonc(text)
    try:
        value = json.loads(plain)
    except json.JSONDecodeError as error:
        raise ConfigProblem(f"{path}:{error.lineno}: not valid JSON ({error.msg}); left untouched") from None
    if not isinstance(value, dict):
        raise ConfigProblem(f"{path}:1: expected a JSON object, found {type(value).__name__}; left untouched")
    return value, had_comments


def json_change(
    path: Path, what: str, edit: Callable[[dict[str, Any]], dict[str, Any]], snippet: Callable[[], Any]
) -> Change:
    """The change `edit` makes to the JSON(C) file at `path` (a deep copy is edited)."""
    old = read_text(path)
    doc, had_comments = parse_json(path, old)
    edited = edit(json.loads(json.dumps(doc)))
    if edited == doc:
        return Change(path, old, old, what)
    if had_comments:
        manual = json.dumps(snippet(), indent=2, ensure_ascii=False)
        return Change(path, old, old, what, manual=manual)
    # Nothing left once ours is gone: the file held only what we added, so it goes (its backup stays).
    return Change(path, old, dump_json(edited) if edited else None, what)


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------
# TOML (one table of ours, edited as text)
# --------------------------------------------------------------------------------------


def toml_table_change(path: Path, what: str, table: str, body: str | None) -> Change:
    """Put `body` (the table's lines, or None to remove it) under `[table]`, keeping the rest as it is.
    Sub-tables `[table.x]` belong to the table and go with it."""
    old = read_text(path)
    text = old or ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = re.search(r"line (\d+)", str(error))
        where = f":{line.group(1)}" if line else ""
        raise ConfigProblem(f"{path}{where}: not valid TOML ({error}); left untouched") from None
    desired = f"[{table}]\n{body}".strip() if body is not None else ""
    if _table_text(text, table) == desired:
        return Change(path, old, old, what)
    kept = _without_table(text, table)
    if desired:
        kept = (kept.rstrip("\n") + "\n\n" if kept.strip() else "") + desired + "\n"
    new = kept if kept.strip() else None
    if new is not None:
        tomllib.loads(new)  # what we write must parse; a bug here must not reach the file
    return Change(path, old, new, what)


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _spans(text: str, table: str) -> list[tuple[int, int]]:
    """Line ranges [start, end) of `[table]` and its `[table.*]` sub-tables."""
    lines = text.splitlines(keepends=True)
    spans, start = [], None
    for n, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is None:
            continue
        name = header.group(1).replace('"', "").replace("'", "")
        ours = name == table.replace('"', "") or name.startswith(table.replace('"', "") + ".")
        if start is not None and not ours:
            spans.append((start, n))
            start = None
        if ours and start is None:
            start = n
    if start is not None:
        spans.append((start, len(lines)))
    return spans


def _without_table(text: str, table: str) -> str:
    lines = text.splitlines(keepends=True)
    spans = _spans(text, table)
    drop = {n for a, b in spans for n in range(a, b)}
    if spans and spans[-1][1] == len(lines):  # the table ended the file: the blank lines that led to it go too
        n = spans[-1][0] - 1
        while n >= 0 and not lines[n].strip():
            drop.add(n)
            n -= 1
    kept = "".join(line for n, line in enumerate(lines) if n not in drop)
    return re.sub(r"\n{3,}", "\n\n", kept)


def _table_text(text: str, table: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for a, b in _spans(text, table) for line in lines[a:b]).strip()


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def apply(change: Change, *, backup: bool = True) -> Path | None:
    """Write the change (backup first, unless told not to); the backup's path, or None when none was made."""
    if not change.changed:
        return None
    made = None
    try:
        if change.old is not None and backup:
            made = backup_of(change.path)
            made.write_text(change.old, encoding="utf-8")
        if change.new is None:
            change.path.unlink(missing_ok=True)
            return made
        change.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = change.path.with_name(f".{change.path.name}.{os.getpid()}.tmp")
        temporary.write_text(change.new, encoding="utf-8")
        if change.path.exists():
            os.chmod(temporary, change.path.stat().st_mode & 0o777)
        os.replace(temporary, change.path)
    except OSError as error:
        raise ConfigProblem(f"{change.path}: cannot be written ({error.strerror or error}); nothing changed") from None
    return made


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def writable(path: Path) -> str | None:
    """Why `path` cannot be written (replaced through a temporary file beside it), or None when it can."""
    if path.exists() and not path.is_file():
        return "it is not a file"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    if path.exists() and not os.access(path, os.R_OK):
        return "it cannot be read"
    return None


def write_all(changes: list[Change], *, uninstall: bool = False, root: Path | None = None) -> list[Path | None]:
    """Write every change, or none: each is checked first, and a write that fails undoes the ones
    before it. Installing keeps a backup of each file it changes; uninstalling removes the backup
    and, up to `root`, the folders its removals left empty. The backups made, in order."""
    for change in changes:
        why = writable(change.path)
        if why is not None:
            raise ConfigProblem(f"{change.path}: cannot be written ({why}); nothing changed")
    done: list[tuple[Change, Path | None]] = []
    try:
        for change in changes:
            done.append((change, apply(change, backup=not uninstall)))
    except ConfigProblem:
        for change, made in reversed(done):
            _undo(change, made)
        raise
    if uninstall:
        for change in changes:
            backup_of(change.path).unlink(missing_ok=True)
            if change.new is None:
                _prune(change.path.parent, root)
    return [made for _, made in done]


def _undo(change: Change, made: Path | None) -> None:
    try:
        if change.old is None:
            change.path.unlink(missing_ok=True)
        else:
            change.path.write_text(change.old, encoding="utf-8")
        if made is not None:
            made.unlink(missing_ok=True)
    except OSError:
        pass  # the backup, if any, still holds the old text


def _prune(folder: Path, root: Path | None) -> None:
    """Remove `folder` and its parents while they are empty, stopping at `root` (never removed)."""
    if root is None:
        return
    root = root.resolve()
    folder = folder.resolve()
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            return
        folder = folder.parent
