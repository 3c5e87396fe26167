"""Secrets in the store: `check` finds them in live memories, in archive/ and in the copies
sagemem keeps; `purge-secrets` takes them out of the copies; a write may not add one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import InvalidMemory, MemoryStore, SagememError
from sagemem.store import guard
from sagemem.store.secrets import MARKER

from .test_secrets import PLANTED

GITHUB = "ghp_" + "Zx9" * 12
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
AWS = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzKEYQ"


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemem", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def secrets_found(store: MemoryStore) -> set[tuple[str, str, int | None]]:
    return {(f.check, f.file, f.line) for f in store.check().findings if f.check.startswith("secret")}


def test_check_finds_every_planted_secret_in_live_memories(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    for n, p in enumerate(PLANTED):
        (store.memory_dir / f"reference_planted_{n}.md").write_text(p.text)
    found = secrets_found(store)
    expected = {("secret", f"reference_planted_{n}.md", p.line) for n, p in enumerate(PLANTED)}
    missed = expected - found
    assert not missed, f"{len(expected) - len(missed)} of {len(expected)} found; missed {sorted(missed)}"


def test_archive_snapshots_and_conflict_records_are_scanned_and_purged(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    # By hand, as a person pastes (sagemem's own write would refuse it).
    (store.memory_dir / "project_old.md").write_text(
        f"---\ndescription: the old deploy\n---\n\nThe token was {GITHUB} back then.\n"
    )
    (store.memory_dir / "project_live.md").write_text(f"---\ndescription: live\n---\n\nkey: {STRIPE}\n")
    made = store.snapshot(label="with a secret in it")
    store.archive("project_old.md", reason="replaced")
    live = store.read("project_live.md")
    (store.memory_dir / "project_live.md").write_text("---\ndescription: live\n---\n\nno key here now\n")
    # A refused write of the agent's own file tool, kept with what it proposed.
    refused = guard.record_refusal(
        store.memory_dir / "project_live.md",
        live.version,
        f"---\ndescription: live\n---\n\n{AWS}\n".encode(),
        store.state_dir,
        "claude-code session s",
        "Write refused",
    )

    found = secrets_found(store)
    assert ("secret", "archive/project_old.md", 8) in found
    assert ("secret-copy", f"snapshot {made.id}: project_live.md", 5) in found
    assert ("secret-copy", f"snapshot {made.id}: project_old.md", 5) in found
    assert ("secret-copy", f"conflict {refused.conflict_id}, proposed", 5) in found
    assert not [f for f in found if f[1] == "project_live.md"]  # the live file is clean now
    messages = [f.message for f in store.check().findings if f.check == "secret-copy"]
    assert all("`sagemem purge-secrets` redacts it there" in m for m in messages)

    done = cli("--dir", str(store.memory_dir), "purge-secrets", "--json")
    assert done.returncode == 0, done.stderr
    changed = json.loads(done.stdout)["changed"]
    assert "archive/project_old.md: 1 redacted" in changed and len(changed) == 4
    assert secrets_found(store) == set()
    archived = (store.memory_dir / "archive" / "project_old.md").read_text()
    assert GITHUB not in archived and MARKER in archived and "back then" in archived
    assert not [f for f in store.check().findings if f.check == "archived-changed"]  # resealed
    assert AWS not in json.dumps(store.conflict(refused.conflict_id).to_dict())
    store.rollback(made.id)  # the snapshot still verifies, and brings no secret back
    assert STRIPE not in (store.memory_dir / "project_live.md").read_text()
    assert cli("--dir", str(store.memory_dir), "purge-secrets").stdout == "no secret found in the copies\n"


def test_a_copy_that_cannot_be_read_does_not_stop_the_purge(tmp_path: Path) -> None:
    """An archived copy that is a link (a clone may carry one) is named in the error; every
    other copy is redacted all the same. So is a refused `archive/` (a link itself)."""
    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_old.md").write_text(f"---\ndescription: old\n---\n\ntoken {GITHUB}\n")
    made = store.snapshot(label="with a secret in it")
    store.archive("project_old.md", reason="replaced")
    outside = tmp_path / "outside.md"
    outside.write_text(f"---\ndescription: elsewhere\n---\n\nkey {STRIPE}\n")
    (store.memory_dir / "archive" / "project_link.md").symlink_to(outside)

    with pytest.raises(
        SagememError, match=r"not redacted: archive/project_link\.md: .*link.*\(2 other copies redacted\)"
    ):
        store.purge_secrets()
    assert GITHUB not in (store.memory_dir / "archive" / "project_old.md").read_text()
    assert not [f for f in secrets_found(store) if f[1].startswith(f"snapshot {made.id}")]
    assert STRIPE in outside.read_text()  # never followed, never written

    (store.memory_dir / "archive" / "project_link.md").unlink()
    (store.memory_dir / "archive").rename(tmp_path / "moved")
    (store.memory_dir / "archive").symlink_to(tmp_path / "moved")
    store.snapshot(label="a second copy")
    (tmp_path / "moved" / "project_new.md").write_text(f"---\ndescription: n\n---\n\n{AWS}\n")
    done = cli("--dir", str(store.memory_dir), "purge-secrets")
    assert (
        done.returncode == 1 and "not redacted: " in done.stderr and "must be a real directory" in done.stderr
    )
    assert AWS in (tmp_path / "moved" / "project_new.md").read_text()  # a link is not followed


def test_a_write_may_not_add_a_secret(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    mem = str(store.memory_dir)
    content = f"---\ndescription: deploy notes\n---\n\nUse the token {GITHUB} for the registry.\n"
    done = cli("--dir", mem, "write", "project_deploy.md", stdin=content)
    assert done.returncode == 1
    assert "project_deploy.md: line 5 looks like a GitHub token" in done.stderr
    assert not (store.memory_dir / "project_deploy.md").exists() and store.conflicts() == []
    with pytest.raises(InvalidMemory, match="keep secrets out of memory"):
        store.create(type="project", name="x", description="x", body=f"password: {STRIPE}")
    memory = store.create(type="project", name="deploy", description="deploy notes", body="Use the registry.")
    with pytest.raises(InvalidMemory, match="looks like a"):
        store.update(memory.file, expected_version=memory.version, body=AWS)
    assert store.get(memory.file).version == memory.version


def test_an_old_file_that_already_holds_a_secret_can_still_be_edited(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    path = store.memory_dir / "project_legacy.md"
    path.write_text(f"---\ndescription: legacy\n---\n\ntoken {GITHUB}\n")
    read = store.read("project_legacy.md")
    moved = read.text.replace(f"token {GITHUB}\n", f"Intro line.\n\n  token {GITHUB}\n")
    written = store.write("project_legacy.md", moved, expected_version=read.version)
    assert written.version != read.version  # the same secret, moved: not a new one
    with pytest.raises(InvalidMemory, match="Stripe"):
        store.write("project_legacy.md", moved + f"\nstripe {STRIPE}\n", expected_version=written.version)
