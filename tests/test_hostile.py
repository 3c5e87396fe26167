"""A cloned repository is untrusted input: hostile clones built with real `git`.

Project memory is committed, and a state directory can be committed too (`git add -f`), so
whatever sits under `.sagemem/memory/.sagemem/` may be a stranger's: links to devices or to
files elsewhere, FIFOs, a forged search index. Every process here runs with a timeout, so a
hang fails the test instead of stopping the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import MemoryStore, cache, session

from .test_git import git

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX links and FIFOs")
TIMEOUT = 60
QUESTION = "how do we deploy to production?"


@pytest.fixture(autouse=True)
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    return temp


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "stranger"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    store = MemoryStore(repo / ".sagemem" / "memory")
    store.init(git=True)
    store.create(
        type="project",
        name="deploy",
        description="How we deploy to production",
        body="Run make deploy-prod from the release tag.",
    )
    return repo


def commit_and_clone(repo: Path, where: Path) -> Path:
    git(repo, "add", "-A")
    if (repo / ".sagemem" / "memory" / ".sagemem").exists() and not (
        repo / ".sagemem" / "memory"
    ).is_symlink():
        git(repo, "add", "-f", ".sagemem/memory/.sagemem")  # what a careless or hostile committer does
    git(repo, "commit", "-qm", "memory")
    git(where.parent, "clone", "-q", str(repo), where.name)
    return where


def run(args: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemem", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
    )


def prompt(clone: Path, text: str = QUESTION, sid: str = "s1") -> str:
    event = {"session_id": sid, "cwd": str(clone), "hook_event_name": "UserPromptSubmit", "prompt": text}
    done = run(["hook", "claude-code", "UserPromptSubmit"], clone, json.dumps(event))
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout else ""


def state(root: Path) -> Path:
    return root / ".sagemem" / "memory" / ".sagemem"


def link(path: Path, target: Path | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_dir():
        path.unlink()
    os.symlink(target, path)


STATE_FILES = ["settings.json", "access.json", "locked.json", "sagemem.log", "hook.log"]


def session_file(root: Path, sid: str = "s1") -> Path:
    return session.path_for(state(root), sid)


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
def test_state_files_that_never_end_make_nothing_hang(tmp_path: Path, kind: str) -> None:
    repo = make_repo(tmp_path)
    targets = [state(repo) / name for name in STATE_FILES] + [session_file(repo)]
    if kind == "link to /dev/zero":
        for path in targets:
            link(path, "/dev/zero")
    clone = commit_and_clone(repo, tmp_path / "victim")
    if kind == "fifo":  # git cannot carry a FIFO; anything else on the machine can leave one
        for path in [state(clone) / name for name in STATE_FILES] + [session_file(clone)]:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkfifo(path)
        index = state(clone) / "cache" / cache.db_name(clone / ".sagemem" / "memory")
        index.parent.mkdir(parents=True)
        os.mkfifo(index)
        os.mkfifo(index.with_name(index.name + "-wal"))

    assert "make deploy-prod" in prompt(clone)  # answered, and the memory is there
    assert "make deploy-prod" in run(["search", "deploy production"], clone).stdout
    assert run(["list"], clone).returncode == 0
    checked = run(["check"], clone)
    assert checked.returncode == 1  # the state dir is committed, or holds FIFOs: said, not hung
    assert "make deploy-prod" in prompt(clone, sid="s2")  # a second session, after all that


def test_an_index_entry_that_names_a_file_outside_is_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("PRIVATE line one\nPRIVATE line two\n")
    repo = make_repo(tmp_path)
    clone = commit_and_clone(repo, tmp_path / "victim")
    memory_dir = clone / ".sagemem" / "memory"
    assert "make deploy-prod" in prompt(clone)  # builds the index, as the forger's copy was built
    # The forger's index: the entry points outside, with the right version of what it points at,
    # and a stamp that matches the file (the index is then believed without reading the file).
    db = state(clone) / "cache" / cache.db_name(memory_dir)
    conn = sqlite3.connect(db)
    (raw,) = conn.execute("SELECT entry FROM files WHERE name = 'project_deploy.md'").fetchone()
    fields = json.loads(raw)
    fields[0] = "../../../outside.txt"
    fields[1] = hashlib.sha256(secret.read_bytes()).hexdigest()
    conn.execute("UPDATE files SET entry = ? WHERE name = 'project_deploy.md'", (json.dumps(fields),))
    conn.commit()
    conn.close()

    text = prompt(clone, sid="s2")
    assert "PRIVATE" not in text and "outside.txt" not in text
    assert "make deploy-prod" in text  # the index was found damaged and built again
    found = run(["search", "deploy production", "--json"], clone)
    assert "PRIVATE" not in found.stdout and json.loads(found.stdout)[0]["file"] == "project_deploy.md"


def test_no_write_goes_through_a_link_in_the_state_dir(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = make_repo(tmp_path)
    for name in ["sessions", "cache", "conflicts", "snapshots", "tasks"]:
        (outside / name).mkdir()
        link(state(repo) / name, outside / name)
    link(state(repo) / "hook.log", outside / "hook.log")
    link(state(repo) / "sagemem.log", outside / "sagemem.log")
    link(state(repo) / "access.json", outside / "access.json")
    link(state(repo) / "access.lock", outside / "access.lock")
    link(state(repo) / "locks" / "project_deploy.md.lock", outside / "deploy.lock")
    clone = commit_and_clone(repo, tmp_path / "victim")

    assert "make deploy-prod" in prompt(clone)  # session ledger, access ledger, index: elsewhere
    assert run(["hook", "claude-code", "UserPromptSubmit"], clone, "not json").stdout == ""  # logs
    memory = MemoryStore(clone / ".sagemem" / "memory")
    version = memory.read("project_deploy.md").version
    refused = run(["update", "project_deploy.md", "--expected-version", version, "--tag", "x"], clone)
    assert refused.returncode == 1 and "project_deploy.md.lock: is a symbolic link" in refused.stderr
    assert memory.read("project_deploy.md").version == version
    assert run(["snapshot", "create"], clone).returncode == 1
    assert run(["search", "deploy"], clone).returncode == 0

    written = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    assert written == ["cache", "conflicts", "sessions", "snapshots", "tasks"]  # all still empty
    checked = run(["check"], clone)
    assert "state-tracked:" in checked.stdout
    assert checked.stdout.count("state-link:") == 0  # the state dir itself is a folder here


def test_a_state_dir_that_is_a_link_is_never_used(tmp_path: Path) -> None:
    outside = tmp_path / "outside-state"
    outside.mkdir()
    repo = make_repo(tmp_path)
    shutil.rmtree(state(repo))
    link(state(repo), outside)
    clone = commit_and_clone(repo, tmp_path / "victim")

    assert "make deploy-prod" in prompt(clone)  # the session's ledger goes to the temp dir instead
    created = run(["new", "--type", "user", "--name", "me", "--description", "who I am"], clone, "x")
    assert created.returncode == 1
    assert "is a symbolic link; sagemem does not follow links in its state directory" in created.stderr
    assert not (clone / ".sagemem" / "memory" / "user_me.md").exists()
    assert list(outside.iterdir()) == []
    checked = run(["check"], clone)
    assert "state-link:" in checked.stdout and checked.returncode == 1


def test_check_warns_when_the_state_dir_is_tracked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    MemoryStore(repo / ".sagemem" / "memory").snapshot(label="mine")
    clone = commit_and_clone(repo, tmp_path / "victim")
    checked = run(["check", "--json"], clone)
    found = [f for f in json.loads(checked.stdout)["findings"] if f["check"] == "state-tracked"]
    assert checked.returncode == 1 and len(found) == 1
    assert "git rm -r --cached" in found[0]["message"]
    (tmp_path / "clean").mkdir()
    untracked = make_repo(tmp_path / "clean")
    git(untracked, "add", "-A")
    git(untracked, "commit", "-qm", "memory, its state left out by .gitignore")
    assert "state-tracked" not in run(["check"], untracked).stdout


def test_a_hostile_conflict_record_cannot_write_outside(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    record = {
        "id": "0123456789abcdef",
        "file": "../../../escaped.md",
        "expected_version": None,
        "disk_version": None,
        "disk": None,
        "proposed": "---\ndescription: x\n---\nowned\n",
    }
    folder = state(repo) / "conflicts"
    folder.mkdir(parents=True)
    (folder / "0123456789abcdef.json").write_text(json.dumps(record))
    clone = commit_and_clone(repo, tmp_path / "victim")
    done = run(["conflicts", "resolve", "0123456789abcdef", "--keep", "proposed"], clone)
    assert done.returncode == 1 and "conflict record is damaged" in done.stderr
    assert not list(tmp_path.rglob("escaped.md"))


def test_a_project_memory_reached_through_a_link_is_not_used(tmp_path: Path) -> None:
    elsewhere = tmp_path / "someone-elses-notes"
    MemoryStore(elsewhere).init()
    MemoryStore(elsewhere).create(type="project", name="deploy", description="How we deploy to production")
    repo = tmp_path / "stranger"
    (repo / ".sagemem").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    link(repo / ".sagemem" / "memory", elsewhere)
    clone = commit_and_clone(repo, tmp_path / "victim")
    assert (clone / ".sagemem" / "memory").is_symlink()

    where = run(["path"], clone).stdout
    assert "user memory" in where and "was skipped: it is reached through a symbolic link" in where
    assert prompt(clone) == ""  # no user memory here, and the linked folder is not read
    assert not (elsewhere / ".sagemem" / "sessions").exists()
    chosen = run(["--dir", str(clone / ".sagemem" / "memory"), "search", "deploy production"], clone)
    assert "project_deploy.md" in chosen.stdout  # named on purpose, it is used


@pytest.mark.parametrize("settings", [".claude/settings.json", ".gemini/settings.json", ".codex/hooks.json"])
def test_a_harness_settings_file_that_never_ends_is_refused_by_install_and_doctor(
    tmp_path: Path, settings: str
) -> None:
    repo = make_repo(tmp_path)
    link(repo / settings, "/dev/zero")
    clone = commit_and_clone(repo, tmp_path / "victim")
    harness = {".claude": "claude-code", ".gemini": "gemini", ".codex": "codex"}[settings.split("/")[0]]
    installed = run(["install", harness], clone)
    assert installed.returncode == 1 and f"{settings}: is not a regular file" in installed.stderr
    assert (clone / settings).is_symlink()  # nothing written in its place
    assert run(["doctor"], clone).returncode in (0, 1)  # answered, not hung
