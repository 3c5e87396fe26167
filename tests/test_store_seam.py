"""The seam between the store's `Directory` and the facade over it: the facade reaches the
store through public methods alone, and those methods keep what they promise."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from sagemem import MemoryStore, memory_set, memory_store
from sagemem.memory_set import MemorySet
from sagemem.store.directory import Directory

from .conftest import write_file


def test_the_facade_reaches_no_protected_member_of_the_store() -> None:
    """A `_name` the facade's modules use is one of their own, never one of `Directory`'s:
    what the facade needs of the store is a public method that says what it promises."""
    for module, own in ((memory_store, MemoryStore), (memory_set, MemorySet)):
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        protected = {name for name in vars(Directory) if name.startswith("_") and not name.startswith("__")}
        stores = protected - set(vars(own))
        assert used & stores == set(), module.__name__


def test_a_write_waits_for_the_write_lock_held_by_other_means(store: MemoryStore) -> None:
    """Whoever changes a memory's bytes outside `Directory` (care's purge) holds its write
    lock: a write made meanwhile waits, so neither change is lost."""
    made = store.create(type="project", name="a", description="alpha")
    path = store.memory_dir / made.file
    version = store.read(made.file).version
    written = threading.Event()

    def edit() -> None:
        store.update(made.file, expected_version=version, description="beta")
        written.set()

    with store.write_lock(path):
        writer = threading.Thread(target=edit)
        writer.start()
        assert not written.wait(0.3)
        assert "beta" not in path.read_text()
    writer.join(10)
    assert written.is_set() and "description: beta" in path.read_text()


def test_a_rollback_puts_each_file_back_where_it_is_spelled_now(store: MemoryStore) -> None:
    """A memory and MEMORY.md renamed since the snapshot (case aside, as a clone on another
    system may do) get the snapshot's bytes under their names of now: no second file."""
    store.create(type="project", name="a", description="alpha")
    made = store.snapshot()
    kept = {p.name: p.read_bytes() for p in (made.path / "files").iterdir()}
    (store.memory_dir / "project_a.md").rename(store.memory_dir / "Project_A.md")
    write_file(store, "Project_A.md", "---\ndescription: edited since\n---\n")
    (store.memory_dir / "MEMORY.md").rename(store.memory_dir / "memory.md")
    write_file(store, "memory.md", "# Memory index\n")
    outcome = store.rollback(made.id)
    assert sorted(outcome["restored"]) == ["MEMORY.md", "project_a.md"]
    on_disk = {p.name: p.read_bytes() for p in store.memory_dir.glob("*.md")}
    assert on_disk == {"Project_A.md": kept["project_a.md"], "memory.md": kept["MEMORY.md"]}
