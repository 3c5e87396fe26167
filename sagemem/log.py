"""A small log of failures that must not interrupt the work (an unwritable ledger, say).

Each distinct message is written once, to `<state>/sagemem.log`, or where the state dir cannot
be written to the user's cache dir, or to a private folder in the system temp dir (a sandbox
may allow nothing else); a failure to log is itself ignored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from .config import temp_dir, user_cache_dir

LOG_NAME = "sagemem.log"


def log_once(state_dir: Path, message: str, name: str = LOG_NAME, *, once: bool = True) -> Path | None:
    """Append `message` to the log `name` (unless `once` and it is already there); returns the
    log written, if any."""
    line = " ".join(message.split())
    for folder in _folders(state_dir):
        path = folder / name
        try:
            if (
                once
                and path.is_file()
                and any(old.endswith(f" {line}") for old in path.read_text("utf-8").splitlines())
            ):
                return path
            folder.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"{dt.datetime.now().isoformat(timespec='seconds')} {line}\n")
            return path
        except OSError:
            continue
    return None


def _folders(state_dir: Path) -> Iterator[Path]:
    yield state_dir
    yield user_cache_dir()
    temp = temp_dir()  # created only when the others failed
    if temp is not None:
        yield temp
