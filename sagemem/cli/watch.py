"""Watching a memory directory: report health problems as they appear and clear, and keep
the search cache current.

File events (from `watchdog`) are gathered for a short quiet spell before anything is read,
so an editor's burst (write a temp file, rename it over the memory) is handled once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..care.health import Finding
from ..memory_store import MemoryStore
from ..store.errors import SagememError

QUIET_SECONDS = 0.3
STOP_SECONDS = 2.0


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

    class Handler(FileSystemEventHandler):
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
    """Report health changes until `stop` is set or Ctrl-C: "+ problem" when one appears,
    "- cleared" when it goes. The first report lists what is wrong now.

    The observer starts before that first check, so a change made while the check runs is
    seen (one made between the check and the observer's start would go unreported until the
    next change)."""
    changed = threading.Event()
    with _noting_interrupts() as interrupted:
        observer = observe(store.memory_dir, changed.set)
        if observer is None:
            raise SagememError("watching needs the watchdog package: pip install watchdog")
        try:
            _follow(store, report, changed, lambda: stop.is_set() or bool(interrupted), stop)
        finally:
            _stop(observer)


def _follow(
    store: MemoryStore,
    report: Callable[[str], None],
    changed: threading.Event,
    stopped: Callable[[], bool],
    stop: threading.Event,
) -> None:
    """The first report, then one after each change, once a quiet spell has passed."""
    current = list(store.check().findings)
    for finding in current:
        report(_line("+", finding))
    store.corpus().close()  # brings the search index up to date
    while not stopped():
        if not changed.wait(0.2):
            continue
        while changed.is_set():  # wait for a quiet spell
            changed.clear()
            if stop.wait(QUIET_SECONDS) or stopped():
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


@contextlib.contextmanager
def _noting_interrupts() -> Iterator[list[int]]:
    """Ctrl-C raises KeyboardInterrupt as usual, and is also noted in the list yielded: Python
    drops an exception raised where no caller can catch it (a `__del__`, a weakref callback
    such as the import system's module locks), and the watch loop, seeing the note, stops
    anyway. Only in the main thread, where signals are handled, and only over Python's own
    handler."""
    noted: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        noted.append(signum)  # a plain list: a lock taken in a signal handler can deadlock
        raise KeyboardInterrupt

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield noted
        return
    signal.signal(signal.SIGINT, interrupt)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _stop(observer: Any) -> None:
    """Stop the observer, waiting for it a few seconds at most: watchdog's `stop` joins its
    emitter threads without a timeout, and a person who pressed Ctrl-C expects the prompt back
    at once. Its threads are daemons: one still stuck does not keep the process alive."""
    stopping = threading.Thread(target=observer.stop, daemon=True)
    stopping.start()
    stopping.join(STOP_SECONDS)
    observer.join(STOP_SECONDS)


def _line(sign: str, finding: Finding) -> str:
    where = f"{finding.file}:{finding.line}" if finding.line else finding.file
    return f"{sign} {finding.check}: {where}: {finding.message}"
