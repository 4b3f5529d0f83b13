"""`Access`: the resources a caller may read or change.

It is resolved once, where a request comes in (`server/http/auth.py: access_of` for a bearer
token and the status page's request; the local owner for the shell commands, the hooks and a
stdio server), and every operation that reads or changes a tenant's data works within it. Every
resource is a value of its own (`EVERY_RESOURCE`), never an absent one: only the local owner and
a token granted "*" hold it. No access at all (`NO_RESOURCE`) is what a request without a valid
grant gets.

The store's rules that filter by resource take an `Access` and say so in their SQL with
`Access.sql_filter` (a flag for every resource, and the granted ids), so no `None` ever widens
a query to everyone's rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Access:
    """Some resources (`Access.to("alice")`), or every resource (`EVERY_RESOURCE`)."""

    granted: frozenset[str] = frozenset()
    every_resource: bool = False

    def __post_init__(self) -> None:
        if self.every_resource and self.granted:
            raise ValueError("an access to every resource names none")

    @classmethod
    def to(cls, resources: Iterable[str]) -> Access:
        """Exactly these resources ("*" among them grants nothing more: every resource is
        `EVERY_RESOURCE`, chosen where the grant is read)."""
        return cls(frozenset(resources))

    def allows(self, resource_id: str) -> bool:
        return self.every_resource or resource_id in self.granted

    @property
    def only(self) -> str | None:
        """The one resource this access is bound to, if it is bound to exactly one (where a new
        thread goes when the caller names no resource)."""
        return next(iter(self.granted)) if len(self.granted) == 1 else None

    def sql_filter(self, column: str, first: int) -> tuple[str, tuple[bool, list[str]]]:
        """`column` within this access as SQL (placeholders `$first` and `$first+1`), and its two
        parameters: `($1::boolean OR column = ANY ($2::text[]))`."""
        return (
            f"(${first}::boolean OR {column} = ANY (${first + 1}::text[]))",
            (self.every_resource, sorted(self.granted)),
        )

    def describe(self) -> str:
        """What it grants, in a refusal's words: "every resource", "alice, bob", "nothing"."""
        if self.every_resource:
            return "every resource"
        return ", ".join(sorted(self.granted)) or "nothing"


EVERY_RESOURCE = Access(every_resource=True)
NO_RESOURCE = Access()
