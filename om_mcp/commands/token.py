"""`om-mcp token create|list|revoke`: who may use the HTTP server.

* `create --resource R [--resource R2] [--name N]`: a new bearer token, printed once (first line,
  for scripts), with the config that stores only its hash;
* `list`: the configured bearer tokens and the OAuth grants of remote clients (`--json`);
* `revoke GRANT`: end an OAuth grant and every token it issued (a configured token is revoked by
  removing it from the config).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, add_config_arguments, fail, prepare, run_memory

CREATED = """\
{token}

The line above is the token; it is shown only this once. Clients send it as
  Authorization: Bearer <token>
om-mcp keeps only its hash. Add this to the config file (TOML):

[server.auth]
mode = "bearer"

{toml}

or set the environment variable (a JSON list; merge with any tokens already there):
  {env}
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="make a token bound to resources")
    create.add_argument(
        "--resource",
        action="append",
        required=True,
        metavar="ID",
        help="a resource the token may use; repeat for more; '*' for all",
    )
    create.add_argument("--name", default="", help="who holds it (shown in logs)")
    listing = actions.add_parser("list", help="configured tokens and OAuth grants", epilog=EXIT_CODES)
    add_config_arguments(listing, json_flag=True)
    revoke = actions.add_parser("revoke", help="end an OAuth grant and its tokens", epilog=EXIT_CODES)
    revoke.add_argument("grant", metavar="GRANT", help="the grant's id (om-mcp token list)")
    add_config_arguments(revoke)


def run(args: argparse.Namespace) -> int:
    if args.action == "create":
        return _create(args)
    config, code = prepare(args, must_exist=False)
    if config is None:
        return code
    if args.action == "list":

        async def listing(memory: Any) -> int:
            return _list(args, config.server.auth.tokens, await memory.grants.list())

        return run_memory(config, listing)

    async def revoke(memory: Any) -> int:
        if not await memory.grants.revoke(args.grant):
            return fail(f"no grant {args.grant!r} that is not already revoked (om-mcp token list)", EXIT_NOT_FOUND)
        print(f"revoked {args.grant}: its client's tokens no longer work")
        return EXIT_OK

    return run_memory(config, revoke)


def _create(args: argparse.Namespace) -> int:
    from om_mcp.server.http.tokens import create_token

    try:
        created = create_token(args.resource, name=args.name)
    except ValueError as error:
        print(f"om-mcp token create: {error}", file=sys.stderr)
        return 2
    print(CREATED.format(token=created.token, toml=created.toml(), env=created.env()), end="")
    return 0


def _when(seconds: float | None) -> str:
    return "" if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _list(args: argparse.Namespace, tokens: list[Any], grants: list[Any]) -> int:
    from om_mcp.commands._output import print_json, print_table

    rows = [
        {"kind": "token", "id": t.hash[:19], "who": t.name, "resources": ", ".join(t.resources), "state": "configured"}
        for t in tokens
    ]
    for grant in grants:
        state = "revoked" if grant.revoked else "active" if grant.live_tokens else "idle (tokens expired)"
        rows.append(
            {
                "kind": "oauth",
                "id": grant.id,
                "who": grant.client_name or grant.client_id,
                "resources": ", ".join(grant.resources),
                "state": state,
                "created": _when(grant.created_at),
                "last_used": _when(grant.used_at),
            }
        )
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["kind", "id", "who", "resources", "state", ("last_used", "last used")])
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="om-mcp token", description="Who may use the HTTP server.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
