"""The access ledger, archive and restore, locks and archive candidates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sagemem import InvalidName, MemoryNotFound, MemoryStore, SagememError
from sagemem.store import archive as archive_module
from sagemem.store.archive import TRACE_KEYS, ArchiveRefused, MemoryLocked
from sagemem.store.errors import SagememWarning
from sagemem.store.frontmatter import split

from .conftest import write_file

CRLF_MEMORY = (
    "---\r\n# a comment\r\nname: Old plan\r\ndescription: the old release plan\r\ntype: project\r\n"
    "updated: 2025-01-02\r\n---\r\n\r\nShip on Fridays.\r\n"
)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".sagemem" not in p.parts
    }


# -- ledger ---------------------------------------------------------------------------------------


def test_three_kinds_of_use_are_kept_apart(store: MemoryStore) -> None:
    m = store.create(type="project", name="deploy", description="how we deploy to production")
    before = (store.memory_dir / m.file).stat().st_mtime_ns, (store.memory_dir / m.file).read_bytes()
    store.inject("how do we deploy to production")
    store.record_use("read", [m.file])
    store.cite([m.file], receipt="turn-1")
    store.cite([m.file], receipt="turn-1")  # the same receipt counts once
    store.cite([m.file], receipt="turn-2")
    record = store.ledger()[m.file]
    assert (record.injected.count, record.read.count, record.cited.count) == (1, 1, 2)
    assert record.last_used == max(record.injected.last, record.read.last, record.cited.last)
    assert (
        (store.memory_dir / m.file).stat().st_mtime_ns,
        (store.memory_dir / m.file).read_bytes(),
    ) == before
    assert (store.state_dir / "access.json").is_file()


def test_names_that_no_longer_exist_are_pruned(store: MemoryStore) -> None:
    a = store.create(type="project", name="a", description="alpha")
    b = store.create(type="project", name="b", description="beta")
    c = store.create(type="project", name="c", description="gamma")
    store.record_use("read", [a.file, b.file, c.file])
    store.archive(c.file)
    (store.memory_dir / b.file).unlink()
    store.record_use("read", [a.file])
    assert set(store.ledger()) == {a.file, c.file}  # archived names keep their history


def test_a_ledger_that_cannot_be_written_does_not_break_injection(store: MemoryStore, tmp_path: Path) -> None:
    store.create(type="project", name="deploy", description="how we deploy to production")
    (store.state_dir / "access.lock").mkdir()  # no lock, no write (a folder at access.json is set aside)
    (store.state_dir / "access.log").mkdir()  # no log to append to: the lock is needed
    injection = store.inject("how do we deploy to production")
    assert injection.text and "access_error" in injection.diagnostics
    store.inject("how do we deploy to production")
    log = (store.state_dir / "sagemem.log").read_text().splitlines()
    assert len(log) == 1 and "access ledger not written" in log[0]  # logged once


def test_concurrent_ledger_writers_lose_no_event(store: MemoryStore) -> None:
    files = [store.create(type="project", name=f"m{i}", description=f"memory {i}").file for i in range(4)]
    code = (
        "import sys; from sagemem import MemoryStore; s = MemoryStore(sys.argv[1]); w = sys.argv[2]\n"
        "for i in range(25):\n"
        "    s.record_use('read', [sys.argv[3 + i % 4]])\n"
        "    s.cite([sys.argv[3 + i % 4]], receipt=f'{w}-{i}')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(store.memory_dir), str(w), *files])
        for w in range(6)
    ]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    ledger = store.ledger()
    assert sum(r.read.count for r in ledger.values()) == 6 * 25
    assert sum(r.cited.count for r in ledger.values()) == 6 * 25


# -- archive and restore --------------------------------------------------------------------------


def test_archive_and_restore_round_trip(store: MemoryStore) -> None:
    write_file(store, "project_old_plan.md", CRLF_MEMORY)
    store.rebuild_index()
    reason = "superseded: see the new plan #2\nand more"
    archived = store.archive("project_old_plan.md", reason=reason)
    assert not (store.memory_dir / "project_old_plan.md").exists()
    data = (store.memory_dir / "archive" / "project_old_plan.md").read_bytes()
    text = data.decode()
    assert "\n" not in text.replace("\r\n", "")  # CRLF kept
    meta = yaml.safe_load(split(text, "x").matter)
    assert meta["archived_reason"] == "superseded: see the new plan #2 and more"  # folded, quoted safely
    assert meta["archived_at"] == archived.extra["archived_at"]
    trace = [line + "\r\n" for line in text.split("\r\n") if line.startswith(TRACE_KEYS)]
    assert len(trace) == 3 and trace[-1].startswith("archived_sha256: ")
    untraced = text
    for line in trace:
        untraced = untraced.replace(line, "")
    assert untraced == CRLF_MEMORY  # every other byte as it was
    assert archive_module.changed_since_archived(data) is None
    assert "project_old_plan.md" not in (store.memory_dir / "MEMORY.md").read_text()
    assert store.search("old release plan").hits == ()  # archived memories are never retrieved
    assert [m.file for m in store.archived()] == ["project_old_plan.md"]

    store.restore("project_old_plan.md")
    assert (store.memory_dir / "project_old_plan.md").read_bytes() == CRLF_MEMORY.encode()
    assert not (store.memory_dir / "archive" / "project_old_plan.md").exists()
    assert (store.memory_dir / "MEMORY.md").read_text().count("(project_old_plan.md)") == 1
    assert store.search("old release plan").hits[0].file == "project_old_plan.md"


def test_archive_adds_frontmatter_to_a_plain_file(store: MemoryStore) -> None:
    write_file(store, "notes.md", "just text\n")
    store.archive("notes.md")
    text = (store.memory_dir / "archive" / "notes.md").read_text()
    assert text.startswith("---\narchived_at: ") and text.endswith("---\njust text\n")
    store.restore("notes.md")
    assert (store.memory_dir / "notes.md").read_text() == "just text\n"


def test_refusals_change_nothing(store: MemoryStore) -> None:
    store.create(type="project", name="a", description="alpha")
    store.create(type="project", name="b", description="beta")
    store.archive("project_b.md")
    write_file(store, "project_b.md", "---\ndescription: a new b\n---\n")
    store.lock("project_a.md")
    before = snapshot(store.memory_dir)
    for call, error, message in [
        (lambda: store.archive("project_a.md"), MemoryLocked, "is locked"),
        (lambda: store.archive("MEMORY.md"), InvalidName, "reserved"),
        (lambda: store.archive("nope.md"), MemoryNotFound, "no such memory"),
        (lambda: store.archive("../x.md"), InvalidName, "single path segment"),
        (lambda: store.archive("project_b.md"), ArchiveRefused, "exists in archive/"),
        (lambda: store.restore("project_b.md"), ArchiveRefused, "a live memory of that name exists"),
        (lambda: store.restore("project_a.md"), ArchiveRefused, "is not archived"),
    ]:
        with pytest.raises(error, match=message):
            call()
    assert snapshot(store.memory_dir) == before


def test_archive_refuses_a_linked_archive_folder(store: MemoryStore, tmp_path: Path) -> None:
    store.create(type="project", name="a", description="alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.memory_dir / "archive").symlink_to(elsewhere)
    with pytest.raises(ArchiveRefused, match="real directory"):
        store.archive("project_a.md")
    assert (store.memory_dir / "project_a.md").exists() and list(elsewhere.iterdir()) == []


def test_lock_lives_in_the_state_dir_and_survives_edits(store: MemoryStore) -> None:
    m = store.create(type="project", name="a", description="alpha")
    assert store.lock("PROJECT_A.md") is True and store.lock(m.file) is False
    store.update(m.file, expected_version=m.version, description="alpha, edited")
    assert "lock" not in (store.memory_dir / m.file).read_text()
    assert json.loads((store.state_dir / "locked.json").read_text()) == {"project_a.md": True}
    with pytest.raises(MemoryLocked):
        store.archive(m.file)
    assert store.unlock(m.file) is True
    store.archive(m.file)


# -- candidates -----------------------------------------------------------------------------------


def test_candidates_by_type_threshold(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    days = 86400

    def make(name: str, type_: str, age_days: int, **extra: object) -> str:
        fields = "".join(f"{k}: {v}\n" for k, v in extra.items())
        write_file(store, name, f"---\ndescription: {name}\ntype: {type_}\n{fields}---\nbody\n")
        os.utime(store.memory_dir / name, (now - age_days * days, now - age_days * days))
        return name

    make("project_old.md", "project", 100)
    make("project_exact.md", "project", 90)
    make("project_young.md", "project", 89)
    make("reference_mid.md", "reference", 100)
    make("user_mid.md", "user", 200)
    make("feedback_ancient.md", "feedback", 2000)
    make("project_baseline.md", "project", 500, baseline="true")
    make("project_locked.md", "project", 500)
    make("project_used.md", "project", 500)
    make("project_dated.md", "project", 1, updated="2020-01-01")
    store.lock("project_locked.md")
    store.record_use("read", ["project_used.md"])
    found = store.candidates(now=now)
    assert [c.file for c in found] == ["project_dated.md", "project_old.md", "project_exact.md"]
    assert found[0].basis == "updated:" and found[1].basis == "file mtime"
    assert found[2].reason == "idle 90 days since file mtime (threshold 90 for project)"
    monkeypatch.setenv("SAGEMEM_ARCHIVE_REFERENCE_DAYS", "50")
    assert "reference_mid.md" in [c.file for c in store.candidates(now=now)]


def test_a_receipt_names_one_citation(store: MemoryStore) -> None:
    a = store.create(type="project", name="a", description="alpha").file
    b = store.create(type="project", name="b", description="beta").file
    assert store.cite([a], receipt="r1") == [a]
    assert store.cite([a], receipt="r1") == []  # replay: counted once
    with pytest.raises(SagememError, match="already used for project_a.md"):
        store.cite([b], receipt="r1")
    assert store.ledger()[a].cited.count == 1 and b not in store.ledger()


def test_damaged_lock_and_ledger_files(store: MemoryStore) -> None:
    m = store.create(type="project", name="a", description="alpha")
    (store.state_dir / "locked.json").write_text("{damaged")
    with pytest.raises(SagememError, match="locked.json"):
        store.archive(m.file)
    assert (store.memory_dir / m.file).exists()
    (store.state_dir / "access.json").write_text("[not a ledger")
    store.record_use("read", [m.file])
    [aside] = store.state_dir.glob("access.json.damaged-*")
    assert aside.read_text() == "[not a ledger"
    assert store.ledger()[m.file].read.count == 1


def test_an_archived_memory_near_the_size_cap_can_be_listed_and_restored(store: MemoryStore) -> None:
    body = "x" * (512 * 1024 - 80)
    write_file(store, "project_big.md", f"---\ndescription: big\n---\n{body}\n")
    assert (store.memory_dir / "project_big.md").stat().st_size <= 512 * 1024
    store.archive("project_big.md", reason="a long reason to push it over the cap")
    assert (store.memory_dir / "archive" / "project_big.md").stat().st_size > 512 * 1024
    assert [m.file for m in store.archived()] == ["project_big.md"]
    store.restore("project_big.md")
    assert (store.memory_dir / "project_big.md").read_text().endswith(body + "\n")


def test_archive_succeeds_when_the_index_cannot_follow(store: MemoryStore) -> None:
    m = store.create(type="project", name="a", description="alpha")
    (store.memory_dir / "MEMORY.md").write_bytes(b"# \xff\n")
    with pytest.warns(SagememWarning, match="was moved, but MEMORY.md could not be updated"):
        store.archive(m.file)
    assert (store.memory_dir / "archive" / m.file).exists()


def test_care_commands(store: MemoryStore) -> None:
    from click.testing import CliRunner

    from sagemem.cli import cli

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), *args])
        return result.exit_code, result.stdout + result.stderr

    a = store.create(type="project", name="a", description="alpha", tags=["x"]).file
    b = store.create(type="project", name="b", description="beta").file
    assert run("read", a)[0] == 0 and store.ledger()[a].read.count == 1  # a read is counted
    assert run("cite", a, "--receipt", "t1") == (0, "cited 1\n")
    assert json.loads(run("ledger", a, "--json")[1])[0]["cited"]["count"] == 1
    assert json.loads(run("ledger", b, "--json")[1])[0]["read"]["count"] == 0  # never used
    assert run("lock", a) == (0, f"locked {a}\n")
    code, out = run("archive", a)
    assert code == 1 and "is locked" in out
    assert run("unlock", a) == (0, f"unlocked {a}\n")
    assert run("archive", a, "--reason", "done") == (0, f"archived {a}\n")
    code, out = run("list", "--archived", "--tag", "x")
    assert code == 0 and out.startswith(a) and out.rstrip().endswith("done")
    assert run("list", "--archived", "--tag", "nope")[1] == ""
    assert json.loads(run("ledger", a, "--json")[1])[0]["file"] == a  # archived names keep history
    assert run("restore", a) == (0, f"restored {a}\n")


def test_candidates_apply_reports_each_and_goes_on(store: MemoryStore) -> None:
    from click.testing import CliRunner

    from sagemem.cli import cli

    old = time.time() - 400 * 86400
    for name in ("project_a.md", "project_b.md", "project_c.md"):
        write_file(store, name, f"---\ndescription: {name}\ntype: project\n---\nbody\n")
        os.utime(store.memory_dir / name, (old, old))
    (store.memory_dir / "archive").mkdir()
    (store.memory_dir / "archive" / "project_b.md").write_text("an older archived b\n")
    result = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "candidates", "--apply", "--json"])
    assert result.exit_code == 1
    outcome = {row["file"]: row["archived"] for row in json.loads(result.stdout)}
    assert outcome == {"project_a.md": True, "project_b.md": False, "project_c.md": True}
    assert (store.memory_dir / "project_b.md").exists()
    assert (store.memory_dir / "archive" / "project_b.md").read_text() == "an older archived b\n"
