"""Pieces every host integration shares: the kill switch for hooks, the project
a working directory belongs to, and the hook input's errors.

All pure functions: no database, no subprocess, no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic loads only when typed hook input is parsed (the hook itself stays lean)
    from pydantic import BaseModel

# Set to "off" in the environment of a nested model run (claude -p, gemini -p)
# so that our own hooks, if they fire there, exit at once and ingest nothing.
HOOKS_ENV = "OM_MCP_HOOKS"
_OFF = frozenset({"off", "0", "false", "no", "disabled"})

# Resource ids are limited to 200 characters by the tools.
MAX_RESOURCE_ID = 200


def hooks_disabled(env: Mapping[str, str] | None = None) -> bool:
    """True when OM_MCP_HOOKS says off/0/false/no: the hook command must exit 0 at once."""
    value = (os.environ if env is None else env).get(HOOKS_ENV, "")
    return value.strip().lower() in _OFF


@dataclass(frozen=True)
class HookPlan:
    """What `om-mcp hook <host>` does for one event."""

    ingest: bool = False  # read the transcript from the saved state and append the new messages
    final: bool = True  # the turn is over (Gemini CLI: also take the newest reply)
    print_context: bool = False  # print session_start_output(render_session_context(...))


# --------------------------------------------------------------------------------------
# The project a session belongs to
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """Where a session runs: its root folder and the resource id memory uses for it."""

    root: Path
    resource_id: str
    is_git: bool

    @property
    def name(self) -> str:
        return self.root.name or str(self.root)


def find_project(cwd: str | os.PathLike[str]) -> Project:
    """The project of `cwd`: the nearest folder upwards holding `.git`, else `cwd` itself.

    No subprocess: `.git` is looked up on disk. A linked worktree (a `.git`
    *file* pointing into `<repo>/.git/worktrees/<name>`) belongs to its main
    repository, so every worktree of a repo shares one memory, but only when the
    link is one git made (`linked_main_root`): a `.git` file anyone can write
    must not make a folder another project. A submodule (`.git/modules/...`), and
    a `.git` file that does not check out, leave the folder its own project.
    """
    start = Path(os.path.abspath(os.fspath(cwd)))
    for folder in (start, *start.parents):
        marker = folder / ".git"
        if marker.is_dir():
            return Project(folder, resource_id_for(folder), True)
        if marker.is_file():
            root = linked_main_root(marker) or folder
            return Project(root, resource_id_for(root), True)
    return Project(start, resource_id_for(start), False)


GITFILE_BYTES = 4096  # a `.git` file is one line; more is not git's


def linked_main_root(git_file: Path) -> Path | None:
    """The main repository's folder of the linked worktree whose `.git` file this is,
    or None when git would not take it for one. Git's own layout (`git worktree add`):
    the file says `gitdir: <repo>/.git/worktrees/<name>`; that folder exists, its
    `gitdir` file names this `.git` file back, and its `commondir` resolves to
    `<repo>/.git`, the folder the worktree's admin folder sits in. A crafted file
    (`gitdir: ../../victim/.git/worktrees/x`) fails the way back: the victim's
    worktree names its own `.git`, and only who can write the victim's `.git` could
    change that."""
    gitdir = _gitfile_target(git_file, "gitdir:")
    if gitdir is None or not gitdir.is_dir():
        return None
    here = Path(os.path.realpath(git_file.parent)) / ".git"  # the folder resolved; a `.git` symlink is not
    if _gitfile_target(gitdir / "gitdir", "") != here:
        return None
    common = _gitfile_target(gitdir / "commondir", "")
    if common is None or not (common / "HEAD").is_file() or common.name != ".git":
        return None  # no repository there, or a bare one (whose worktrees stay their own projects)
    if gitdir.parent != common / "worktrees":
        return None  # an admin folder the repository does not list among its worktrees
    return common.parent


def _gitfile_target(path: Path, prefix: str) -> Path | None:
    """The path a one-line git file names after `prefix`, relative to the file's folder."""
    try:  # never blocking: a FIFO where git keeps a file would hang the hook
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            first = os.read(fd, GITFILE_BYTES).decode("utf-8", errors="replace").splitlines()
        finally:
            os.close(fd)
    except OSError:
        return None
    if not first or not first[0].startswith(prefix) or not first[0][len(prefix) :].strip():
        return None
    return Path(os.path.realpath(path.parent / first[0][len(prefix) :].strip()))


def resource_id_for(root: Path) -> str:
    """The resource id of a project folder: its absolute path, shortened with a
    hash when it does not fit the 200-character limit."""
    text = str(root)
    if len(text) <= MAX_RESOURCE_ID:
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
    return f"{text[: MAX_RESOURCE_ID - len(digest) - 3]}...{digest}"


# --------------------------------------------------------------------------------------
# Hook input
# --------------------------------------------------------------------------------------


class HookInputError(ValueError):
    """The hook input is not usable; the message names the field."""


def parse_with(
    data: str | bytes | Mapping[str, Any], models: Mapping[str, type[BaseModel]], base: type[BaseModel]
) -> Any:
    """Shared by the hosts: decode JSON, pick the model by `hook_event_name`, validate."""
    from pydantic import ValidationError

    if isinstance(data, (str, bytes)):
        if not data.strip():
            raise HookInputError("hook input: stdin is empty (expected a JSON object)")
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise HookInputError(f"hook input: not JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise HookInputError(f"hook input: expected a JSON object, got {type(data).__name__}")
    model = models.get(str(data.get("hook_event_name", "")), base)
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "input"
        raise HookInputError(f"hook input: {where}: {first['msg']}") from None


def session_start_output(context: str) -> str:
    """SessionStart's stdout in Claude Code's shape (Gemini CLI, Codex and VS Code read the same), or ""
    when there is no context (print nothing then). Shape per the hooks reference, verified with 2.1.197."""
    if not context:
        return ""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}, ensure_ascii=False
    )
