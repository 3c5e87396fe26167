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

from sagemem import MemoryStore, SagememError
from sagemem.search import cache, session
from sagemem.store import guard

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
    # -P: `-m` alone would import a clone's own `sagemem/` from the working directory.
    return subprocess.run(
        [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "sagemem", *args],
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
    fields["file"] = "../../../outside.txt"
    fields["version"] = hashlib.sha256(secret.read_bytes()).hexdigest()
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
    created = run(["new", "--type", "project", "--name", "me", "--description", "who I am"], clone, "x")
    assert created.returncode == 1
    assert "is a symbolic link; sagemem does not follow links in its state directory" in created.stderr
    assert not (clone / ".sagemem" / "memory" / "project_me.md").exists()
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
    assert installed.returncode == 1 and f"{settings}: leads out of the project" in installed.stderr
    inside = clone / "fifo"  # a link that stays in the project, to a FIFO made there
    os.mkfifo(inside)
    (clone / settings).unlink()
    (clone / settings).symlink_to(inside)
    installed = run(["install", harness], clone)
    assert installed.returncode == 1 and f"{settings}: is not a regular file" in installed.stderr
    assert (clone / settings).is_symlink()  # nothing written in its place
    assert run(["doctor"], clone).returncode in (0, 1)  # answered, not hung


# -- found by trying to break the above ------------------------------------------------------


def forge_index(repo: Path, clone: Path, script: str) -> None:
    """A committed index at the name the clone's path gives it (guessable: CI paths are)."""
    db = state(repo) / "cache" / cache.db_name(clone / ".sagemem" / "memory")
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    conn.executescript(script)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "script",
    [
        # a trigger that fills the disk on the first insert
        cache.SCHEMA + "INSERT INTO meta VALUES('format', 5); CREATE TABLE junk(b BLOB);"
        "CREATE TRIGGER t AFTER INSERT ON files BEGIN INSERT INTO junk WITH RECURSIVE n(i) AS"
        " (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 50) SELECT zeroblob(1000000) FROM n; END;",
        # `files` as a view over an endless recursion
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID; INSERT INTO meta VALUES('format', 5);"
        "CREATE VIEW files(doc, name, stamp, version, baseline, entry, tokens, problem) AS"
        " WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c)"
        " SELECT x, 'f'||x||'.md', 's', 'v', 0, NULL, NULL, NULL FROM c;"
        "CREATE TABLE terms(term TEXT PRIMARY KEY, descriptions BLOB, paragraphs BLOB) WITHOUT ROWID;"
        "CREATE TABLE arrays(name TEXT PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;",
    ],
    ids=["trigger", "endless view"],
)
def test_a_forged_index_runs_none_of_its_sql(tmp_path: Path, script: str) -> None:
    repo = make_repo(tmp_path)
    forge_index(repo, tmp_path / "victim", script)
    clone = commit_and_clone(repo, tmp_path / "victim")
    assert "make deploy-prod" in prompt(clone)  # answered from an index built anew
    db = state(clone) / "cache" / cache.db_name(clone / ".sagemem" / "memory")
    conn = sqlite3.connect(db)
    names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "junk" not in names and "t" not in names
    assert db.stat().st_size < 1_000_000


