"""Write and read om-mcp's JSONL export, checking every record on the way.

    counts = write_records(records, out, source="om-mcp 0.2.0 (~/.om-mcp/memory.db)")
    for record in read_records(open(path, encoding="utf-8")):
        ...  # header first, then body records as validated dicts; the end record is checked, not yielded

The record shapes and their order are defined in `jsonl_records`. Both sides
run the same checks (shape, references to earlier records, no duplicate
message in a thread), so a file this module writes is one it reads back. The
reader finds a cut-short file only at its end (no end record): import it in
one transaction, or read it through once to validate before importing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from pydantic import BaseModel, ValidationError

from om_mcp.importers.jsonl_records import (
    BODY_MODELS,
    FORMAT,
    MINOR,
    RETIRED_FIELDS,
    VERSION,
    End,
    Header,
    MessageRecord,
    ObservationGroup,
)


class ExportFormatError(ValueError):
    """A record breaks the format; the message names the line (or record) and the field."""

    def __init__(self, where: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")
        self.where = where
        self.field = field


def write_records(
    records: Iterable[dict[str, Any]], out: TextIO, *, source: str = "om-mcp", exported_at: datetime | None = None
) -> dict[str, int]:
    """Write the header, each body record (validated and checked), and the end record.

    `records` are body records only (resource, thread, message,
    observation_record, observation_group), in the order `jsonl_records`
    describes. Returns the count of each type. Raises ExportFormatError, naming
    the record's position, before writing a record that breaks the format.
    """
    header = Header(
        type=FORMAT, version=VERSION, minor=MINOR, source=source, exported_at=exported_at or datetime.now(UTC)
    )
    out.write(_line(header))
    checker = _Checker()
    for index, raw in enumerate(records, start=1):
        where = f"record {index}"
        model = _validate(raw, where, lenient=False)
        checker.check(model, where)
        out.write(_line(model))
    out.write(_line(End(type="end", counts=dict(checker.counts))))
    return dict(checker.counts)


def read_records(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield the header, then each body record as a validated dict; check the end record.

    Raises ExportFormatError naming the line and field: not JSON, an unknown
    type, a missing or invalid field, a reference to a record not seen before,
    a newer major version, records after the end, or no end record at all.
    """
    checker = _Checker()
    header: Header | None = None
    lenient = False
    ended = False
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        raw = _parse(line, where)
        if header is None:
            header = _header(raw, where)
            lenient = header.minor > MINOR
            yield header.model_dump(mode="json")
            continue
        if ended:
            raise ExportFormatError(where, "a record after the end record")
        if raw.get("type") == "end":
            end = _model(End, raw, where, lenient)
            if end.counts != dict(checker.counts):
                raise ExportFormatError(where, f"the file holds {dict(checker.counts)} but says {end.counts}", "counts")
            ended = True
            continue
        model = _validate(raw, where, lenient)
        checker.check(model, where)
        yield _dump(model)
    if header is None:
        raise ExportFormatError("line 1", "the file is empty: not an om-mcp export")
    if not ended:
        raise ExportFormatError(
            f"line {number}", "the file ends without its end record: it was cut short, do not import it"
        )


def _line(model: BaseModel) -> str:
    data = model.model_dump(mode="json", exclude_none=True)
    if isinstance(model, MessageRecord):
        data["parts"] = _parts(model)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def _dump(model: BaseModel) -> dict[str, Any]:
    data = model.model_dump(mode="json")
    if isinstance(model, MessageRecord):
        data["parts"] = _parts(model)
    if isinstance(model, ObservationGroup) and model.retired_by is None:
        for name in RETIRED_FIELDS:  # a group of a log, as it was written before minor 1
            data.pop(name, None)
    return data


def _parts(message: MessageRecord) -> list[dict[str, Any]]:
    # As the store keeps them (what MessageIn.to_record produces): no None fields, no is_error=False.
    parts = [p.model_dump(mode="json", exclude_none=True) for p in message.parts]
    for part in parts:
        if part.get("is_error") is False:
            del part["is_error"]
    return parts


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as error:
        raise ExportFormatError(where, f"not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise ExportFormatError(where, "nested too deeply for an export record") from None
    if not isinstance(raw, dict):
        raise ExportFormatError(where, "a record must be a JSON object")
    return raw


def _header(raw: dict[str, Any], where: str) -> Header:
    if raw.get("type") != FORMAT:
        raise ExportFormatError(where, f"not an om-mcp export: the first line's type is {raw.get('type')!r}", "type")
    version = raw.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise ExportFormatError(
            where,
            f"format version {version} is newer than this om-mcp reads ({VERSION}); upgrade om-mcp to import it",
            "version",
        )
    return _model(Header, raw, where, lenient=isinstance(raw.get("minor"), int) and raw["minor"] > MINOR)


def _validate(raw: dict[str, Any], where: str, lenient: bool) -> BaseModel:
    if not isinstance(raw, dict):
        raise ExportFormatError(where, "a record must be an object")
    kind = raw.get("type")
    model = BODY_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ExportFormatError(
            where, f"unknown record type {kind!r} (expected one of {', '.join(BODY_MODELS)})", "type"
        )
    return _model(model, raw, where, lenient)


def _model(model: type[BaseModel], raw: dict[str, Any], where: str, lenient: bool) -> Any:
    if lenient:
        # A newer minor version may add fields: drop the ones this version does not know.
        raw = {k: v for k, v in raw.items() if k in model.model_fields}
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in (raw.get("type", model.__name__), *first["loc"]))
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        raise ExportFormatError(where, f"{first['msg']}{more}", field) from None


