"""Our resource URIs, and the one way an id goes into them.

Ids are opaque: anything the tools accept (a project path such as `/home/me/project`,
`C:\\proj`, `a:b?c#d`, spaces, any Unicode) is a valid id. In a URI an id is
percent-encoded as RFC 6570 expands `{thread_id}`: its UTF-8 bytes, each one outside
`A-Z a-z 0-9 - . _ ~` written `%XX`. Reading decodes each `%XX` once, so an id that
itself holds `%2F` is written `%252F` and reads back as `%2F`, never as `/`.

    om://resources/%2Fhome%2Fme%2Fproject/threads      -> resource "/home/me/project"
    om://threads/a%252Fb/messages                       -> thread "a%2Fb"

The templates below are what `resources/templates/list` shows; building (`thread_uri`,
`resource_uri`) and reading (`parse`, and the SDK's own matching of `resources/read`)
both use the SDK's RFC 6570 implementation, so the two always agree. The SDK's default
checks for file paths (no `..`, no absolute paths) do not apply: an id is looked up by
equality, never opened as a file.
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.shared.uri_template import UriTemplate

Kind = Literal["thread", "resource"]

# What follows the id in each resource URI.
THREAD_VIEWS = ("messages", "observations", "observations/history", "events", "status", "working-memory")
RESOURCE_VIEWS = ("threads", "working-memory", "observations", "observations/history")

OPAQUE_IDS = ResourceSecurity(reject_path_traversal=False, reject_absolute_paths=False)

_TEMPLATES: dict[tuple[Kind, str], UriTemplate] = {
    **{("thread", v): UriTemplate.parse(f"om://threads/{{thread_id}}/{v}") for v in THREAD_VIEWS},
    **{("resource", v): UriTemplate.parse(f"om://resources/{{resource_id}}/{v}") for v in RESOURCE_VIEWS},
}


def template(kind: Kind, view: str) -> str:
    """The URI template, as registered and listed."""
    return str(_TEMPLATES[(kind, view)])


def thread_uri(thread_id: str, view: str) -> str:
    return _TEMPLATES[("thread", view)].expand({"thread_id": thread_id})


def resource_uri(resource_id: str, view: str) -> str:
    return _TEMPLATES[("resource", view)].expand({"resource_id": resource_id})


def parse(uri: str) -> tuple[Kind, str, str] | None:
    """(kind, id, view) of one of our URIs, the id decoded; None for any other URI."""
    for (kind, view), parsed in _TEMPLATES.items():
        found = parsed.match(uri)
        if found is not None:
            value = next(iter(found.values()))
            if isinstance(value, str) and value:
                return kind, value, view
    return None


def canonical(uri: str) -> str:
    """The URI as we write it (for exact-string subscription matching): `%2f` and `%2F`,
    `~` and `%7E` name the same resource."""
    parsed = parse(uri)
    if parsed is None:
        return uri
    kind, ident, view = parsed
    return thread_uri(ident, view) if kind == "thread" else resource_uri(ident, view)
