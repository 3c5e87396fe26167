"""The change journal (`store/journal.py`): which files changed since a mark, and an index kept
by it equal to a fresh build after any change an editor, a shell or git makes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemem import MemoryStore
from sagemem.search import cache
from sagemem.search.corpus import load
from sagemem.store import journal

from .memories import DANCE, make
from .test_cache import contents, fresh, opened

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the journal is inotify's (Linux)")


def settled(kept: journal.Journal) -> None:
    """What the resident process does before it starts a hook: every event taken in; and
    every scan due finished, as it does while idle."""
    kept.drain()
    while kept.scan_step():
        pass


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[journal.Journal]:
    """A journal installed as this process's, as in a hook the resident process runs."""
    made = journal.Journal()
    monkeypatch.setattr(journal, "_current", made)
    monkeypatch.setattr(journal, "wanted", set())
    yield made
    made.close()


class Listings:
    """Counts the full listings taken (`cache.listing`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = cache.listing

        def counted(memory_dir: Path) -> dict[str, str]:
            self.count += 1
            return real(memory_dir)

        monkeypatch.setattr(cache, "listing", counted)


def folder_of(store: MemoryStore) -> str:
    return str(store.memory_dir.absolute())


def test_names_changed_since_a_mark(tmp_path: Path, kept: journal.Journal) -> None:
    store = make(tmp_path / "mem", DANCE)
    folder = folder_of(store)
    assert kept.mark(folder) is None  # not watched: no answer
    assert kept.watch(folder)
    assert kept.mark(folder) is None  # watched, its first scan not done: still none
    settled(kept)
    mark = kept.mark(folder)
    assert mark is not None and kept.since(folder, mark) == []
    (store.memory_dir / "project_studio_opening.md").write_text("---\ndescription: x\n---\n")
    (store.memory_dir / ".hidden.md").write_text("an editor's temp file")
    (store.memory_dir / "notes.txt").write_text("not a memory name")
    (store.memory_dir / "user_dancer_profile.md").unlink()
    (store.memory_dir / "reference_competition_rules.md").rename(store.memory_dir / "reference_rules.md")
    settled(kept)
    assert kept.since(folder, mark) == [
        "project_studio_opening.md",
        "reference_competition_rules.md",
        "reference_rules.md",
        "user_dancer_profile.md",
    ]
    later = kept.mark(folder)
    assert later != mark and kept.since(folder, later) == []


def test_no_answer_for_a_mark_it_did_not_give(tmp_path: Path, kept: journal.Journal) -> None:
    store = make(tmp_path / "mem", DANCE)
    folder = folder_of(store)
    kept.watch(folder)
    settled(kept)
    token, generation = str(kept.mark(folder)).split(":")
    for forged in (None, "", f"{'0' * 16}:0", f"{token}:{int(generation) + 1}", f"{token}:x", 7):
        assert kept.since(folder, forged) is None
    other = journal.Journal()
    try:
        other.watch(folder)
        settled(other)
        assert other.since(folder, kept.mark(folder)) is None  # another journal's mark
    finally:
        other.close()


@pytest.mark.parametrize("how", ["deleted", "replaced", "moved", "link retargeted"])
def test_a_directory_no_longer_the_one_watched_gets_no_answer(
    tmp_path: Path, kept: journal.Journal, how: str
) -> None:
    real = make(tmp_path / "real", DANCE).memory_dir
    other = make(tmp_path / "other", DANCE).memory_dir
    path = tmp_path / "link"
    path.symlink_to(real)
    folder = str(path) if how == "link retargeted" else str(real)
    assert kept.watch(folder)
    settled(kept)
    mark = kept.mark(folder)
    assert kept.since(folder, mark) == []
    if how == "deleted":
        shutil.rmtree(real)
    elif how == "replaced":
        shutil.rmtree(real)
        shutil.copytree(other, real)
    elif how == "moved":
        real.rename(tmp_path / "elsewhere")
    else:
        path.unlink()
        path.symlink_to(other)
    settled(kept)
    assert kept.since(folder, mark) is None
    assert kept.mark(folder) is None


def test_an_overflow_forgets_everything(tmp_path: Path, kept: journal.Journal, monkeypatch: Any) -> None:
    from inotify_simple import Event, flags

    store = make(tmp_path / "mem", DANCE)
    folder = folder_of(store)
    kept.watch(folder)
    settled(kept)
    mark = kept.mark(folder)
    monkeypatch.setattr(kept._inotify, "read", lambda timeout=None: [Event(-1, flags.Q_OVERFLOW, 0, "")])
    kept.drain()
    assert kept.since(folder, mark) is None and kept.folders == []


def test_only_local_filesystems_are_watched(tmp_path: Path, kept: journal.Journal) -> None:
    assert kept.watch(str(tmp_path))
    assert not kept.watch("/proc/self")  # changes made by no write at all
    assert not kept.watch(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    assert not kept.watch(str(tmp_path / "file"))


def test_a_file_with_another_link_is_always_looked_at(tmp_path: Path, kept: journal.Journal) -> None:
    """A write through a hard link in another folder reaches no watch of this one: such a file
    is named on every call; a link made later is found by the next scan."""
    store = make(tmp_path / "mem", DANCE)
    folder = folder_of(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.link(store.memory_dir / "user_dancer_profile.md", outside / "profile.md")
    kept.watch(folder)
    settled(kept)
    mark = kept.mark(folder)
    assert kept.since(folder, mark) == ["user_dancer_profile.md"]
    os.link(store.memory_dir / "reference_competition_rules.md", outside / "rules.md")
    with open(outside / "rules.md", "a", encoding="utf-8") as other:
        other.write("\nA late rule about costumes.\n")
    settled(kept)
    assert kept.since(folder, mark) == ["user_dancer_profile.md"]  # no event reached the watch
    monkey_rescan(kept)
    assert kept.since(folder, mark) == ["reference_competition_rules.md", "user_dancer_profile.md"]


def monkey_rescan(kept: journal.Journal) -> None:
    """Make every watched directory due for its next scan, and run it."""
    for watched in kept._by_folder.values():
        watched.scanned_at -= journal.RESCAN_SECONDS * 10
    settled(kept)


def test_the_index_uses_the_journal_and_lists_nothing(
    tmp_path: Path, kept: journal.Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(tmp_path / "mem", DANCE)
    listings = Listings(monkeypatch)
    opened(store)  # not watched yet: listed, and asked to be watched
    assert journal.wanted == {folder_of(store)} and listings.count == 1
    kept.watch(folder_of(store))
    settled(kept)
    _, read = opened(store)  # a foreign mark (none): listed once more, the mark stored
    assert read == [] and listings.count == 2
    _, read = opened(store)
    assert read == [] and listings.count == 2  # nothing changed: nothing listed, nothing read
    path = store.memory_dir / "reference_competition_rules.md"
    path.write_text(path.read_text().replace("kerfuffle", "brouhaha"))
    settled(kept)
    corpus, read = opened(store)
    assert read == [path.name] and listings.count == 2
    assert contents(corpus) == contents(fresh(store))


def test_a_deadline_keeps_the_old_mark_until_everything_changed_is_in(
    tmp_path: Path, kept: journal.Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(tmp_path / "mem", DANCE)
    kept.watch(folder_of(store))
    settled(kept)
    opened(store)
    for i in range(6):
        (store.memory_dir / f"project_new_{i}.md").write_text(f"---\ndescription: new {i}\n---\n\nbody {i}\n")
    settled(kept)
    monkeypatch.setattr(cache, "BATCH", 2)
    monkeypatch.setattr(cache, "_past", lambda deadline: deadline is not None)
    corpus, read = opened(store, deadline=0.5)  # past at once: one file a call
    assert read == ["project_new_0.md"] and corpus.pending == 5
    corpus, read = opened(store, deadline=0.5)  # the old mark still names all six
    assert read == ["project_new_1.md"] and corpus.pending == 4
    monkeypatch.setattr(cache, "_past", lambda deadline: False)
    corpus, read = opened(store, deadline=10**9)
    assert sorted(read) == [f"project_new_{i}.md" for i in range(2, 6)]
    assert contents(corpus) == contents(fresh(store))


# --- any sequence of changes --------------------------------------------------------------


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def change(memory: Path, operation: str, slot: int, words: list[str], outside: Path) -> None:
    """One change to the directory, as an editor, a shell or git makes it."""
    path = memory / f"project_n{slot}.md"
    other = memory / f"project_n{(slot + 1) % 5}.md"
    text = " ".join(words)
    body = "\n\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3))
    page = f"---\ndescription: {text}\n---\n\n{body}\n"
    if path.is_dir() and operation != "directory":
        path.rmdir()
    if operation == "write":  # in place, as `echo > file` does
        path.write_text(page, "utf-8")
    elif operation == "save":  # an editor's atomic save: a temp file renamed over it
        temp = memory / f".{path.name}.swp"
        temp.write_text(page, "utf-8")
        os.replace(temp, path)
    elif operation == "append" and path.exists():
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n{text}\n")
    elif operation == "same size" and path.exists():  # same size, mtime put back (cp -p, rsync -t)
        before = path.stat()
        data = path.read_bytes()
        path.write_bytes(data.swapcase() if data.swapcase() != data else data[::-1])
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif operation == "touch" and path.exists():
        os.utime(path, ns=(1, path.stat().st_mtime_ns + 10**9))
    elif operation == "chmod" and path.exists():
        path.chmod(0o600 if path.stat().st_mode & 0o044 else 0o644)
    elif operation == "delete" and path.exists():
        path.unlink()
    elif operation == "rename" and path.exists():
        path.rename(other)
    elif operation == "move out" and path.exists():
        path.rename(outside / path.name)
    elif operation == "move in":
        (outside / "incoming.md").write_text(page, "utf-8")
        (outside / "incoming.md").rename(path)
    elif operation == "copy" and path.exists():
        shutil.copy2(path, other)  # the copy keeps the mtime
    elif operation == "directory" and not path.is_dir():  # a folder with a memory's name
        path.unlink(missing_ok=True)
        path.mkdir()
    elif operation == "git commit":
        git(memory, "add", "-A", ".")
        git(memory, "commit", "-q", "--allow-empty", "-m", "step")
    elif operation == "git checkout":  # the other branch's files, written by git
        git(memory, "add", "-A", ".")
        git(memory, "stash", "-q")
        git(memory, "checkout", "-q", "side" if slot % 2 else "main")
    elif operation == "git stash pop":  # may meet a conflict: then the markers are the files'
        subprocess.run(["git", "stash", "pop", "-q"], cwd=memory, capture_output=True, check=False)
    elif operation == "git reset":
        git(memory, "reset", "-q", "--hard")


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "write",
                "save",
                "append",
                "same size",
                "touch",
                "chmod",
                "delete",
                "rename",
                "move out",
                "move in",
                "copy",
                "directory",
                "git commit",
                "git checkout",
                "git stash pop",
                "git reset",
            ]
        ),
        st.integers(0, 4),
        st.lists(st.sampled_from(["alpha", "beta", "gamma", "部署", "回滚", "delta"]), max_size=9),
        st.booleans(),  # a scan between this change and the next call
    ),
    max_size=10,
)


@pytest.mark.parametrize("watched", [True, False], ids=["with the journal", "without"])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=OPERATIONS)
def test_any_sequence_of_changes_leaves_the_index_a_fresh_build_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watched: bool, steps: list[Any]
) -> None:
    base = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
    store = make(base / "repo", {"project_n0.md": "---\ndescription: seed alpha\n---\n\nalpha beta\n"})
    memory, outside = store.memory_dir, base / "outside"
    outside.mkdir()
    (memory / ".gitignore").write_text(".sagemem/\n")
    git(memory, "init", "-q", "-b", "main")
    git(memory, "commit", "-q", "--allow-empty", "-m", "start")
    git(memory, "branch", "side")
    kept = journal.Journal() if watched else None
    monkeypatch.setattr(journal, "_current", kept)
    listings = Listings(monkeypatch)
    try:
        if kept is not None:
            kept.watch(str(memory.absolute()))
            settled(kept)
        load(memory, store.state_dir).close()  # a first look: listed, and the mark stored
        listed = 0
        for operation, slot, words, scan in steps:
            change(memory, operation, slot, words, outside)
            if kept is not None:
                kept.drain()
                if scan:
                    monkey_rescan(kept)
            before = listings.count
            cached = load(memory, store.state_dir)
            listed += listings.count - before
            assert cached.repaired == ""  # kept up to date, never found damaged and built again
            assert contents(cached) == contents(fresh(store)), (operation, slot)
            cached.close()
        # With the journal no call after the first listed the directory; without, each did.
        assert listed == (0 if kept is not None else len(steps))
    finally:
        if kept is not None:
            kept.close()
