"""`om-mcp serve`: start the memory server over stdio or streamable HTTP.

Stdout belongs to the protocol in stdio mode, so every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

from om_mcp import __version__
from om_mcp.config import ConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="om-mcp", description="Long-term memory for MCP hosts.")
    parser.add_argument("--version", action="version", version=f"om-mcp {__version__}")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the MCP server (the default command)")
    for target in (parser, serve):
        target.add_argument("--transport", choices=["stdio", "http"], help="stdio (default) or streamable HTTP")
        target.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
        target.add_argument("--port", type=int, help="HTTP port (default 8765)")
        target.add_argument("--db", help="SQLite database file")
        target.add_argument("--config", help="TOML config file (or $OM_MCP_CONFIG)")
        target.add_argument(
            "--insecure", action="store_true",
            help="allow HTTP on a non-loopback address without authentication (anyone who reaches it can"
            " read and change all memory)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _serve(_parser().parse_args(argv))
    except KeyboardInterrupt:  # Ctrl-C while starting: no traceback
        return 130


def _serve(args: argparse.Namespace) -> int:
    overrides = {
        "server.transport": args.transport,
        "server.host": args.host,
        "server.port": args.port,
        "db_path": args.db,
    }
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    http = config.server.transport == "http"
    if http:
        from om_mcp.server.http import bind_refusal

        refusal = bind_refusal(config, insecure=args.insecure)
        if refusal:
            print(f"om-mcp: {refusal}", file=sys.stderr)
            return 2
    # Imported here so `om-mcp --help` and config errors answer instantly.
    from om_mcp.server import build_server

    db_path = config.resolved_db_path()
    config = config.model_copy(update={"db_path": db_path})
    logging.getLogger("om_mcp").info("database: %s", db_path)
    server = build_server(config)
    try:
        if http:
            from om_mcp.server.http import run_http

            return run_http(server, config)
        from om_mcp.server.stdio import run_stdio

        return run_stdio(server)
    except Exception as error:  # noqa: BLE001 - one line; the traceback at debug level
        logging.getLogger("om_mcp").debug("the server stopped on an error", exc_info=True)
        cause = _first_leaf(error)
        print(f"om-mcp: stopped: {type(cause).__name__}: {cause} (log_level = \"debug\" shows where)",
              file=sys.stderr)
        return 1


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


if __name__ == "__main__":
    raise SystemExit(main())
