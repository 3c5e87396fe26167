"""Reading and writing memory and state files safely.

Reads pass one gate: `lstat` first (never `stat`), so a symlink or a non-regular file is
refused before it is opened, and a file over its size cap is refused before it is read; the
open itself neither follows a link nor waits on a FIFO swapped in meanwhile. Every read has
a cap: a memory directory or a state directory may arrive with a cloned repository.
Folders in a state directory are made and entered through `safe_folder`, which refuses a
link anywhere below the state directory, so nothing is written outside it.

Writes are atomic: a unique temp file in the same directory, fsync, `os.replace` (or a hard
link for create-only), then fsync of the directory; the temp file is removed on every
failure path. A reader therefore sees the old bytes or the new bytes, never a mix. A write
that fails names the file and the operation (`StorageError`).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import stat
import sys
from pathlib import Path

from .errors import InvalidMemory, MemoryNotFound, StorageError, UnsafePath

MAX_FILE_BYTES = 512 * 1024  # a memory file
MAX_ARCHIVED_BYTES = MAX_FILE_BYTES + 16 * 1024  # an archived one: its trace keys may take it past the cap
MAX_INDEX_FILE_BYTES = 4 * 1024 * 1024  # MEMORY.md: one line per memory, for tens of thousands
MAX_COPY_BYTES = max(MAX_ARCHIVED_BYTES, MAX_INDEX_FILE_BYTES)  # a file a snapshot or rollback copies
TEMP_SUFFIX = ".tmp"
_READ_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
)


def read_bytes(path: Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the memory file at `path`, refusing links, specials and oversize files
    (`InvalidMemory` naming the file; `MemoryNotFound` when there is none)."""
    try:
        return _read_regular(path, limit)
    except FileNotFoundError:
        raise MemoryNotFound(path.name) from None
    except _Refused as refused:
        raise InvalidMemory(path.name, refused.rule) from None


def read_state(path: Path, limit: int, *, under: Path | None = None) -> bytes | None:
    """The bytes of a file sagemem keeps (settings, ledgers, conflicts, manifests), None when
    there is none; a link, a special file or one over `limit` is `UnsafePath`. With `under`
    (the state dir), every folder from it down to the file must be a real one, as
    `safe_folder` checks, or the file is not read at all."""
    if under is not None:
        safe_folder(under, *path.parent.relative_to(under).parts, create=False)
    try:
        return _read_regular(path, limit)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except _Refused as refused:
        raise UnsafePath(path, refused.rule) from None


def read_config(path: Path, limit: int = 4 * 1024 * 1024) -> bytes | None:
    """A harness's settings file, None when there is none. A link is followed (a dotfiles
    folder is a person's own choice), but what it ends at must be a regular file under
    `limit`: a project's settings come with its clone, and a link there to `/dev/zero` or a
    FIFO must not hang `install` or `doctor`. `UnsafePath` otherwise."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePath(path, "is not a regular file")
    if info.st_size > limit:
        raise UnsafePath(path, f"is larger than {_size(limit)} ({info.st_size} bytes)")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UnsafePath(path, "is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafePath(path, f"is larger than {_size(limit)}")
    return data


class _Refused(Exception):
    def __init__(self, rule: str) -> None:
        self.rule = rule


def _read_regular(path: Path, limit: int) -> bytes:
    info = os.lstat(path)
    _regular(info.st_mode)
    if info.st_size > limit:
        raise _Refused(f"file is larger than {_size(limit)} ({info.st_size} bytes)")
    fd = os.open(path, _READ_FLAGS)
    with open(fd, "rb") as handle:
        # Re-check on the open handle: the path may have been swapped after lstat.
        _regular(os.fstat(handle.fileno()).st_mode)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise _Refused(f"file is larger than {_size(limit)}")
    return data


def check_regular(path: Path, mode: int) -> None:
    try:
        _regular(mode)
    except _Refused as refused:
        raise InvalidMemory(path.name, refused.rule) from None


def _regular(mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise _Refused("is a symbolic link; links are refused")
    if not stat.S_ISREG(mode):
        raise _Refused("is not a regular file")


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def safe_folder(root: Path, *parts: str, create: bool = True) -> Path:
    """`root/parts...`, made where missing (with `create`), refusing (`UnsafePath`) a link or a
    file at `root` or at any folder below it: a state directory that came with a clone may
    hold links meant to make sagemem write elsewhere. Folders above `root` are the person's
    own choice (a linked home or dotfiles folder is fine)."""
    path = root
    for depth in range(len(parts) + 1):
        if depth:
            path = path / parts[depth - 1]
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            if not create:
                return root.joinpath(*parts)
            try:
                os.makedirs(path) if depth == 0 else os.mkdir(path)
                continue
            except FileExistsError:
                info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(path, "is a symbolic link; sagemem does not follow links in its state directory")
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafePath(path, "is not a directory")
    return path


def write_atomic(path: Path, data: bytes, *, create_only: bool = False, durable: bool = True) -> None:
    """Put `data` at `path` in one step. With `create_only`, fail if `path` exists. Not
    `durable`: no fsync, for state that may be lost in a power cut but never half written
    (a session's ledger): the rename is still atomic, and two fsyncs cost the prompt hook
    milliseconds on many disks."""
    try:
        mode = _mode_for(path)
        fd, temp = _temp_beside(path)
    except FileExistsError:
        raise
    except OSError as exc:
        raise StorageError(path, "creating a temp file to write", exc) from exc
    step = "writing"
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(temp, mode)
        step = "replacing"
        if create_only:
            _link_new(temp, path)
        else:
            os.replace(temp, path)
        if durable:
            fsync_dir(path.parent)
    except FileExistsError:
        raise  # create-only found the name taken: the caller's case, not a storage failure
    except OSError as exc:
        raise StorageError(path, step, exc) from exc
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
    """The process's umask, learned without changing it where the system says what it is.
    `os.umask` only sets it, and setting it then putting it back is not safe beside threads
    (the UI server's): a file another thread makes in between gets the passing mask, and two
    threads doing it at once can leave the wrong one set for good. Nor can it be learned once
    at import: the resident process's children take the hook's (`agents/resident.py`).
    Linux says it in /proc/self/status (since 4.7; about 8 µs, against an fsync's
    milliseconds). Elsewhere it is set and put back under a lock, so two of ours never
    interleave, and the passing mask is the most private one, so what another thread makes
    in between is private, never open to others."""
    found = _status_umask() if _PROC_STATUS else None
    if found is not None:
        return found
    with _UMASK_LOCK:
        current = os.umask(0o077)
        os.umask(current)
    return current


def _status_umask() -> int | None:
    """The `Umask:` line of /proc/self/status; None where there is none (no /proc mounted,
    a kernel before 4.7)."""
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY)
    except OSError:
        return None
    try:
        head = os.read(fd, 4096)  # `Umask:` is the second line, after the program's name
    except OSError:
        return None
    finally:
        os.close(fd)
    at = head.find(b"\nUmask:")
    end = head.find(b"\n", at + 1)
    if at < 0 or end < 0:
        return None
    try:
        return int(head[at + len(b"\nUmask:") : end], 8)
    except ValueError:
        return None


_PROC_STATUS = sys.platform.startswith("linux")
_UMASK_LOCK = _thread.allocate_lock()  # `_thread`: no import on the hook's path
