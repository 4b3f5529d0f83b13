"""The `[privacy]` section: what is redacted before a message is stored.

    [privacy]
    rules = { jwt = false }                      # built-in rules on or off (all on by default)
    extra = { employee-id = "EMP-\\d{6}" }       # your own rules: name = regular expression
    before_observation = "mypackage.privacy:scrub"   # a function of each message, run last

Every rule is checked at start: an unknown rule name, an expression that does not
compile or a hook that cannot be imported stops start-up naming it.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from om_mcp.privacy.rules import NAMES, RULE_NAME


class PrivacyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(True, description="off: messages are stored exactly as sent")
    private_tags: bool = Field(True, description="text inside <private>...</private> is stored as [private]")
    rules: dict[str, bool] = Field(default_factory=dict, description="built-in rules by name: true (on) or false")
    extra: dict[str, str] = Field(default_factory=dict, description="more rules: name -> regular expression")
    before_observation: str | None = Field(
        None, description="'package.module:function' called with each message before it is stored"
    )

    @field_validator("rules")
    @classmethod
    def _known(cls, value: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(set(value) - NAMES)
        if unknown:
            raise ValueError(f"unknown rule {unknown[0]!r}; the built-in rules are: {', '.join(sorted(NAMES))}")
        return value

    @field_validator("extra")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if not RULE_NAME.match(name):
                raise ValueError(f"rule name {name!r}: use lower-case letters, digits and hyphens")
            if name in NAMES:
                raise ValueError(f"rule {name!r} is built in: switch it with privacy.rules, or pick another name")
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise ValueError(f"rule {name!r} does not compile: {error}") from None
            if compiled.match(""):
                raise ValueError(f"rule {name!r} matches the empty string")
        return value

    @field_validator("before_observation")
    @classmethod
    def _importable(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not re.fullmatch(r"[\w.]+[:.]\w+", value):
            raise ValueError("must be a dotted path such as 'mypackage.privacy:scrub'")
        from om_mcp.privacy.redact import import_hook

        import_hook(value)  # raises ValueError naming the path
        return value

    def settings(self) -> dict[str, Any]:
        """Plain settings for `om_mcp.privacy.redactor_for` (and the host hook's cache)."""
        return self.model_dump()
