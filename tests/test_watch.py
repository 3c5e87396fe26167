"""`sagemem watch` as a real process: problems appear and clear as files change."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sagemem import MemoryStore


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str]:
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            found.put(line.rstrip("\n"))

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


@pytest.mark.parametrize("layout", ["mem", "proj/.sagemem/memory"])
def test_watch_reports_problems_as_they_appear_and_clear(tmp_path: Path, layout: str) -> None:
    store = MemoryStore(tmp_path / layout)
    store.init()
    store.create(type="project", name="a", description="alpha")
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = lines_of(process)
        time.sleep(1.5)  # let the observer start
        broken = store.memory_dir / "project_b.md"
        temp = store.memory_dir / ".project_b.md.swp"
        temp.write_text("---\ndescription: [broken\n---\n")
        temp.rename(broken)  # an editor's atomic save
        wait_for(found, "+ unreadable: project_b.md")
        broken.write_text("---\ndescription: beta, fixed\n---\n\nSee [[nowhere]].\n")
        wait_for(found, "- unreadable: project_b.md", "+ broken-link: project_b.md")
        # The search cache follows too.
        assert [h.file for h in store.search("beta fixed").hits] == ["project_b.md"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()
        process.stdout.close() if process.stdout else None
        process.stderr.close()


def test_watch_needs_a_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(tmp_path / "none"), "watch"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
    )
    assert done.returncode == 1 and "run `sagemem init`" in done.stderr
