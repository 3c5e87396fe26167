"""A small log of failures that must not interrupt the work (an unwritable ledger, say).

Each distinct message is written once, to `<state>/sagemem.log`, or to the user's cache dir
where the state dir cannot be written; a failure to log is itself ignored.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from .config import user_cache_dir

LOG_NAME = "sagemem.log"


def log_once(state_dir: Path, message: str) -> Path | None:
    """Append `message` unless it is already in the log; returns the log written, if any."""
    line = " ".join(message.split())
    for folder in (state_dir, user_cache_dir()):
        path = folder / LOG_NAME
        try:
            if path.is_file() and any(
                old.endswith(f" {line}") for old in path.read_text("utf-8").splitlines()
            ):
                return path
            folder.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"{dt.datetime.now().isoformat(timespec='seconds')} {line}\n")
            return path
        except OSError:
            continue
    return None
