"""A progress bar for long operations in a terminal (a large index build, `bench`, `eval`).

click draws it (`click.progressbar`). This adds what click leaves to its caller. The library
never draws: it takes a callback, `bar(done, total[, label])`, and the CLI passes one of
these, which feeds click's bar. The bar is shown on stderr only when stderr is a terminal,
and only once the operation has run for a second, so quick calls, pipes, hooks and logs
never see it.
"""

from __future__ import annotations

import atexit
import sys
import time
from typing import TYPE_CHECKING, TextIO

import click

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

WIDTH = 24
DELAY = 1.0
INTERVAL = 0.1  # at most ten lines a second: a callback may come for every file


class Bar:
    """`bar(done, total)` reports progress; `bar.label` says what is being done."""

    def __init__(self, label: str, stream: TextIO | None = None, *, delay: float = DELAY) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.delay = delay
        self.drawn = 0.0
        self.shown: ProgressBar[int] | None = None  # click's bar, once drawn

    @classmethod
    def for_terminal(cls, label: str) -> Bar | None:
        """A bar if stderr is a terminal, else None (nothing to draw)."""
        return cls(label) if sys.stderr.isatty() else None

    def __call__(self, done: int, total: int, label: str | None = None) -> None:
        now = time.monotonic()
        if label is not None and label != self.label:
            self._finish()  # a new step of the work: a line of its own
            self.label = label
        finished = total > 0 and done >= total
        if now - self.started < self.delay or (now - self.drawn < INTERVAL and not finished):
            return
        if self.shown is None:
            self.shown = click.progressbar(
                length=total,
                label=self.label,
                file=self.stream,
                width=WIDTH,
                fill_char="#",
                empty_char=".",
                bar_template="%(label)s [%(bar)s] %(info)s",
                show_pos=True,
                show_percent=False,
                show_eta=False,
            )
            # click hides the cursor while it draws: shown again at exit, should the work be
            # interrupted (Ctrl-C) before the bar is full.
            atexit.register(self._finish)
        # The position is absolute, as the library reports it; the total may change under
        # one label (`eval` indexes, then asks its questions).
        self.shown.length, self.shown.pos = total, done
        self.shown.render_progress()
        self.drawn = now
        if finished:
            self._finish()

    def _finish(self) -> None:
        if self.shown is not None:
            self.shown.render_finish()  # the line ends, the cursor is shown
            self.shown, self.drawn = None, 0.0
            atexit.unregister(self._finish)