def test_a_bare_repository_inside_the_memory_dir_runs_nothing_for_check(tmp_path: Path) -> None:
    """A clone can carry `HEAD`, `config` and `objects/` in `.sagemem/memory/`: git would take
    that folder for a repository, config and all (here: a gpg program for a signed commit)."""
    repo = make_repo(tmp_path)
    memory = repo / ".sagemem" / "memory"
    MemoryStore(memory).archive("project_deploy.md", reason="test")
    archived = memory / "archive" / "project_deploy.md"
    archived.write_text(archived.read_text().replace("make deploy-prod", "make deploy-prod NOW"))
    inner = tmp_path / "inner"
    inner.mkdir()
    git(inner, "init", "-q", "-b", "main")
    shutil.copytree(memory / "archive", inner / "archive")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "x")
    tree = git(inner, "rev-parse", "HEAD^{tree}").stdout.strip()
    signed = (
        f"tree {tree}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n x\n -----END PGP SIGNATURE-----\n\nsigned\n"
    )
    commit = subprocess.run(
        ["git", "-C", str(inner), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=signed,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    git(inner, "update-ref", "refs/heads/main", commit)
    shutil.copytree(inner / ".git" / "objects", memory / "objects")
    (memory / "HEAD").write_text("ref: refs/heads/main\n")
    (memory / "refs" / "heads").mkdir(parents=True)
    (memory / "refs" / "heads" / "main").write_text(commit + "\n")
    marker = tmp_path / "PWNED"
    (memory / "config").write_text(
        "[core]\n\tbare = true\n\trepositoryformatversion = 0\n[log]\n\tshowSignature = true\n"
        "[gpg]\n\tprogram = ./pwn.sh\n"
    )
    (memory / "pwn.sh").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (memory / "pwn.sh").chmod(0o755)
    clone = commit_and_clone(repo, tmp_path / "victim")
    checked = run(["check"], clone)
    assert "archived-changed:" in checked.stdout
    assert not marker.exists()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P is 3.11's")
def test_doctor_never_runs_a_projects_own_sagemem(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    marker = tmp_path / "PWNED"
    (repo / "sagemem").mkdir()
    (repo / "sagemem" / "__init__.py").write_text("")
    (repo / "sagemem" / "__main__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    command = f"{sys.executable} -m sagemem hook claude-code UserPromptSubmit"
    hooks = {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]}
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    server = {"command": sys.executable, "args": ["-m", "sagemem", "mcp"]}
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"sagemem": server}}))
    clone = commit_and_clone(repo, tmp_path / "victim")
    done = run(["doctor"], clone)
    assert done.returncode == 1 and not marker.exists()
    assert done.stdout.count("in a project that has its own") == 2


