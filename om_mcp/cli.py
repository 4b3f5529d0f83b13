"""`om-mcp serve`: start the memory server over stdio or streamable HTTP.

Stdout belongs to the protocol in stdio mode, so every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

from om_mcp import __version__, logs
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
    logs.configure(config.log_level)
    db_path = config.resolved_db_path()
    config = config.model_copy(update={"db_path": db_path})
    # Refuse a bad database file now, in one line, before any client connects.
    from om_mcp.store.errors import DatabaseRefused
    from om_mcp.store.sqlite.database import connect

    try:
        connect(db_path).close()
    except DatabaseRefused as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return 3
    logging.getLogger("om_mcp").info("database: %s", db_path)
    # Imported here so `om-mcp --help` and config errors answer instantly.
    from om_mcp.server import build_server

    server = build_server(config)
    if config.server.transport == "http":
        logging.getLogger("om_mcp").info(
            "serving streamable HTTP on http://%s:%d%s", config.server.host, config.server.port, config.server.path
        )
        server.run(
            "streamable-http", host=config.server.host, port=config.server.port,
            streamable_http_path=config.server.path,
        )
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
