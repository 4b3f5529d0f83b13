"""Which project a session belongs to, checked as git checks a worktree: a `.git` file is followed
into another repository only when that repository made it (its worktree's admin folder exists, names
this `.git` file back, and its `commondir` is the repository's `.git`).

Before: a folder holding a crafted `.git` file (`gitdir: ../../victim/.git/worktrees/x`) was the
victim's project, so SessionStart there showed the victim's sessions and the hook recorded into the
victim's memory. Worktrees are made by `git worktree add` (tests skip without git); crafted files
are written as an attacker would, then the real hook runs in them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from support.hooks import Box

from om_mcp.hosts.common import find_project
from om_mcp.testing.transcripts import ClaudeTranscript

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run([GIT or "git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def repository(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "commit", "-q", "--allow-empty", "-m", "start")
    return path


def worktree(main: Path, path: Path, name: str | None = None) -> Path:
    git(main, "worktree", "add", "-q", *(["-b", name] if name else []), str(path))
    return path


@needs_git
def test_a_worktree_git_made_shares_its_repositorys_memory(tmp_path: Path) -> None:
    main = repository(tmp_path / "main")
    tree = worktree(main, tmp_path / "feature")
    (tree / "src" / "deep").mkdir(parents=True)
    assert find_project(tree).root == main and find_project(tree / "src" / "deep").root == main
    assert find_project(tree).resource_id == find_project(main / "x").resource_id == str(main)


@needs_git
def test_relative_links_as_newer_git_writes_them_are_followed(tmp_path: Path) -> None:
    """git >= 2.48 with worktree.useRelativePaths writes both links relative; rewritten here by hand."""
    main = repository(tmp_path / "main")
    tree = worktree(main, tmp_path / "feature")
    admin = main / ".git" / "worktrees" / "feature"
    (tree / ".git").write_text("gitdir: ../main/.git/worktrees/feature\n")
    (admin / "gitdir").write_text("../../../../feature/.git\n")
    assert find_project(tree).root == main


@needs_git
def test_crafted_git_files_leave_the_folder_its_own_project(tmp_path: Path) -> None:
    victim = repository(tmp_path / "victim")
    real = worktree(victim, tmp_path / "victim-x", "x")  # a worktree the victim does have
    admin = victim / ".git" / "worktrees" / "victim-x"
    attacks: dict[str, Path] = {}

    def folder(name: str, gitfile: str | None = None) -> Path:
        path = tmp_path / "attacker" / name
        path.mkdir(parents=True)
        if gitfile is not None:
            (path / ".git").write_text(gitfile)
        attacks[name] = path
        return path

    # the case: a relative path into the victim's real worktree admin folder
    folder("relative", f"gitdir: {os.path.relpath(admin, tmp_path / 'attacker' / 'relative')}\n")
    folder("absolute", f"gitdir: {admin}\n")
    folder("missing", f"gitdir: {victim / '.git' / 'worktrees' / 'nobody'}\n")
    folder("no-prefix", f"{admin}\n")
    folder("empty", "")
    # a whole admin folder of its own, pointing back at itself, with commondir at the victim's .git
    own = folder("own-admin")
    fake = own / "fake-admin"
    fake.mkdir()
    (fake / "gitdir").write_text(f"{own / '.git'}\n")
    (fake / "commondir").write_text(f"{victim / '.git'}\n")
    (fake / "HEAD").write_text("ref: refs/heads/main\n")
    (own / ".git").write_text(f"gitdir: {fake}\n")
    # the victim's admin folder names its own worktree back, never this one
    linked = folder("symlinked")
    (linked / ".git").symlink_to(real / ".git")
    for name, path in attacks.items():
        (path / "src").mkdir(exist_ok=True)
        project = find_project(path / "src")
        assert project.root == path and project.resource_id == str(path), name
    assert find_project(real).root == victim  # the real worktree still belongs to the victim


def test_a_fifo_where_git_keeps_a_file_does_not_hang(tmp_path: Path) -> None:
    admin = tmp_path / "victim" / ".git" / "worktrees" / "x"
    admin.mkdir(parents=True)
    os.mkfifo(admin / "gitdir")
    folder = tmp_path / "attacker"
    folder.mkdir()
    (folder / ".git").write_text(f"gitdir: {admin}\n")
    found: list[Path] = []
    reader = threading.Thread(target=lambda: found.append(find_project(folder).root), daemon=True)
    reader.start()
    reader.join(60)
    assert found == [folder]


@needs_git
def test_a_submodule_is_its_own_project(tmp_path: Path) -> None:
    main = repository(tmp_path / "main")
    library = repository(tmp_path / "library")
    git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib")
    assert (main / "vendor" / "lib" / ".git").is_file()
    assert find_project(main / "vendor" / "lib").root == main / "vendor" / "lib"


@pytest.mark.slow
@needs_git
def test_the_hook_in_a_crafted_folder_neither_shows_nor_records_into_the_victims_memory(tmp_path: Path) -> None:
    box = Box(tmp_path)
    victim = repository(tmp_path / "victim")
    worktree(victim, tmp_path / "victim-x", "x")
    admin = victim / ".git" / "worktrees" / "victim-x"
    secret = ClaudeTranscript(tmp_path / "victim-session.jsonl", "victim-session", str(victim))
    secret.turn("Deploy the payroll service with key rotation", "done")
    assert box.hook(box.event("Stop", secret.path, "victim-session", cwd=str(victim)), "--no-worker").returncode == 0

    attacker = tmp_path / "downloads" / "crafted"
    attacker.mkdir(parents=True)
    (attacker / ".git").write_text(f"gitdir: {os.path.relpath(admin, attacker)}\n")
    start = box.hook(box.event("SessionStart", None, "attacker-start", cwd=str(attacker), source="startup"))
    shown = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"] if start.stdout else ""
    assert "payroll" not in shown and "victim-session" not in shown and str(victim) not in shown
    mine = ClaudeTranscript(tmp_path / "attacker-session.jsonl", "attacker-session", str(attacker))
    mine.turn("what do you remember?", "nothing yet")
    assert box.hook(box.event("Stop", mine.path, "attacker-session", cwd=str(attacker)), "--no-worker").returncode == 0
    resources = dict(box.query("SELECT id, resource_id FROM threads"))
    assert resources == {"victim-session": str(victim), "attacker-session": str(attacker)}

    # a worktree the victim made does share the victim's memory
    shared = box.hook(
        box.event("SessionStart", None, "victim-x-start", cwd=str(tmp_path / "victim-x"), source="startup"),
        "--no-worker",
    )
    assert "payroll" in json.loads(shared.stdout)["hookSpecificOutput"]["additionalContext"]
