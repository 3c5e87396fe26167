"""Real processes against one memory: the version guard's promises under races and kills."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from subprocess import PIPE

import pytest

from sagemem import MemoryStore
from sagemem.store.memory import version_of

from .workers import FILE

WORKERS = Path(__file__).with_name("workers.py")
PROCESSES, CYCLES = 8, 50


def start(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKERS), *args], text=True, **kwargs)  # type: ignore[call-overload]


@pytest.mark.parametrize("state_dirs", [1, 2], ids=["one-state-dir", "two-state-dirs"])
def test_racing_writers_lose_nothing(store: MemoryStore, tmp_path: Path, state_dirs: int) -> None:
    """8 processes x 50 guarded read-modify-write cycles on one memory. With two state dirs,
    half the writers were told another state dir (as a shell with SAGEMEM_STATE_DIR set)."""
    first = store.create(type="project", name="race", description="raced on", body="start\n")
    other = tmp_path / "other-state"
    states = [store.state_dir if w % state_dirs == 0 else other for w in range(PROCESSES)]
    stop = tmp_path / "stop"
    watcher = start("watch", str(store.memory_dir), str(stop), str(tmp_path / "watch.json"))
    procs = [
        start(
            "race", str(store.memory_dir), str(states[w]), str(w), str(CYCLES), str(tmp_path / f"w{w}.json")
        )
        for w in range(PROCESSES)
    ]
    for p in procs:
        assert p.wait(timeout=600) == 0
    stop.touch()
    assert watcher.wait(timeout=60) == 0

    attempts = [e for w in range(PROCESSES) for e in json.loads((tmp_path / f"w{w}.json").read_text())]
    applied = [e for e in attempts if e["outcome"] == "applied"]
    conflicts = [e for e in attempts if e["outcome"] == "conflict"]
    # Every attempt either applied or was recorded as a conflict.
    assert len(attempts) == PROCESSES * CYCLES
    assert len(applied) + len(conflicts) == len(attempts)
    assert applied, "no write got through"

    # The applied writes form one unbroken chain from the first version to what is on disk.
    successor = {}
    for e in applied:
        assert e["expected"] not in successor, "two writes were based on the same version: one was lost"
        successor[e["expected"]] = e["new"]
    chain, version = [], first.version
    while version in successor:
        version = successor[version]
        chain.append(version)
    final = (store.memory_dir / FILE).read_bytes()
    assert len(chain) == len(applied)
    assert version == version_of(final)
    text = final.decode()
    assert all(e["line"] in text for e in applied)
    assert not any(e["line"] in text for e in conflicts)

    # Every conflict is on record, once, with the writer's proposed bytes.
    records = {c.id: c for c in store.conflicts()}
    records.update({c.id: c for c in MemoryStore(store.memory_dir, other).conflicts()})
    assert set(records) == {e["id"] for e in conflicts}
    for e in conflicts:
        record = records[e["id"]]
        assert record.expected_version == e["expected"] != record.disk_version
        assert record.proposed.decode().endswith(e["line"])

    # No temp file left behind, and no reader ever saw a partial file.
    leftovers = [p.name for p in store.memory_dir.rglob("*.tmp")] + [
        p.name for p in store.state_dir.rglob("*.tmp")
    ]
    assert leftovers == []
    watched = json.loads((tmp_path / "watch.json").read_text())
    assert watched["reads"] > 0 and watched["bad"] == 0
    # The index shows the description of the last applied write, not one that lost the race.
    last = next(e for e in applied if e["new"] == version)
    assert (
        store.get(FILE).description == last["line"].replace("- worker ", "w").replace(" cycle ", " c").strip()
    )
    assert store.check_index().ok


def test_sigkill_mid_write_leaves_old_or_new_bytes(store: MemoryStore, tmp_path: Path) -> None:
    """A writer killed at any moment leaves the memory's old bytes or its new ones, never a
    mix. First a kill at each point of one write in turn, before and after each of its disk
    steps (the worker stops there and says which), then kills at random moments of a writer
    writing as fast as it can."""
    original = store.create(type="project", name="race", description="killed while writing")
    path = store.memory_dir / FILE
    a = "---\ndescription: version A\ntype: project\n---\n" + "a" * 400_000 + "\n"
    b = "---\ndescription: version B\ntype: project\n---\n" + "b" * 400_000 + "\n"
    (tmp_path / "a.md").write_text(a)
    (tmp_path / "b.md").write_text(b)
    content = {"a": a.encode(), "b": b.encode()}
    versions = {path.read_bytes(): original.description, content["a"]: "version A", content["b"]: "version B"}

    def churn(pause_at: int, first: str) -> subprocess.Popen[str]:
        """A writer of `first`, then of the other version, and so on."""
        files = [str(tmp_path / f"{n}.md") for n in (first, "b" if first == "a" else "a")]
        proc = start("churn", str(store.memory_dir), str(pause_at), *files, stdin=PIPE, stdout=PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    def kill(proc: subprocess.Popen[str]) -> bytes:
        """Kill it; what is on disk then must be one whole version, and read as that one."""
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        data = path.read_bytes()
        assert data in versions, "a torn memory"
        assert store.get(FILE).description == versions[data]
        return data

    def next_version() -> str:
        """The version the memory does not hold now: every write changes its bytes."""
        return "b" if path.read_bytes() == content["a"] else "a"

    points, mid_write = 0, 0
    while True:
        old, writing = path.read_bytes(), next_version()
        with churn(points + 1, writing) as proc:
            assert proc.stdout is not None
            said = proc.stdout.readline().split()
            assert said, "the writer said nothing"
            if said[0] == "done":  # a kill at every point of a write is behind us
                assert proc.wait(timeout=60) == 0
                assert path.read_bytes() == content[writing]
                break
            assert said[:2] == ["paused", str(points + 1)], said
            points += 1
            data = kill(proc)
        if said[2:4] == ["before", "replace"] and said[-1] == FILE:
            # Killed after the temp file was written whole, before it replaced the memory.
            temps = [t.read_bytes() for t in store.memory_dir.glob(f".{FILE}.*.tmp")]
            assert data == old and content[writing] in temps
            mid_write += 1
    assert mid_write, f"none of the {points} kills came between the temp file and its rename"

    rng = random.Random(7)
    for _ in range(12):
        with churn(0, next_version()) as proc:
            time.sleep(rng.uniform(0, 0.25))
            kill(proc)

    # A killed writer's temp file is hidden and never taken for a memory; the lock is not stuck,
    # and the next write of that memory clears the leftovers.
    assert store.files() == [FILE]
    current = store.read(FILE)
    store.write(FILE, a.replace("version A", "after the kills"), expected_version=current.version)
    assert store.get(FILE).description == "after the kills"
    assert list(store.memory_dir.glob("*.tmp")) == []
    assert store.check_index().ok


HOLD_SNAPSHOTS = """
import sys, time
from pathlib import Path
from sagemem.store.locking import exclusive
with exclusive(Path(sys.argv[1]) / "snapshots.lock", 30):
    print("held", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.02)
