"""`om-mcp connect [--resource R ...] [--json]`: connect a remote client (claude.ai, ChatGPT, ...).

Prints the server's MCP URL, to paste into the client, and a one-time code, to type on the
consent page the client opens (the server runs with `--oauth`). The code works once, for
`server.oauth.consent_code_minutes`; with `--resource` it can grant only those resources.
`--json` prints {"url": ..., "code": ...} for scripts.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_CONFIG, EXIT_OK, add_config_arguments, fail, prepare, run_memory

SHOWN = """\
Add om-mcp to the app as a custom connector (remote MCP server) with this URL:

  {url}

When the app opens om-mcp's consent page, type this code there (it works once, within {minutes:g} minutes){only}:

  {code}
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resource",
        action="append",
        metavar="ID",
        help="the code may grant only this resource; repeat for more (default: any, chosen on the consent page)",
    )
    parser.add_argument("--public-url", metavar="URL", help="the server's public URL (default: server.public_url)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args, {"server.public_url": args.public_url}, must_exist=False)
    if config is None:
        return code
    server = config.server
    if server.public_url is None:
        return fail(
            "connect needs the URL clients reach the server at: --public-url https://host (as given to"
            " om-mcp serve --oauth), or server.public_url in the config",
            EXIT_CONFIG,
        )
    url = server.public_url + server.path

    async def main(memory: Any) -> int:
        secret = await memory.grants.consent_code(args.resource)
        if args.json:
            print(json.dumps({"url": url, "code": secret}))
        else:
            only = f" and grants only {', '.join(args.resource)}" if args.resource else ""
            minutes = server.oauth.consent_code_minutes
            print(SHOWN.format(url=url, code=secret, minutes=minutes, only=only), end="")
        return EXIT_OK

    return run_memory(config, main)
