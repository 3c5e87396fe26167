"""A small log of failures that must not interrupt the work (an unwritable ledger, say).

Each distinct message is written once, to `<state>/sagemem.log`, or where the state dir cannot
be written to the user's cache dir, or to a private folder in the system temp dir (a sandbox
may allow nothing else); a failure to log is itself ignored. A log is never opened through a
link (the state dir may have come with a clone), and past `MAX_LOG_BYTES` it starts afresh
with the old one kept as `<name>.1`, so a hook failing on every prompt cannot fill a disk.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .config import temp_dir, user_cache_dir
from .errors import SagememError, UnsafePath
from .files import read_state, safe_folder

LOG_NAME = "sagemem.log"
MAX_LOG_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def log_once(state_dir: Path, message: str, name: str = LOG_NAME, *, once: bool = True) -> Path | None:
    """Append `message` to the log `name` (unless `once` and it is already there); returns the
    log written, if any."""
    line = " ".join(message.split())[:MAX_LINE_CHARS]
    for folder in _folders(state_dir):
        path = folder / name
        try:
            safe_folder(folder)
            if once and any(old.endswith(f" {line}") for old in _lines(path)):
                return path
            _append(path, f"{dt.datetime.now().isoformat(timespec='seconds')} {line}\n")
            return path
        except (OSError, SagememError):
            continue
    return None


def _lines(path: Path) -> list[str]:
    try:
        data = read_state(path, MAX_LOG_BYTES + MAX_LINE_CHARS * 4 + 64)
    except UnsafePath:
        if path.is_symlink() or not path.is_file():
            raise
        return []  # over its size: `_append` starts it afresh
    return [] if data is None else data.decode("utf-8", "replace").splitlines()


def _append(path: Path, text: str) -> None:
    for _ in range(2):
        fd = os.open(path, _APPEND, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SagememError(f"{path}: is not a regular file; nothing is logged there")
            if info.st_size < MAX_LOG_BYTES:
                os.write(fd, text.encode("utf-8", "replace"))
                return
        finally:
            os.close(fd)
        os.replace(path, path.with_name(path.name + ".1"))


def _folders(state_dir: Path) -> Iterator[Path]:
    yield state_dir
    yield user_cache_dir()
    temp = temp_dir()  # created only when the others failed
    if temp is not None:
        yield temp
