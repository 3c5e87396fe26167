"""Watching a memory directory: report health problems as they appear and clear, and keep
the search cache current.

File events (from `watchdog`) are gathered for a short quiet spell before anything is read,
so an editor's burst (write a temp file, rename it over the memory) is handled once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..care.health import Finding
from ..memory_store import MemoryStore
from ..store.errors import SagememError

QUIET_SECONDS = 0.3


def key(finding: Finding) -> tuple[str, str, int | None, str]:
    return (finding.check, finding.file, finding.line, finding.message)


def changes(before: Iterable[Finding], after: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
    """The findings that appeared, and those that cleared."""
    old = {key(f): f for f in before}
    new = {key(f): f for f in after}
    return [f for k, f in new.items() if k not in old], [f for k, f in old.items() if k not in new]


def observe(folder: Path, changed: Callable[[], None]) -> Any:
    """Start a `watchdog` observer that calls `changed` on any change to a file in `folder`,
    hidden names (the `.sagemem` state and lock folder, editors' temp files) aside; returns it
    (None when watchdog is not installed). An editor's atomic save still counts: its rename's
    destination is the memory."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return None

    class Handler(FileSystemEventHandler):  # type: ignore[misc]
        def on_any_event(self, event: object) -> None:
            names = {
                Path(str(p)).name
                for p in (getattr(event, "src_path", ""), getattr(event, "dest_path", ""))
                if p
            }
            if any(name and not name.startswith(".") for name in names):
                changed()

    observer = Observer()
    observer.daemon = True
    # Top level only: memories live there; watching the state and lock folders inside would
    # only add watches that come and go with their temp files.
    observer.schedule(Handler(), str(folder), recursive=False)
    observer.start()
    return observer


def watch(store: MemoryStore, report: Callable[[str], None], stop: threading.Event) -> None:
    """Report health changes until `stop` is set: "+ problem" when one appears, "- cleared"
    when it goes. The first report lists what is wrong now."""
    changed = threading.Event()
    current = list(store.check().findings)
    for finding in current:
        report(_line("+", finding))
    store.corpus().close()  # brings the search index up to date
    observer = observe(store.memory_dir, changed.set)
    if observer is None:
        raise SagememError("watching needs the watchdog package: pip install watchdog")
    try:
        while not stop.is_set():
            if not changed.wait(0.2):
                continue
            while changed.is_set():  # wait for a quiet spell
                changed.clear()
                if stop.wait(QUIET_SECONDS):
                    return
            try:
                fresh = list(store.check().findings)
                store.corpus().close()  # keeps the search index current
            except Exception as exc:  # a half-written directory: report, go on watching
                report(f"! {exc}")
                continue
            appeared, cleared = changes(current, fresh)
            for finding in appeared:
                report(_line("+", finding))
            for finding in cleared:
                report(_line("-", finding))
            current = fresh
    finally:
        observer.stop()
        observer.join(timeout=5)


def _line(sign: str, finding: Finding) -> str:
    where = f"{finding.file}:{finding.line}" if finding.line else finding.file
    return f"{sign} {finding.check}: {where}: {finding.message}"