"""
TAKE_INDEX_LOCK = """
import sys
from pathlib import Path
from sagemem.store import guard
guard.LOCK_TIMEOUT = 3
with guard.file_lock(Path(sys.argv[1]) / "MEMORY.md"):
    print("taken")
"""


def test_a_rebuild_waiting_for_a_snapshot_holds_no_index_lock(store: MemoryStore, tmp_path: Path) -> None:
    """A rollback holds the snapshots' lock and then takes each file's: a rebuild that took
    the index's lock and then waited for the snapshots' would wait on it while it waits on
    the rebuild. While the rebuild waits for its snapshot, the index's lock is free."""
    import threading

    store.create(type="project", name="kept", description="a memory")
    (store.memory_dir / "MEMORY.md").write_text("# Memory\n\n- [Gone](project_gone.md) — deleted\n")
    stop = tmp_path / "stop"
    outcome: list[bool] = []
    rebuild = threading.Thread(target=lambda: outcome.append(store.rebuild_index()))
    hold = [sys.executable, "-c", HOLD_SNAPSHOTS, str(store.state_dir), str(stop)]
    with subprocess.Popen(hold, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            rebuild.start()
            rebuild.join(1.0)  # it is waiting for the snapshot now
            assert rebuild.is_alive()
            take = [sys.executable, "-c", TAKE_INDEX_LOCK, str(store.memory_dir)]
            taken = subprocess.run(take, capture_output=True, text=True)
            assert taken.stdout.strip() == "taken", taken.stderr
        finally:
            stop.touch()
    rebuild.join(30)
    assert outcome == [True]
    assert "project_gone.md" not in (store.memory_dir / "MEMORY.md").read_text()
    assert [s.label for s in store.snapshots()] == ["before index --rebuild"]
