"""Privacy before storage: `<private>` spans and secrets never reach the file or a model.

Every path that stores a message (the MCP tools, the host hooks, `om-mcp ingest`,
`om-mcp import`) passes its parts through one `Redactor` first; every other stored text
(titles, metadata, working memory, an import's other records, what a model wrote) goes
through `scrub`, the same rules. It is plain `re` with no pydantic, so the host hook builds
it from its cached settings as fast as the server does from the configuration. What is
scanned and what is not: docs/privacy.md.
"""

from om_mcp.privacy.redact import (
    PRIVATE_MARKER,
    REDACTION_EVENT,
    HookFailed,
    Redaction,
    Redactor,
    redaction_event,
    redactor_for,
    scrub,
)
from om_mcp.privacy.rules import RULES, Rule, marker

__all__ = [
    "PRIVATE_MARKER",
    "REDACTION_EVENT",
    "RULES",
    "HookFailed",
    "Redaction",
    "Redactor",
    "Rule",
    "marker",
    "redaction_event",
    "redactor_for",
    "scrub",
]
