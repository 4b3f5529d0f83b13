"""Free loopback ports that no other test on this machine is handed at the same time.

    port = free_port()      # bound by nobody now, and reserved for this process

Asking the kernel for port 0 gives a port that is free *now*; a server started with it binds a moment (or,
for a child process on a loaded machine, seconds) later, and in between the kernel may hand the same port to
another process asking for port 0: another worker of a parallel test run, or another checkout's suite. So
each port handed out is also reserved, by an exclusive lock on a file named after it in one directory of the
machine's temporary folder (`om-test-ports/`), held until this process exits; a port another process holds
is skipped. The lock goes with its process, so a killed run leaves no reservation behind.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no locks; the kernel's choice alone
    fcntl = None  # type: ignore[assignment]

ATTEMPTS = 50
_held: dict[int, int] = {}  # port -> the descriptor holding its lock


def _directory() -> Path:
    folder = Path(tempfile.gettempdir()) / "om-test-ports"
    folder.mkdir(mode=0o777, exist_ok=True)
    return folder


def _reserve(port: int) -> bool:
    if fcntl is None:
        return True
    try:
        descriptor = os.open(_directory() / str(port), os.O_CREAT | os.O_RDONLY, 0o666)
    except OSError:  # a folder this account cannot write: the kernel's choice alone
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return False
    _held[port] = descriptor
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now and held for no other caller of this function on this machine."""
    for _ in range(ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port not in _held and _reserve(port):
            return port
    raise RuntimeError(f"no free port on {host} after {ATTEMPTS} attempts (every one reserved elsewhere)")


def release(port: int) -> None:
    """Give a reservation back early (a server that stopped); ports are otherwise held until exit."""
    descriptor = _held.pop(port, None)
    if descriptor is not None:
        os.close(descriptor)