def test_snapshots_dated_in_the_future_cost_no_snapshot_of_ours(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    memory = repo / ".sagemem" / "memory"
    data = (memory / "project_deploy.md").read_bytes()
    for n in range(13):
        sid = f"99991231-235959-{n:06d}"
        folder = state(repo) / "snapshots" / sid
        (folder / "files").mkdir(parents=True)
        (folder / "files" / "project_deploy.md").write_bytes(data)
        entry = {"name": "project_deploy.md", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest = {"schema": 1, "id": sid, "kind": "manual" if n < 10 else "protection", "label": ""}
        manifest.update(created="9999-12-31T23:59:59+00:00", files=[entry])
        (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    clone = commit_and_clone(repo, tmp_path / "victim")
    store = MemoryStore(clone / ".sagemem" / "memory")
    made = store.snapshot(label="mine")
    assert made.path.is_dir() and [s.id for s in store.snapshots()] == [made.id]
    with pytest.raises(SagememError, match="no such snapshot"):
        store.rollback("99991231-235959-000000")


def test_a_damaged_conflict_record_hides_no_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (state(repo) / "conflicts").mkdir(parents=True)
    (state(repo) / "conflicts" / "0000000000000000.json").write_text("{}")
    clone = commit_and_clone(repo, tmp_path / "victim")
    store = MemoryStore(clone / ".sagemem" / "memory")
    memory = store.read("project_deploy.md")
    (store.memory_dir / memory.file).write_text(memory.text + "\nedited by hand\n")
    token = "ghp_" + "Zx9" * 12
    guard.record_refusal(
        store.memory_dir / memory.file,
        memory.version,
        f"{memory.text}\ntoken {token}\n".encode(),
        store.state_dir,
        "t",
        "r",
    )
    listed = run(["conflicts", "--json"], clone)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1
    findings = {(f.check, f.file) for f in store.check().findings}
    assert ("state-record", str(state(clone) / "conflicts" / "0000000000000000.json")) in findings
    assert any(check == "secret-copy" for check, _ in findings)
    assert run(["purge-secrets"], clone).returncode == 0
    assert token not in json.dumps(store.conflicts()[0].to_dict())


def test_a_manifest_name_cannot_make_check_read_outside(tmp_path: Path) -> None:
    outside = tmp_path / "credentials"
    outside.write_text("token ghp_" + "Zx9" * 12 + "\n")
    repo = make_repo(tmp_path)
    folder = state(repo) / "snapshots" / "20200101-000000-000000"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "keep.md").write_text("x")
    name = "../" * 12 + str(outside).lstrip("/")
    manifest = {"schema": 1, "id": folder.name, "kind": "manual", "label": "", "created": "2020-01-01"}
    manifest["files"] = [{"name": name, "bytes": 1, "sha256": "0" * 64}]
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    clone = commit_and_clone(repo, tmp_path / "victim")
    checked = run(["check"], clone)
    assert "secret" not in checked.stdout.replace("state-tracked", "")


@pytest.mark.parametrize(
    "body",
    ["a " + "`" * 3000, "[" * 200_000, "`a" * 50_000, "x [[" * 30_000],
    ids=["backticks", "brackets", "ticks and letters", "link openers"],
)
def test_check_reads_long_lines_of_markup_in_one_pass(tmp_path: Path, body: str) -> None:
    """Each took minutes in a regular expression. Run in a process with a limit, so a
    relapse fails instead of stalling the suite; nothing here is a speed measurement."""
    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_markup.md").write_text(f"---\ndescription: markup\n---\n\n{body}\n")
    done = run(["--dir", str(store.memory_dir), "check"], tmp_path)
    assert done.returncode in (0, 1) and "1 memory" in done.stdout


def test_a_task_checkpoint_of_blank_lines_is_read_in_one_pass(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    store.create(type="project", name="deploy", description="How we deploy to production", body="make it")
    folder = store.state_dir / "tasks" / "main"
    folder.mkdir(parents=True)
    (folder / "WORKING.md").write_text("\n" * 400_000 + "- [x] shipped\n")
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), "inject", "-q", QUESTION],
        capture_output=True,
        text=True,
        env={**os.environ, "SAGEMEM_TASK_ID": "main"},
        timeout=TIMEOUT,
    )
    assert "Task checkpoint: main" in done.stdout and '"shipped"' in done.stdout


def test_a_link_for_the_adopted_state_folder_is_never_followed(tmp_path: Path) -> None:
    """`~/.sagemem/adopted` holds sagemem's state for Claude Code's own folder; made a link,
    it is refused like a linked state dir: nothing lands where it points, and `check` says so."""
    from sagemem import MemorySet
    from sagemem.store.native import claude_memory_dir

    home = Path(os.environ["HOME"])
    root = tmp_path / "proj"
    project = MemoryStore(root / ".sagemem" / "memory")
    project.init()
    project.create(type="project", name="deploy", description="How we deploy to production", body="make it")
    claude = claude_memory_dir(root, home, os.environ)
    claude.mkdir(parents=True)
    (claude / "user_cat.md").write_text("---\ndescription: the user's cat\ntype: user\n---\n\nSesame.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link(home / ".sagemem" / "adopted", elsewhere)
    memories = MemorySet.locate(cwd=root)
    injection = memories.inject("what is my cat called?", session="s1")
    assert "Sesame" in injection.text  # read all the same: only its state is refused
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(SagememError, match="symbolic link"):
        memories.create(into="claude", type="user", name="dog", description="the user's dog", body="Rex.")
    assert list(elsewhere.iterdir()) == []
    checked = run(["check"], root)
    assert f"state-link: claude:{home / '.sagemem' / 'adopted'}: is a symbolic link" in checked.stdout
    assert list(elsewhere.iterdir()) == []
