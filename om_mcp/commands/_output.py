"""How CLI commands print: progress bars, tables and JSON.

Rich draws them, imported only when something is drawn on a terminal (about
30 ms), so `om-mcp serve` and the hooks never pay for it. When the stream is
not a terminal the output is plain: no bar at all, tables as tab-separated
values with a header line, JSON as indented text, so pipes and scripts get
data, not decoration. Progress goes to stderr: stdout carries the data.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

Column = str | tuple[str, str]  # a key, or (key, header)


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


@contextmanager
def progress(total: int | None, description: str, *, stream: TextIO | None = None) -> Iterator[Callable[..., None]]:
    """Yield `advance(n=1)`; a bar on a terminal (stderr by default), nothing otherwise.

    with progress(len(threads), "importing") as advance:
        for thread in threads:
            ...
            advance()
    """
    stream = stream or sys.stderr
    if not is_terminal(stream):
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(file=stream), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


# Ids are never cut on a terminal: `om-mcp show` and `--resource` need them whole.
WHOLE = ("thread", "resource", "id", "thread_id", "resource_id")


def print_table(
    rows: Iterable[Mapping[str, Any] | Sequence[Any]], columns: Sequence[Column], *, out: TextIO | None = None
) -> None:
    """Rows (mappings by key, or sequences in column order) as a table; TSV when not on a terminal."""
    out = out or sys.stdout
    keys = [c[0] if isinstance(c, tuple) else c for c in columns]
    headers = [c[1] if isinstance(c, tuple) else c for c in columns]
    table = [[_cell(row, key, i) for i, key in enumerate(keys)] for row in rows]
    if not is_terminal(out):
        out.write("\t".join(headers) + "\n")
        for row in table:
            out.write("\t".join(_plain(v) for v in row) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    view = Table(*headers, header_style="bold", show_edge=False, pad_edge=False)
    for i in range(len(keys)):
        if table and all(isinstance(r[i], (int, float)) or r[i] is None for r in table):
            view.columns[i].justify = "right"
        if keys[i] in WHOLE and table:  # the other columns give way
            view.columns[i].no_wrap = True
            view.columns[i].min_width = max(len(headers[i]), *(len(_plain(r[i])) for r in table))
    for row in table:
        view.add_row(*(_pretty(v) for v in row))
    Console(file=out).print(view)


def print_json(obj: Any, *, out: TextIO | None = None) -> None:
    """`obj` (plain data, a pydantic model or a dataclass) as JSON; highlighted on a terminal."""
    out = out or sys.stdout
    text = json.dumps(_data(obj), ensure_ascii=False, indent=2, default=str)
    if not is_terminal(out):
        out.write(text + "\n")
        return
    from rich.console import Console

    Console(file=out).print_json(text)


def _data(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
        import dataclasses  # ~5 ms, only when a dataclass is printed

        return dataclasses.asdict(obj)
    if isinstance(obj, (list, tuple)):
        return [_data(o) for o in obj]
    if isinstance(obj, Mapping):
        return {k: _data(v) for k, v in obj.items()}
    return obj


def _cell(row: Mapping[str, Any] | Sequence[Any], key: str, index: int) -> Any:
    if isinstance(row, Mapping):
        return row.get(key)
    if hasattr(row, "__dataclass_fields__") or hasattr(row, key):
        return getattr(row, key, None)
    return row[index] if index < len(row) else None


def _plain(value: Any) -> str:
    if value is None:
        return ""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, default=str)
        if isinstance(value, (dict, list))
        else str(value)
    )
    return text.replace("\t", " ").replace("\n", " ")


def _pretty(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return _plain(value)
