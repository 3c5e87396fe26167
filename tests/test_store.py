from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from sagemem import (
    InvalidMemory,
    InvalidName,
    MemoryNotFound,
    MemoryStore,
    SagememError,
    StoreNotFound,
    VersionConflict,
)
from sagemem.store.errors import ConflictNotFound

from .conftest import write_file

CLAUDE_STYLE = """---
# kept: a comment
name: prefers-uv
description: The user packages Python with uv
metadata:
  node_type: memory
  type: feedback
originSessionId: s-1   # and this one
---
Use `uv add`.

**Why:** faster.
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- init ----------------------------------------------------------------------------------------


def test_init_creates_layout_and_is_idempotent(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    created = store.init(git=True)
    assert {p.name for p in created} == {"mem", ".sagemem", "MEMORY.md", ".gitignore", ".gitattributes"}
    assert (store.memory_dir / "MEMORY.md").read_text() == "# Memory\n\n"
    assert ".sagemem/" in (store.memory_dir / ".gitignore").read_text().splitlines()
    assert (store.memory_dir / ".gitattributes").read_text() == "*.md text eol=lf\nMEMORY.md merge=union\n"
    before = snapshot(tmp_path)
    assert store.init(git=True) == []
    assert snapshot(tmp_path) == before


def test_init_keeps_existing_files(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    folder.mkdir()
    (folder / ".gitignore").write_text("*.bak")
    (folder / "memory.md").write_text("# my own index\n")
    MemoryStore(folder).init()
    assert (folder / ".gitignore").read_text() == "*.bak\n.sagemem/\n.*.tmp\n"
    assert (folder / "memory.md").read_text() == "# my own index\n"
    assert not (folder / "MEMORY.md").exists() or os.path.samefile(folder / "MEMORY.md", folder / "memory.md")


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound, match="run `sagemem init`"):
        MemoryStore(tmp_path / "nope").memories()


# -- create ----------------------------------------------------------------------------------------


def test_create_writes_file_and_index_line(store: MemoryStore) -> None:
    m = store.create(
        type="project", name="Deploy flow", description="How we deploy", tags=["ci"], body="Run it."
    )
    path = store.memory_dir / "project_deploy_flow.md"
    assert m.file == path.name
    assert m.version == sha(path.read_bytes())
    assert store.get(m.file) == m
    assert (
        store.memory_dir / "MEMORY.md"
    ).read_text() == "# Memory\n\n- [Deploy flow](project_deploy_flow.md) — How we deploy\n"


def test_create_needs_type_and_description(store: MemoryStore) -> None:
    with pytest.raises(InvalidMemory, match="type must be one of"):
        store.create(type="diary", name="x", description="d")
    with pytest.raises(InvalidMemory, match="description must not be empty"):
        store.create(type="user", name="x", description="  ")
    assert store.files() == []


def test_create_over_an_existing_name_is_a_recorded_conflict(store: MemoryStore) -> None:
    first = store.create(type="project", name="x", description="first")
    with pytest.raises(VersionConflict) as caught:
        store.create(type="project", name="X", description="second", file="PROJECT_X.md")
    assert caught.value.expected is None and caught.value.actual == first.version
    assert store.get("project_x.md") == first
    conflict = store.conflict(caught.value.conflict_id)
    assert b"second" in conflict.proposed
    assert store.files() == ["project_x.md"]


def test_create_refuses_bad_names(store: MemoryStore) -> None:
    for bad in ["../x.md", "MEMORY.md", "a:b.md"]:
        with pytest.raises(InvalidName):
            store.create(type="user", name="x", description="d", file=bad)
    assert store.files() == []


# -- guarded write ----------------------------------------------------------------------------------


def test_write_with_current_version(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="old")
    new = store.write(
        m.file, "---\ndescription: new\ntype: project\n---\nbody\r\n", expected_version=m.version
    )
    data = (store.memory_dir / m.file).read_bytes()
    assert data == b"---\ndescription: new\ntype: project\n---\nbody\n"  # LF on write
    assert new.version == sha(data)
    assert "- [x](project_x.md) — new" in (store.memory_dir / "MEMORY.md").read_text()  # title kept
    assert store.check_index().ok


def test_stale_write_is_refused_recorded_and_changes_nothing(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="v1")
    path = store.memory_dir / m.file
    edited = path.read_text().replace("v1", "edited by a person")
    path.write_text(edited)  # an editor changes the file behind the agent's back
    before = snapshot(store.memory_dir)
    proposed = "---\ndescription: agent version\n---\n"
    with pytest.raises(VersionConflict) as caught:
        store.write(m.file, proposed, expected_version=m.version, writer="agent-7", reason="refresh")
    err = caught.value
    assert err.expected == m.version and err.actual == sha(edited.encode())
    assert err.conflict_id in str(err) and err.exit_code == 3
    assert {k: v for k, v in snapshot(store.memory_dir).items() if not k.startswith(".sagemem")} == {
        k: v for k, v in before.items() if not k.startswith(".sagemem")
    }
    record = json.loads((store.state_dir / "conflicts" / f"{err.conflict_id}.json").read_text())
    assert record["file"] == m.file
    assert record["expected_version"] == m.version
    assert record["disk_version"] == sha(edited.encode())
    assert record["disk"] == edited
    assert record["proposed"] == proposed
    assert record["writer"] == "agent-7" and record["reason"] == "refresh"
    assert record["created"]
    # The same refused write again is the same single record.
    with pytest.raises(VersionConflict) as again:
        store.write(m.file, proposed, expected_version=m.version, writer="agent-7")
    assert again.value.conflict_id == err.conflict_id
    assert len(store.conflicts()) == 1


def test_write_to_a_deleted_file_is_a_conflict(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    (store.memory_dir / m.file).unlink()
    with pytest.raises(VersionConflict) as caught:
        store.write(m.file, "---\ndescription: d2\n---\n", expected_version=m.version)
    assert caught.value.actual is None
    assert store.conflict(caught.value.conflict_id).disk is None
    assert not (store.memory_dir / m.file).exists()


def test_invalid_content_changes_nothing(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    before = snapshot(store.memory_dir)
    for bad in [
        "---\ndescription: [oops\n---\n",
        "---\na: &x 1\nb: *x\n---\n",
        "---\ntype: diary\n---\n",
        "x" * (600 * 1024),
    ]:
        with pytest.raises(InvalidMemory) as caught:
            store.write(m.file, bad, expected_version=m.version)
        assert caught.value.file == m.file
    assert snapshot(store.memory_dir) == before


def test_identical_write_does_not_touch_the_file(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    path = store.memory_dir / m.file
    os.utime(path, (1_000_000, 1_000_000))
    again = store.write(m.file, path.read_text(), expected_version=m.version)
    assert again.version == m.version
    assert path.stat().st_mtime == 1_000_000


def test_write_finds_the_file_case_insensitively(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    store.write("Project_X.md", "---\ndescription: e\n---\n", expected_version=m.version)
    assert store.files() == ["project_x.md"]


# -- update in place -------------------------------------------------------------------------------


def test_update_changes_one_field_and_keeps_every_other_byte(store: MemoryStore) -> None:
    path = write_file(store, "feedback_uv.md", CLAUDE_STYLE)
    m = store.get("feedback_uv.md")
    new = store.update(
        m.file, expected_version=m.version, description="Use uv for Python packaging", updated=None
    )
    text = path.read_text()
    assert text == CLAUDE_STYLE.replace("The user packages Python with uv", "Use uv for Python packaging")
    assert new.version == sha(path.read_bytes())


def test_update_sets_updated_and_nested_type(store: MemoryStore) -> None:
    path = write_file(store, "feedback_uv.md", CLAUDE_STYLE)
    m = store.get("feedback_uv.md")
    new = store.update(m.file, expected_version=m.version, type="reference", tags=("py", "uv"))
    text = path.read_text()
    assert "  type: reference\n" in text and "\ntype:" not in text
    assert new.type == "reference" and new.tags == ("py", "uv")
    assert new.updated is not None
    assert text.endswith("---\nUse `uv add`.\n\n**Why:** faster.\n")


def test_update_keeps_crlf(store: MemoryStore) -> None:
    crlf = CLAUDE_STYLE.replace("\n", "\r\n")
    path = write_file(store, "feedback_uv.md", crlf)
    m = store.get("feedback_uv.md")
    store.update(m.file, expected_version=m.version, aliases=["uv"], body="New body.\nTwo.\n")
    data = path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert data.endswith(b"---\r\nNew body.\r\nTwo.\r\n")
    assert b"# kept: a comment\r\n" in data


def test_update_with_stale_version_records_the_change_on_the_new_disk(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d", tags=["a"])
    newer = store.update(m.file, expected_version=m.version, tags=["b"])
    with pytest.raises(VersionConflict) as caught:
        store.update(m.file, expected_version=m.version, description="from a stale reader")
    assert store.get(m.file) == newer
    resolved = store.resolve_conflict(caught.value.conflict_id, "proposed")
    assert resolved.resolution == "proposed"
    now = store.get(m.file)
    assert now.description == "from a stale reader" and now.tags == ("b",)


# -- conflicts ------------------------------------------------------------------------------------


def make_conflict(store: MemoryStore) -> tuple[str, str]:
    m = store.create(type="project", name="x", description="d")
    store.write(m.file, "---\ndescription: person\n---\n", expected_version=m.version)
    with pytest.raises(VersionConflict) as caught:
        store.write(m.file, "---\ndescription: agent\n---\n", expected_version=m.version)
    return m.file, caught.value.conflict_id


def test_resolve_keep_disk_leaves_the_file(store: MemoryStore) -> None:
    file, cid = make_conflict(store)
    before = (store.memory_dir / file).read_bytes()
    done = store.resolve_conflict(cid, "disk")
    assert done.resolution == "disk" and done.resolved_at
    assert (store.memory_dir / file).read_bytes() == before
    assert store.conflicts() == []
    assert [c.id for c in store.conflicts(resolved=True)] == [cid]
    with pytest.raises(ConflictNotFound):
        store.conflict(cid)


def test_resolve_keep_proposed_writes_it(store: MemoryStore) -> None:
    file, cid = make_conflict(store)
    store.resolve_conflict(cid, "proposed")
    assert store.get(file).description == "agent"
    assert "— agent" in (store.memory_dir / "MEMORY.md").read_text()


def test_resolve_is_itself_version_guarded(store: MemoryStore) -> None:
    file, cid = make_conflict(store)
    write_file(store, file, "---\ndescription: edited again\n---\n")
    with pytest.raises(VersionConflict):
        store.resolve_conflict(cid, "proposed")
    assert store.get(file).description == "edited again"
    assert cid in [c.id for c in store.conflicts()]  # still open


def test_conflict_ids_are_checked(store: MemoryStore) -> None:
    for bad in ["../../etc/passwd", "zz", "0123456789abcdeg"]:
        with pytest.raises(ConflictNotFound):
            store.conflict(bad)


# -- listing and reading -------------------------------------------------------------------------


def test_listing_takes_only_top_level_memories(store: MemoryStore) -> None:
    store.create(type="user", name="a", description="a")
    (store.memory_dir / "archive").mkdir()
    (store.memory_dir / "archive" / "old.md").write_text("---\ndescription: archived\n---\n")
    (store.state_dir / "stray.md").write_text("---\ndescription: state\n---\n")
    write_file(store, "session-log.md", "log")
    write_file(store, "Memory.md", "index")
    write_file(store, ".hidden.md", "x")
    write_file(store, ".user_a.md.abc123.tmp", "partial")
    write_file(store, "notes.txt", "x")
    write_file(store, "README.MD", "# plain file\n")
    assert store.files() == ["README.MD", "user_a.md"]


def test_unusable_files_are_problems_not_crashes(store: MemoryStore) -> None:
    store.create(type="user", name="good", description="fine")
    write_file(store, "bad_yaml.md", "---\ndescription: [x\n---\n")
    write_file(store, "big.md", "x" * (513 * 1024))
    write_file(store, "a:b.md", "x")
    (store.memory_dir / "link.md").symlink_to(store.memory_dir / "user_good.md")
    scan = store.scan()
    assert [m.file for m in scan.memories] == ["user_good.md"]
    rules = {p.file: p.rule for p in scan.problems}
    assert set(rules) == {"bad_yaml.md", "big.md", "a:b.md", "link.md"}
    assert "not valid YAML" in rules["bad_yaml.md"]
    assert "512 KiB" in rules["big.md"]
    assert "':'" in rules["a:b.md"]
    assert "symbolic link" in rules["link.md"]


def test_filters(store: MemoryStore) -> None:
    store.create(type="user", name="a", description="a", tags=["Git"])
    store.create(type="project", name="b", description="b", tags=["git", "ci"])
    store.create(type="project", name="c", description="c")
    assert [m.file for m in store.memories(type="project")] == ["project_b.md", "project_c.md"]
    assert [m.file for m in store.memories(tag="GIT")] == ["project_b.md", "user_a.md"]
    assert [m.file for m in store.memories(type="project", tag="ci")] == ["project_b.md"]


def test_read_a_broken_file_to_fix_it(store: MemoryStore) -> None:
    write_file(store, "broken.md", "---\ndescription: [x\n---\nbody\n")
    read = store.read("broken.md")
    assert read.memory is None and "not valid YAML" in (read.problem or "")
    fixed = store.write("broken.md", read.text.replace("[x", "x"), expected_version=read.version)
    assert fixed.description == "x"


def test_get_missing_and_reserved(store: MemoryStore) -> None:
    with pytest.raises(MemoryNotFound):
        store.get("nope.md")
    with pytest.raises(InvalidName):
        store.get("MEMORY.md")


def test_stale_update_of_a_deleted_file_is_a_recorded_conflict(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    (store.memory_dir / m.file).unlink()
    with pytest.raises(VersionConflict) as caught:
        store.update(m.file, expected_version=m.version, description="new", writer="agent")
    conflict = store.conflict(caught.value.conflict_id)
    assert conflict.proposed is None and conflict.disk is None
    assert "description='new'" in conflict.reason
    with pytest.raises(SagememError, match="no content to write"):
        store.resolve_conflict(conflict.id, "proposed")
    assert store.resolve_conflict(conflict.id, "disk").resolution == "disk"


def test_stale_update_of_a_broken_file_is_a_recorded_conflict(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    write_file(store, m.file, "---\ndescription: [half edited\n---\n")
    with pytest.raises(VersionConflict):
        store.update(m.file, expected_version=m.version, tags=["a"])
    assert len(store.conflicts()) == 1


def test_update_of_a_broken_file_at_its_own_version_is_an_error(store: MemoryStore) -> None:
    write_file(store, "x.md", "---\ndescription: [half edited\n---\n")
    version = store.read("x.md").version
    with pytest.raises(InvalidMemory):
        store.update("x.md", expected_version=version, tags=["a"])
    assert store.conflicts() == []


def test_a_conflict_resolved_twice_keeps_both_records(store: MemoryStore) -> None:
    file, cid = make_conflict(store)
    first_disk = store.conflict(cid).disk
    store.resolve_conflict(cid, "disk")
    stale = store.conflicts(resolved=True)[0].expected_version
    with pytest.raises(VersionConflict) as again:
        store.write(file, "---\ndescription: agent\n---\n", expected_version=stale)
    assert again.value.conflict_id == cid
    store.resolve_conflict(cid, "disk")
    records = store.conflicts(resolved=True)
    assert [c.id for c in records] == [cid, cid]
    assert records[0].disk == first_disk
    assert sorted(p.name for p in (store.state_dir / "conflicts" / "resolved").iterdir()) == [
        f"{cid}-2.json",
        f"{cid}.json",
    ]


def test_malformed_versions_are_mistakes_not_conflicts(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    for bad in ["abc", m.version[:12], m.version.upper()]:
        with pytest.raises(SagememError, match="is not a version"):
            store.write(m.file, "---\n---\n", expected_version=bad)
    assert store.conflicts() == []


def test_awkward_file_names_keep_a_healthy_index(store: MemoryStore) -> None:
    for name in ["x%41#y.md", "a b (draft).md", "c[1].md"]:
        store.write(name, "---\nname: C:\\path\\ [x]\ndescription: d\n---\n", expected_version=None)
    assert store.check_index().ok
    assert store.rebuild_index() is False
    text = (store.memory_dir / "MEMORY.md").read_text()
    assert text.count("\n- [") == 3


def test_memories_are_hashable(store: MemoryStore) -> None:
    m = store.create(type="project", name="x", description="d")
    assert {m, store.get(m.file)} == {m}
