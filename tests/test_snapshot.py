from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagemem import MemoryStore
from sagemem.care.snapshot import SnapshotInvalid
from sagemem.cli import cli

from .conftest import write_file


def live(store: MemoryStore) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.memory_dir.glob("*.md")}


@pytest.fixture
def filled(store: MemoryStore) -> MemoryStore:
    store.create(type="project", name="a", description="alpha", body="first body")
    store.create(type="user", name="b", description="beta")
    return store


def test_snapshot_copies_every_memory_and_the_index(filled: MemoryStore) -> None:
    made = filled.snapshot(label="before a big edit")
    stored = {p.name: p.read_bytes() for p in (made.path / "files").iterdir()}
    assert stored == live(filled)
    manifest = json.loads((made.path / "MANIFEST.json").read_text())
    assert manifest["label"] == "before a big edit" and {f["name"] for f in manifest["files"]} == set(stored)
    assert [s.id for s in filled.snapshots()] == [made.id]


def test_rollback_puts_files_back_and_protects_the_present(filled: MemoryStore) -> None:
    made = filled.snapshot()
    before = live(filled)
    write_file(filled, "project_a.md", "---\ndescription: edited by mistake\n---\n")
    (filled.memory_dir / "user_b.md").unlink()
    write_file(filled, "project_new.md", "---\ndescription: made later\n---\n")
    present = live(filled)
    outcome = filled.rollback(made.id)
    assert sorted(outcome["restored"]) == ["project_a.md", "user_b.md"]
    assert {k: v for k, v in live(filled).items() if k != "project_new.md"} == before
    assert (filled.memory_dir / "project_new.md").exists()  # scope files leaves it
    protection = next(s for s in filled.snapshots() if s.id == outcome["protection"])
    assert protection.kind == "protection"
    assert {p.name: p.read_bytes() for p in (protection.path / "files").iterdir()} == present
    history = json.loads((filled.state_dir / "snapshots" / "rollbacks.json").read_text())
    assert history[-1]["snapshot"] == made.id


def test_scope_all_archives_what_the_snapshot_did_not_have_and_never_deletes(filled: MemoryStore) -> None:
    made = filled.snapshot()
    write_file(filled, "project_new.md", "---\ndescription: made later\n---\n")
    write_file(filled, "project_kept.md", "---\ndescription: locked one\n---\n")
    filled.lock("project_kept.md")
    outcome = filled.rollback(made.id, scope="all")
    assert outcome["retired"] == ["project_new.md"] and outcome["kept"] == ["project_kept.md"]
    assert (filled.memory_dir / "archive" / "project_new.md").exists()
    assert (filled.memory_dir / "project_kept.md").exists()  # a locked memory survives


@pytest.mark.parametrize("damage", ["tamper", "missing", "extra", "manifest", "traversal"])
def test_a_damaged_snapshot_is_refused_and_nothing_changes(filled: MemoryStore, damage: str) -> None:
    made = filled.snapshot()
    files = made.path / "files"
    if damage == "tamper":
        (files / "project_a.md").write_text("---\ndescription: forged\n---\n")
    elif damage == "missing":
        (files / "user_b.md").unlink()
    elif damage == "extra":
        (files / "project_extra.md").write_text("x")
    elif damage == "manifest":
        (made.path / "MANIFEST.json").write_text("{not json")
    else:
        manifest = json.loads((made.path / "MANIFEST.json").read_text())
        manifest["files"][0]["name"] = "../../outside.md"
        (made.path / "MANIFEST.json").write_text(json.dumps(manifest))
    write_file(filled, "project_a.md", "---\ndescription: current\n---\n")
    before, snapshots = live(filled), len(filled.snapshots())
    with pytest.raises(SnapshotInvalid):
        filled.rollback(made.id)
    assert live(filled) == before and len(filled.snapshots()) == snapshots


