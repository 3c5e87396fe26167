"""`sagemem watch` as a real process: problems appear and clear as files change, and Ctrl-C
stops it, wherever it lands."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from sagemem import MemoryStore
from sagemem.cli.watch import watch

BROKEN = "---\ndescription: [broken\n---\n"


def lines_of(stream: IO[str] | None) -> queue.Queue[str]:
    """The stream's lines as they come; an empty string at its end."""
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert stream is not None
        for line in stream:
            found.put(line.rstrip("\n") or " ")
        found.put("")

    threading.Thread(target=pump, daemon=True).start()
    return found


def wait_for(found: queue.Queue[str], *texts: str, seconds: float = 20) -> list[str]:
    """Read lines until each of `texts` was in one (in any order)."""
    missing, seen = list(texts), []
    deadline = time.monotonic() + seconds
    while missing and time.monotonic() < deadline:
        try:
            line = found.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(line)
        missing = [t for t in missing if t not in line]
    assert not missing, f"no line with {missing} within {seconds} s; saw {seen}"
    return seen


def rest(found: queue.Queue[str]) -> str:
    """The lines left, up to the stream's end (the process has exited)."""
    lines = list(iter(lambda: found.get(timeout=20), ""))
    return "\n".join(lines)


@pytest.mark.parametrize("layout", ["mem", "proj/.sagemem/memory"])
def test_watch_reports_problems_as_they_appear_and_clear(tmp_path: Path, layout: str) -> None:
    """No wait for the watcher to start: a change made while it starts is reported too."""
    store = MemoryStore(tmp_path / layout)
    store.init()
    store.create(type="project", name="a", description="alpha")
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with process:
        found, errors = lines_of(process.stdout), lines_of(process.stderr)
        try:
            broken = store.memory_dir / "project_b.md"
            temp = store.memory_dir / ".project_b.md.swp"
            temp.write_text(BROKEN)
            temp.rename(broken)  # an editor's atomic save
            wait_for(found, "+ unreadable: project_b.md")
            broken.write_text("---\ndescription: beta, fixed\n---\n\nSee [[nowhere]].\n")
            wait_for(found, "- unreadable: project_b.md", "+ broken-link: project_b.md")
            # The search cache follows too.
            assert [h.file for h in store.search("beta fixed").hits] == ["project_b.md"]
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=20) == 0
        rest(found)
        assert "Traceback" not in rest(errors)


def test_a_change_while_the_watcher_starts_is_reported(tmp_path: Path) -> None:
    """A file changed after the first check read the directory, before the watcher had begun
    to watch it, is still reported."""
    broken = tmp_path / "mem" / "project_b.md"

    class ChangedAfterTheFirstCheck(MemoryStore):
        checks = 0

        def check(self, **kwargs: Any) -> Any:
            report = super().check(**kwargs)
            self.checks += 1
            if self.checks == 1:
                broken.write_text(BROKEN)
            return report

    store = ChangedAfterTheFirstCheck(tmp_path / "mem")
    store.init()
    store.create(type="project", name="a", description="alpha")
    found: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(store, found.put, stop), daemon=True)
    watcher.start()
    try:
        wait_for(found, "+ unreadable: project_b.md")
    finally:
        stop.set()
        watcher.join(20)
    assert not watcher.is_alive()


DROPPED_INTERRUPT = """
import sys, threading, time
from sagemem import MemoryStore
from sagemem.cli.watch import watch

class Slow:
    def __del__(self):
        print("in __del__", flush=True)
        until = time.monotonic() + 60
        while time.monotonic() < until:  # Ctrl-C lands here, where Python can only drop it
            time.sleep(0.01)

first = True

def report(line):
    global first
    print(line, flush=True)
    if first:
        first = False
        Slow()  # dropped at once: its __del__ runs now

watch(MemoryStore(sys.argv[1]), report, threading.Event())
print("stopped", flush=True)
"""


def test_ctrl_c_stops_the_watcher_even_where_python_drops_the_interrupt(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised in a `__del__` (or in the import system's weakref callbacks,
    where a Ctrl-C during a lazy import lands) is printed and dropped: the watcher still stops."""
    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_b.md").write_text(BROKEN)  # a first report to make
    process = subprocess.Popen(
        [sys.executable, "-c", DROPPED_INTERRUPT, str(store.memory_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with process:
        found, errors = lines_of(process.stdout), lines_of(process.stderr)
        try:
            wait_for(found, "in __del__")
        finally:
            process.send_signal(signal.SIGINT)
            try:
                assert process.wait(timeout=20) == 0
            finally:
                process.kill()
        assert "stopped" in rest(found)
        assert "KeyboardInterrupt" in rest(errors)  # it was dropped, as said


def test_watch_needs_a_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(tmp_path / "none"), "watch"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
    )
    assert done.returncode == 1 and "run `sagemem init`" in done.stderr
