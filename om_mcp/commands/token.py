"""`om-mcp token create --resource R [--resource R2] [--name N]`: a new bearer token.

Prints the token once (first line, for scripts) and the config that stores only its hash.
"""

from __future__ import annotations

import argparse
import sys

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


def run(args: argparse.Namespace) -> int:
    from om_mcp.server.http.tokens import create_token

    if args.action != "create":
        print(f"om-mcp token: unknown action {args.action!r}; use create", file=sys.stderr)
        return 2
    try:
        created = create_token(args.resource, name=args.name)
    except ValueError as error:
        print(f"om-mcp token create: {error}", file=sys.stderr)
        return 2
    print(CREATED.format(token=created.token, toml=created.toml(), env=created.env()), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="om-mcp token", description="Bearer tokens for the HTTP server.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
