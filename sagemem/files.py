"""Reading and writing memory files safely.

Reads pass one gate: `lstat` first (never `stat`), so a symlink or a non-regular file is
refused before it is opened, and a file over the size cap is refused before it is read.
Writes are atomic: a unique temp file in the same directory, fsync, `os.replace` (or a hard
link for create-only), then fsync of the directory; the temp file is removed on every
failure path. A reader therefore sees the old bytes or the new bytes, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import InvalidMemory, MemoryNotFound

MAX_FILE_BYTES = 512 * 1024
TEMP_SUFFIX = ".tmp"


def read_bytes(path: Path, *, limit: int | None = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path`, refusing links, specials and oversize files."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise MemoryNotFound(path.name) from None
    check_regular(path, info.st_mode)
    if limit is not None and info.st_size > limit:
        raise InvalidMemory(path.name, f"file is larger than {limit // 1024} KiB ({info.st_size} bytes)")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MemoryNotFound(path.name) from None
    with open(fd, "rb") as handle:
        # Re-check on the open handle: the path may have been swapped after lstat.
        check_regular(path, os.fstat(handle.fileno()).st_mode)
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise InvalidMemory(path.name, f"file is larger than {limit // 1024} KiB")
    return data


def check_regular(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise InvalidMemory(path.name, "is a symbolic link; links are refused")
    if not stat.S_ISREG(mode):
        raise InvalidMemory(path.name, "is not a regular file")


def write_atomic(path: Path, data: bytes, *, create_only: bool = False) -> None:
    """Put `data` at `path` in one step. With `create_only`, fail if `path` exists."""
    mode = _mode_for(path)
    fd, temp = _temp_beside(path)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        if create_only:
            _link_new(temp, path)
        else:
            os.replace(temp, path)
        fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new, private temp file next to `path` (what `tempfile.mkstemp` does, without the
    import: the hook writes its ledgers with this on every prompt)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        temp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}{TEMP_SUFFIX}")
        try:
            return os.open(temp, flags, 0o600), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temp file name")


def _link_new(temp: str, path: Path) -> None:
    """Give `temp` the name `path` only if nothing has that name: link() fails if it exists."""
    try:
        os.link(temp, path)
    except FileExistsError:
        raise
    except OSError:
        # Filesystems without hard links: check, then rename (the caller holds the file lock).
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.replace(temp, path)


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mode_for(path: Path) -> int:
    """Keep an existing file's permissions; new files get 0o666 less the umask, like open()."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0o666 & ~_umask()
    # A link's own mode is 0o777 and says nothing: the new file gets the default.
    return 0o666 & ~_umask() if stat.S_ISLNK(info.st_mode) else stat.S_IMODE(info.st_mode)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