def test_only_the_newest_snapshots_are_kept(filled: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMEM_SNAPSHOT_KEEP", "2")
    made = [filled.snapshot(label=str(i)).id for i in range(4)]
    assert [s.id for s in filled.snapshots()] == made[-2:]


def test_bulk_operations_take_a_snapshot_first(filled: MemoryStore) -> None:
    assert filled.rebuild_index() is False and filled.snapshots() == []  # nothing to change, no snapshot
    write_file(filled, "project_c.md", "---\ndescription: gamma\n---\n")
    assert filled.rebuild_index() is True
    assert [s.label for s in filled.snapshots()] == ["before index --rebuild"]
    old = time.time() - 400 * 86400
    for name in ("project_a.md", "project_c.md"):
        os.utime(filled.memory_dir / name, (old, old))
        path = filled.memory_dir / name
        path.write_text(path.read_text().replace("updated:", "updatedx:"))
        os.utime(path, (old, old))
    filled.lock("project_c.md")
    archived = filled.archive_candidates()
    assert archived == [("project_a.md", None)]
    assert filled.snapshots()[-1].label == "before archiving 1 candidate(s)"
    assert "project_a.md" in {p.name for p in (filled.snapshots()[-1].path / "files").iterdir()}
    assert (filled.memory_dir / "project_c.md").exists()


def test_rollback_cli_refuses_with_a_clear_message(filled: MemoryStore, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sagemem.cli import cli

    result = CliRunner().invoke(
        cli, ["--dir", str(filled.memory_dir), "snapshot", "rollback", "20990101-000000-000000"]
    )
    assert result.exit_code == 1 and "no such snapshot" in result.stderr
    made = filled.snapshot()
    result = CliRunner().invoke(
        cli, ["--dir", str(filled.memory_dir), "snapshot", "rollback", made.id, "--json"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["snapshot"] == made.id


def test_snapshots_hold_every_kind_of_file(store: MemoryStore) -> None:
    write_file(store, "reference_crlf.md", "---\r\ndescription: crlf\r\n---\r\n")
    write_file(store, "project_broken.md", "---\ndescription: [broken\n---\n")
    write_file(store, "big.md", "x" * (600 * 1024))
    write_file(store, "Notes.md", "one\n")
    write_file(store, "notes.md", "two\n")
    made = store.snapshot()
    stored = {p.name: p.read_bytes() for p in (made.path / "files").iterdir()}
    assert stored == live(store)


def test_rolling_back_to_the_oldest_protection_snapshot(filled: MemoryStore) -> None:
    base = filled.snapshot()
    path = filled.memory_dir / "project_a.md"
    states = []
    for i in range(3):
        path.write_text(path.read_text() + f"edit {i}\n")
        states.append(path.read_bytes())
        filled.rollback(base.id)
    protections = [s for s in filled.snapshots() if s.kind == "protection"]
    assert len(protections) == 3
    filled.rollback(protections[0].id)  # pruning must not take the snapshot being rolled back to
    assert path.read_bytes() == states[0]


def test_a_rollback_that_cannot_write_a_file_writes_none(filled: MemoryStore, tmp_path: Path) -> None:
    made = filled.snapshot()
    write_file(filled, "project_a.md", "---\ndescription: edited\n---\n")
    target = filled.memory_dir / "user_b.md"
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("not a memory")
    target.unlink()
    target.symlink_to(elsewhere)
    with pytest.raises(Exception, match="symbolic link"):
        filled.rollback(made.id)
    assert (filled.memory_dir / "project_a.md").read_text() == "---\ndescription: edited\n---\n"
    assert elsewhere.read_text() == "not a memory"


def test_a_file_too_large_to_copy_is_left_out_and_stops_no_bulk_change(filled: MemoryStore) -> None:
    huge = write_file(filled, "project_huge.md", "---\ndescription: huge\n---\n" + "x" * (4 << 20) + "\n")
    write_file(filled, "project_unlisted.md", "---\ndescription: not in the index yet\ntype: project\n---\n")
    memory = str(filled.memory_dir)
    made = CliRunner().invoke(cli, ["--dir", memory, "snapshot", "create"], catch_exceptions=False)
    assert made.exit_code == 0 and "left out: project_huge.md file is larger than 4 MiB" in made.stdout
    snap = filled.snapshots()[-1]
    assert [s["name"] for s in snap.skipped] == ["project_huge.md"]
    copied = {f["name"] for f in snap.files}
    assert "project_huge.md" not in copied and "project_a.md" in copied
    rebuilt = CliRunner().invoke(cli, ["--dir", memory, "index", "--rebuild"], catch_exceptions=False)
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert "project_unlisted.md" in (filled.memory_dir / "MEMORY.md").read_text()
    write_file(filled, "reference_crlf.md", b"---\r\ndescription: crlf\r\ntype: reference\r\n---\r\n")
    fixed = CliRunner().invoke(cli, ["--dir", memory, "check", "--fix"], catch_exceptions=False)
    assert "fixed: reference_crlf.md: CRLF line endings converted to LF" in fixed.stdout, fixed.stderr
    assert "unreadable: project_huge.md" in fixed.stdout  # still named: it is no memory
    outcome = filled.rollback(snap.id, scope="all")
    assert "project_huge.md" in outcome["kept"] and huge.exists()  # not "made since": left where it is


# A name `new` and `write` accepted before the secret rule refused it: the records that keep
# it are judged by the path rule alone, so they stay usable.
OLDER_NAME = "project_token=abcdef1234567890abcd.md"
OLDER_TEXT = "---\ndescription: the old token note\n---\n\nRotated since.\n"


def test_a_snapshot_holding_a_name_refused_since_is_listed_and_rolled_back(filled: MemoryStore) -> None:
    from sagemem.care import snapshot as snapshot_module
    from sagemem.store.errors import InvalidName
    from sagemem.store.names import check_name

    with pytest.raises(InvalidName):
        check_name(OLDER_NAME)
    write_file(filled, OLDER_NAME, OLDER_TEXT)  # as it was when the snapshot was taken
    taken = snapshot_module.create(filled.memory_dir, filled.state_dir, [*filled.files(), OLDER_NAME])
    (filled.memory_dir / OLDER_NAME).unlink()
    assert [s.id for s in filled.snapshots()] == [taken.id]
    assert filled.check().ok  # its manifest is sound: no state-record finding
    done = filled.rollback(taken.id)
    assert OLDER_NAME in done["restored"]
    assert (filled.memory_dir / OLDER_NAME).read_text() == OLDER_TEXT


def test_the_ledger_and_a_conflict_record_keep_a_name_refused_since(filled: MemoryStore) -> None:
    from sagemem.store import guard

    write_file(filled, OLDER_NAME, OLDER_TEXT)
    (filled.state_dir / "access.json").write_text(
        json.dumps({"files": {OLDER_NAME: {"read": {"last": 1_790_000_000, "count": 2}}}})
    )
    assert filled.ledger()[OLDER_NAME].read.count == 2
    refused = guard.record_refusal(
        filled.memory_dir / OLDER_NAME, "0" * 64, b"new", filled.state_dir, "editor", "a stale edit"
    )
    assert [c.id for c in filled.conflicts()] == [refused.conflict_id]
    state = [f for f in filled.check().findings if f.check == "state-record"]
    assert state == []


def index_lines(store: MemoryStore) -> list[str]:
    return (store.memory_dir / "MEMORY.md").read_text().splitlines()


def test_rollback_of_files_restores_them_and_keeps_the_index_lines_of_memories_made_since(
    filled: MemoryStore,
) -> None:
    made = filled.snapshot()
    before = live(filled)
    filled.create(type="project", name="later", description="made after the snapshot")
    edited = filled.get("project_a.md")
    filled.update("project_a.md", expected_version=edited.version, description="changed since")
    # The person gave the new memory's line a title of their own: it stays as they wrote it.
    path = filled.memory_dir / "MEMORY.md"
    path.write_text(path.read_text().replace("[later]", "[Later, in my words]"))
    (line,) = [x for x in index_lines(filled) if "project_later.md" in x]
    assert line.startswith("- [Later, in my words](project_later.md)")
    result = CliRunner().invoke(  # the default parts: files
        cli, ["--dir", str(filled.memory_dir), "snapshot", "rollback", made.id, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(result.stdout)["restored"]) == ["MEMORY.md", "project_a.md"]
    assert (filled.memory_dir / "project_a.md").read_bytes() == before["project_a.md"]
    assert (filled.memory_dir / "project_later.md").is_file()
    lines = index_lines(filled)
    assert line in lines and lines[-1] == line  # after the snapshot's own text
    assert [x for x in lines if x != line] == before["MEMORY.md"].decode().splitlines()
    assert not filled.check_index().unlisted and "changed since" not in "\n".join(lines)


def test_rollback_of_all_keeps_the_line_of_a_locked_memory_it_leaves_and_drops_the_archived(
    filled: MemoryStore,
) -> None:
    made = filled.snapshot()
    filled.create(type="project", name="kept", description="locked, so it stays")
    filled.create(type="project", name="gone", description="archived by the rollback")
    filled.lock("project_kept.md")
    outcome = filled.rollback(made.id, scope="all")
    assert outcome["retired"] == ["project_gone.md"] and outcome["kept"] == ["project_kept.md"]
    text = (filled.memory_dir / "MEMORY.md").read_text()
    assert "project_kept.md" in text and "project_gone.md" not in text
    assert filled.check_index().ok


def test_the_old_spelling_of_parts_still_works_with_a_note_on_stderr(filled: MemoryStore) -> None:
    made = filled.snapshot()
    filled.create(type="project", name="later", description="made after the snapshot")
    memory = str(filled.memory_dir)
    shown = CliRunner().invoke(cli, ["--dir", memory, "snapshot", "rollback", "--help"])
    assert "--parts [files|all]" in shown.stdout and "--scope" not in shown.stdout
    clash = CliRunner().invoke(
        cli, ["--dir", memory, "snapshot", "rollback", made.id, "--parts", "files", "--scope", "all"]
    )
    assert clash.exit_code == 2 and "disagree" in clash.stderr
    assert (filled.memory_dir / "project_later.md").is_file() and len(filled.snapshots()) == 1
    old = CliRunner().invoke(
        cli, ["--dir", memory, "snapshot", "rollback", made.id, "--scope", "all", "--json"]
    )
    assert old.exit_code == 0, old.output
    assert old.stderr.splitlines() == [
        "sagemem: --scope is deprecated here; use --parts (which parts are rolled back)"
    ]
    assert json.loads(old.stdout)["retired"] == ["project_later.md"]
