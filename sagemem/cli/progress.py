"""A progress bar for long operations in a terminal (a large index build, `bench`, `eval`).

It draws on stderr only when stderr is a terminal, and only once the operation has run for
a second, so quick calls, pipes, hooks and logs never see it. The library never draws: it
takes a callback, and the CLI passes one of these.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24
DELAY = 1.0
INTERVAL = 0.1


class Bar:
    """`bar(done, total)` reports progress; `bar.label` says what is being done."""

    def __init__(self, label: str, stream: TextIO | None = None, *, delay: float = DELAY) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.delay = delay
        self.drawn = 0.0
        self.visible = False

    @classmethod
    def for_terminal(cls, label: str) -> Bar | None:
        """A bar if stderr is a terminal, else None (nothing to draw)."""
        return cls(label) if sys.stderr.isatty() else None

    def __call__(self, done: int, total: int, label: str | None = None) -> None:
        now = time.monotonic()
        if label is not None and label != self.label:
            self._finish()
            self.label, self.drawn = label, 0.0
        finished = total > 0 and done >= total
        if now - self.started < self.delay or (now - self.drawn < INTERVAL and not finished):
            return
        share = done / total if total > 0 else 0.0
        filled = int(WIDTH * share)
        line = f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}"
        self.stream.write(line)
        self.stream.flush()
        self.drawn, self.visible = now, True
        if finished:
            self._finish()

    def _finish(self) -> None:
        if self.visible:
            self.stream.write("\n")
            self.stream.flush()
            self.visible = False
