"""Making bearer tokens: a random secret shown once, and the config entry holding its hash."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from om_mcp.config import TokenEntry, hash_token

TOKEN_PREFIX = "om_"  # recognisable in a leaked log or a secret scanner
TOKEN_BYTES = 32

__all__ = ["NewToken", "create_token", "hash_token", "new_token"]


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


@dataclass(frozen=True)
class NewToken:
    token: str  # the secret: print it once, store only `entry`
    entry: TokenEntry

    def toml(self) -> str:
        """The entry as a TOML table to append to the config file."""
        resources = ", ".join(json.dumps(r) for r in self.entry.resources)
        lines = ["[[server.auth.tokens]]"]
        if self.entry.name:
            lines.append(f"name = {json.dumps(self.entry.name)}")
        lines += [f'hash = "{self.entry.hash}"', f"resources = [{resources}]"]
        return "\n".join(lines)

    def env(self) -> str:
        """The entry as OM_SERVER__AUTH__TOKENS (a JSON list; merge with any tokens already there)."""
        value = json.dumps([self.entry.model_dump(exclude_defaults=True)])
        return f"OM_SERVER__AUTH__TOKENS='{value}'"


def create_token(resources: Sequence[str], name: str = "") -> NewToken:
    """A new token bound to `resources` ("*" = all). Raises ValueError naming the bad field."""
    token = new_token()
    try:
        entry = TokenEntry(hash=hash_token(token), resources=list(resources), name=name)
    except ValueError as error:  # pydantic's ValidationError is one
        raise ValueError(_describe(error)) from None
    return NewToken(token=token, entry=entry)


def _describe(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if errors is None:
        return str(error)
    parts = []
    for item in errors():
        field = ".".join(str(p) for p in item["loc"])
        parts.append(f"{'--resource' if field.startswith('resources') else '--' + field}: {item['msg']}")
    return "; ".join(parts)