class _Checker:
    """References point back to records already seen; no message appears twice in a thread."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.resources: set[str] = set()
        self.threads: dict[str, str] = {}  # thread id -> resource id
        self.messages: dict[str, set[str]] = {}  # thread id -> its message ids
        self.all_messages: set[str] = set()
        self.records: dict[str, int] = {}  # key -> current generation
        self.groups: set[tuple[str, int, int]] = set()

    def check(self, r: Any, where: str) -> None:
        kind = r.type
        if kind == "resource":
            self._unique(r.id not in self.resources, where, "resource.id", f"resource {r.id!r} appears twice")
            self.resources.add(r.id)
        elif kind == "thread":
            self._known(r.resource_id in self.resources, where, "thread.resource_id", "resource", r.resource_id)
            self._unique(r.id not in self.threads, where, "thread.id", f"thread {r.id!r} appears twice")
            self.threads[r.id] = r.resource_id
            self.messages[r.id] = set()
        elif kind == "message":
            self._known(r.thread_id in self.threads, where, "message.thread_id", "thread", r.thread_id)
            seen = self.messages[r.thread_id]
            self._unique(
                r.id not in seen, where, "message.id", f"message {r.id!r} appears twice in thread {r.thread_id!r}"
            )
            seen.add(r.id)
            self.all_messages.add(r.id)
        elif kind == "observation_record":
            self._record(r, where)
        elif kind == "observation_group":
            self._group(r, where)
        self.counts[kind] += 1

    def _record(self, r: Any, where: str) -> None:
        self._known(r.resource_id in self.resources, where, "observation_record.resource_id", "resource", r.resource_id)
        if r.thread_id is not None:
            self._known(r.thread_id in self.threads, where, "observation_record.thread_id", "thread", r.thread_id)
        self._unique(r.key not in self.records, where, "observation_record.key", f"record {r.key!r} appears twice")
        for thread_id, message_id in r.observed_through.items():
            self._known(thread_id in self.threads, where, "observation_record.observed_through", "thread", thread_id)
            self._known(
                message_id in self.messages[thread_id],
                where,
                "observation_record.observed_through",
                f"message of thread {thread_id!r}",
                message_id,
            )
        for thread_id in r.hints:
            self._known(thread_id in self.threads, where, "observation_record.hints", "thread", thread_id)
        self.records[r.key] = r.generation

    def _group(self, g: Any, where: str) -> None:
        self._known(
            g.record_key in self.records, where, "observation_group.record_key", "observation record", g.record_key
        )
        if g.generation > self.records[g.record_key]:
            raise ExportFormatError(
                where,
                f"generation {g.generation} is past the record's current generation {self.records[g.record_key]}",
                "observation_group.generation",
            )
        slot = (g.record_key, g.generation, g.position)
        self._unique(
            slot not in self.groups,
            where,
            "observation_group.position",
            f"two groups at generation {g.generation}, position {g.position}",
        )
        self.groups.add(slot)
        if g.thread_id is not None:
            self._known(g.thread_id in self.threads, where, "observation_group.thread_id", "thread", g.thread_id)
        ids = self.messages[g.thread_id] if g.thread_id is not None else self.all_messages
        for name in ("first_message_id", "last_message_id"):
            value = getattr(g, name)
            if value is not None:
                self._known(value in ids, where, f"observation_group.{name}", "message", value)

    @staticmethod
    def _known(ok: bool, where: str, field: str, what: str, value: str) -> None:
        if not ok:
            raise ExportFormatError(where, f"names {what} {value!r}, which no earlier record defines", field)

    @staticmethod
    def _unique(ok: bool, where: str, field: str, message: str) -> None:
        if not ok:
            raise ExportFormatError(where, message, field)
