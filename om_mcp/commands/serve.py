"""`om-mcp serve`: start the memory server over stdio or streamable HTTP.

A bad configuration (exit 2) or a database file that cannot be used (exit 3) is
refused in one line before any client connects.
"""

from __future__ import annotations

import argparse
import logging
import sys

from om_mcp.commands.common import add_config_arguments, load, open_database_or_exit

log = logging.getLogger("om_mcp")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=["stdio", "http"], help="stdio (default) or streamable HTTP")
    parser.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP port (default 8765)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow HTTP on a non-loopback address without authentication (anyone who reaches it can read and"
        " change all memory)",
    )
    parser.add_argument(
        "--public-url", metavar="URL", help="where clients reach this server (https://host): OAuth's issuer"
    )
    parser.add_argument(
        "--oauth",
        action="store_const",
        const=True,
        help="be an OAuth 2.1 authorization server for remote clients; the owner approves each with a code from"
        " om-mcp connect (needs --public-url)",
    )
    parser.add_argument(
        "--oauth-issuer",
        metavar="URL",
        help="accept JWT access tokens from this OpenID provider (identities mapped in [server.oauth.identities])",
    )
    parser.add_argument(
        "--hooks",
        action="store_true",
        help="the host's hooks record the conversations (om-mcp hook): the agent is told not to call"
        " append_messages or get_context",
    )
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = load(
        args,
        {
            "server.transport": args.transport,
            "server.host": args.host,
            "server.port": args.port,
            "server.public_url": args.public_url,
            "server.oauth.enabled": args.oauth,
            "server.oauth.issuer": args.oauth_issuer,
        },
    )
    if config is None:
        return 2
    http = config.server.transport == "http"
    if http:
        from om_mcp.server.http import bind_refusal

        refusal = bind_refusal(config, insecure=args.insecure)
        if refusal:
            print(f"om-mcp: {refusal}", file=sys.stderr)
            return 2
    config, refused = open_database_or_exit(config)
    if refused:
        return refused
    if config.observational_memory.budget.dollars:
        from om_mcp.engine.observation.engine import budget_refusal

        problem = budget_refusal(config)
        if problem:
            print(f"om-mcp: {problem}", file=sys.stderr)
            return 2
    from om_mcp import heap
    from om_mcp.server import sdk

    sdk.import_server_side()  # the SDK without its client package (a server never uses it)
    from om_mcp.server import build_server  # imported here: --help and config errors answer at once

    heap.enable()
    with sdk.constructing():  # our logging is set: the SDK's would only import rich
        server = build_server(config, hooks=args.hooks)
    try:
        if http:
            from om_mcp.server.http import run_http

            return run_http(server, config)
        from om_mcp.server.stdio import run_stdio

        return run_stdio(server)
    except Exception as error:  # noqa: BLE001 - one line; the traceback at debug level
        log.debug("the server stopped on an error", exc_info=True)
        cause = _first_leaf(error)
        print(f'om-mcp: stopped: {type(cause).__name__}: {cause} (log_level = "debug" shows where)', file=sys.stderr)
        return 1


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
