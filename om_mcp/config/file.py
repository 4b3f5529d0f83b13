"""Changing one option of a TOML config file in place, as a person would with an editor.

`om-mcp config set KEY VALUE` must not lose the user's other keys, comments or layout. So the
change is made to the text: the line that sets the key gets the new value (a trailing comment
stays), or a new line goes at the end of the key's table, or a new table at the end of the file.
The result is then parsed again and must equal the old file with just that key changed; a file
whose layout this cannot edit safely (the key inside an inline table, a table built from dotted
keys) is refused with a one-line reason rather than rewritten.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

_HEADER = re.compile(r"^\s*\[(?!\[)(?P<name>[^\]]+)\]\s*(?:#.*)?$")
_ARRAY_HEADER = re.compile(r"^\s*\[\[")
_KEY_LINE = re.compile(r"^\s*(?P<key>[A-Za-z0-9_\-.\"' ]+?)\s*=")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


class EditRefused(ValueError):
    """The file cannot be changed safely by text; the message says why, in one line."""


def value_text(raw: str) -> str:
    """VALUE as written on the command line, as a TOML value: itself when it is one (`true`, `300`,
    `"x"`, `[1, 2]`, `{ tokens = 600 }`), else the text as a string (`openai/gpt-4o-mini`, `debug`)."""
    try:
        tomllib.loads(f"v = {raw}")
    except tomllib.TOMLDecodeError:
        return _string(raw)
    return raw.strip()


def parse_value(text: str) -> Any:
    return tomllib.loads(f"v = {text}")["v"]


def set_option(text: str, keys: tuple[str, ...], value: str) -> str:
    """The file's text with `keys` set to the TOML value `value`; EditRefused when unsafe."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise EditRefused(f"the file is not valid TOML ({error}); fix it first") from None
    expected = copy.deepcopy(before)
    node = expected
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise EditRefused(f"{'.'.join(keys)}: {key} is set to a value in the file, not a table; edit it by hand")
        node = child
    node[keys[-1]] = parse_value(value)
    lines = text.splitlines(keepends=True)
    new = _replace(lines, keys, value)
    if new is None:
        new = _insert(lines, keys, value)
    result = "".join(new)
    try:
        after = tomllib.loads(result)
    except tomllib.TOMLDecodeError:
        after = None
    if after != expected:
        raise EditRefused(
            f"{'.'.join(keys)} is written in a form this command does not edit (an inline table or dotted keys);"
            " edit the file by hand"
        )
    return result


def write_atomically(path: Path, text: str) -> None:
    """Replace the file in one step (a reader sees the old file or the new one, never half of
    either), keeping its permissions; a new file is the user's alone (it may hold a database URL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c >= " " or c == "\t" else f"\\u{ord(c):04x}" for c in escaped)
    return f'"{escaped}"'


def _key_path(text: str) -> tuple[str, ...]:
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\s]+)', text)
    return tuple(next(p for p in part if p) if any(part) else "" for part in parts)


def _written(keys: tuple[str, ...]) -> str:
    return ".".join(k if _BARE.match(k) else _string(k) for k in keys)


def _sections(lines: list[str]) -> list[tuple[tuple[str, ...] | None, int, int]]:
    """(table, first line of its body, end): the root table is (), an array of tables None."""
    found: list[tuple[tuple[str, ...] | None, int, int]] = []
    table: tuple[str, ...] | None = ()
    start = 0
    for number, line in enumerate(lines):
        header = _HEADER.match(line)
        if header or _ARRAY_HEADER.match(line):
            found.append((table, start, number))
            table = _key_path(header.group("name")) if header else None
            start = number + 1
    found.append((table, start, len(lines)))
    return found


def _entries(lines: list[str], start: int, end: int) -> list[tuple[tuple[str, ...], int, int]]:
    """(key path, first line, line after) of each key = value in a table's body, multi-line values whole."""
    entries = []
    number = start
    while number < end:
        match = _KEY_LINE.match(lines[number])
        if not match or lines[number].lstrip().startswith("#"):
            number += 1
            continue
        last = number
        while last < end:  # a value over several lines ends where the lines so far parse
            try:
                tomllib.loads("".join(lines[number : last + 1]))
                break
            except tomllib.TOMLDecodeError:
                last += 1
        entries.append((_key_path(match.group("key")), number, min(last, end - 1) + 1))
        number = last + 1
    return entries


def _replace(lines: list[str], keys: tuple[str, ...], value: str) -> list[str] | None:
    for table, start, end in _sections(lines):
        if table is None or keys[: len(table)] != table:
            continue
        rest = keys[len(table) :]
        for key, first, after in _entries(lines, start, end):
            if key != rest:
                continue
            line = lines[first]
            indent = line[: len(line) - len(line.lstrip())]
            comment = _trailing_comment("".join(lines[first:after])) if after == first + 1 else ""
            ending = "\n" if lines[after - 1].endswith("\n") else ""
            return [*lines[:first], f"{indent}{_written(rest)} = {value}{comment}{ending}", *lines[after:]]
    return None


def _trailing_comment(entry: str) -> str:
    """The `  # ...` after a one-line value, found where the text before it parses on its own."""
    body = entry.rstrip("\n")
    for match in re.finditer(r"\s*#", body):
        try:
            tomllib.loads(body[: match.start()])
        except tomllib.TOMLDecodeError:
            continue
        return body[match.start() :]
    return ""


def _insert(lines: list[str], keys: tuple[str, ...], value: str) -> list[str]:
    """A new line at the end of the key's own table (or the root's, after the opening comments),
    else the table appended at the end of the file."""
    table, line = keys[:-1], f"{_written(keys[-1:])} = {value}\n"
    for name, start, end in _sections(lines):
        if name != table:
            continue
        entries = _entries(lines, start, end)
        at = entries[-1][2] if entries else start
        if not table and not entries:
            at = next((n for n in range(start, end) if not lines[n].strip()), end)
            if at == end < len(lines):  # right above the first table: keep a blank line between
                line += "\n"
        head = lines[:at]
        if head and not head[-1].endswith("\n"):
            head[-1] += "\n"
        return [*head, line, *lines[at:]]
    text = "".join(lines)
    gap = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    return [text + gap, f"[{_written(table)}]\n", line]
