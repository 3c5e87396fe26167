"""One cross-process lock, cheap to take: `flock` where the system has it, else `filelock`.

The hook path takes a lock on every prompt (the session ledger), so it must not pay for
importing `filelock` (tens of milliseconds) where a system call will do. The lock is held by
an open file description, so the kernel releases it when a holder dies, even by SIGKILL.
Lock files live in state folders that may have come with a clone: one is never opened
through a link, and one that is not a regular file is refused. The caller makes the folder
(`files.safe_folder`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import SagememError, UnsafePath

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
FLOCK = fcntl is not None  # a file itself can be locked (`hold`)


@contextmanager
def exclusive(path: Path, timeout: float) -> Iterator[None]:
    """Hold the lock file `path` (created if needed, in a folder that exists) for the block;
    give up after `timeout` s."""
    if fcntl is None:
        import filelock

        try:
            with filelock.FileLock(str(path), timeout=timeout):
                yield
        except filelock.Timeout:
            raise _timed_out(path, timeout) from None
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError:
        if os.path.islink(path):
            raise UnsafePath(path, "is a symbolic link; a lock file is never opened through one") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(path, "is not a regular file; it cannot be a lock file")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _timed_out(path, timeout) from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)


def hold(fd: int, *, shared: bool, timeout: float) -> bool:
    """Lock the open file `fd` itself, shared or exclusive, until it is closed; waits up to
    `timeout` s. False where it could not: another holder kept it, or no `flock` here."""
    if fcntl is None:
        return False
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)


class LockTimeout(SagememError):
    """Another process held the lock for longer than the caller would wait."""


def _timed_out(path: Path, timeout: float) -> SagememError:
    return LockTimeout(f"{path.stem}: another process has held the lock for {timeout:.0f} s")
