"""After `om-mcp setup` wrote a host's files: does what it wrote work?

1. The server: started with the exact command and arguments written, over
   stdio like the host starts it; it must answer `tools/list` (a real MCP
   client, the SDK's).
2. The hook: the exact hook command line written, run through the shell on the
   host's own SessionStart payload for a throwaway folder; it must exit 0 and
   print what the host reads (JSON in the host's shape).
Each result is one line; nothing here calls a model.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any

SERVER_TIMEOUT = 60.0
HOOK_TIMEOUT = 60.0


def check_server(command: str, args: list[str], env: dict[str, str] | None = None) -> tuple[bool, str]:
    import anyio

    from om_mcp.server.handshake import tools_over_stdio

    quiet = {**(env or os.environ), "OM_LOG_LEVEL": "warning"}  # its start-up lines are not ours to show
    try:
        count = anyio.run(tools_over_stdio, command, args, quiet, SERVER_TIMEOUT)
    except Exception as error:  # noqa: BLE001 - reported in one line
        cause: BaseException = error
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        return False, f"the server did not answer tools/list: {type(cause).__name__}: {cause}".strip()
    return True, f"the server starts and lists {count} tools"


def check_hook(line: str, event: dict[str, Any], env: dict[str, str] | None = None) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="om-mcp-setup-") as folder:
        payload = json.loads(json.dumps(event).replace("@CWD@", folder))
        environment = {k: v for k, v in (env or os.environ).items() if k != "OM_MCP_HOOKS"}
        try:
            done = subprocess.run(
                ["/bin/sh" if os.path.exists("/bin/sh") else "sh", "-c", line.removesuffix(" || true")],
                input=json.dumps(payload).encode(),
                capture_output=True,
                cwd=folder,
                env=environment,
                timeout=HOOK_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return False, f"the hook command did not run: {error}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        return False, f"the hook command exited {done.returncode}: {said[-1] if said else 'no output'}"
    out = done.stdout.decode(errors="replace").strip()
    try:
        json.loads(out) if out else None
    except ValueError:
        return False, f"the hook command printed something that is not JSON: {out[:80]!r}"
    return True, "the hook command runs on a sample SessionStart and exits 0"
