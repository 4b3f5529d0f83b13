"""Database files for tests: a real om-mcp database, its bytes, and making a path read-only
in a way that binds even root (who ignores permission bits)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from om_mcp.config import Config
from om_mcp.engine import Memory


def make_database(path: Path, messages: int = 40, marker: str = "filler") -> Path:
    """A real om-mcp database with `messages` messages in thread 't', checkpointed into the one file."""

    async def fill() -> None:
        config = Config.model_validate({"db_path": str(path), "observational_memory": {"enabled": False}})
        async with await Memory.open(config) as memory:
            await memory.append_messages(
                "t",
                [
                    {"role": "user" if n % 2 == 0 else "assistant", "content": f"{marker} message {n} " + "words " * 40}
                    for n in range(messages)
                ],
            )

    anyio.run(fill)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_bytes(path: Path) -> bytes:
    """The database file and its -wal, as they are on disk."""
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@contextmanager
def read_only(*paths: Path) -> Iterator[str]:
    """Make files or folders unwritable for this process, root included; yields how.

    As root, permission bits do not bind, so the immutable attribute (chattr +i) is used;
    where it cannot be set (no CAP_LINUX_IMMUTABLE, a filesystem without it) the test is
    skipped rather than passed without the condition it is about."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield "chmod"
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a path read-only for root")
    done: list[Path] = []
    try:
        for p in paths:
            result = subprocess.run([chattr, "+i", str(p)], capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"running as root and chattr +i fails here: {result.stderr.strip()}")
            done.append(p)
        yield "chattr +i"
    finally:
        for p in done:
            subprocess.run([chattr, "-i", str(p)], check=True)
