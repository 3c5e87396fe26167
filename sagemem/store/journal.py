"""The change journal: which memory files of a directory changed since a mark, known without
looking at every file, as git's fsmonitor knows it for `git status`.

The resident process (`agents/daemon.py`) keeps one `Journal` for the directories its hooks
use: an inotify watch on each (Linux, through `inotify_simple`), and for each a random token,
a generation that grows with every batch of events, and the generation at which each name
last changed. It reads every event the kernel has queued before it starts a hook, and the
hook inherits that state: an event is queued by the time the write or rename that caused it
returns, so a change made before the hook was asked for is in it. The search index stores
the mark (token and generation) as of which it matched the directory; the next hook asks
`since(folder, mark)` and looks only at those names instead of listing every file.

It says "look at everything" (None) whenever it cannot be sure: a directory not watched yet,
or whose first scan is not done; a mark of another token (another process's journal, an
index from another machine or a clone, one written before the watch began); a directory that
is no longer the one watched (deleted, moved, a link retargeted); a queue overflow; a
filesystem whose changes may come from elsewhere (NFS, SMB, FUSE, a VM's shared folder).
Two things inotify does not see are covered by scans of the directory, done a slice at a
time while the process is idle: a write through a hard link in another folder (every name
with more than one link is looked at on every call) and a write through a memory map (seen
by the next scan, within `RESCAN_SECONDS`). The journal lives in that process's memory only:
nothing a clone brings can forge it.
"""

from __future__ import annotations

import os
import stat
import time

from .names import is_memory_name

# Filesystems whose every change is made through this kernel, so inotify sees it.
LOCAL_FILESYSTEMS = frozenset(
    "ext2 ext3 ext4 xfs btrfs tmpfs ramfs f2fs zfs bcachefs jfs reiserfs nilfs2 overlay".split()
)
MAX_WATCHED = 64  # directories; the least recently used is let go beyond it
RESCAN_SECONDS = 60.0  # at least; a scan takes at most a two-hundredth of the time between
SCAN_SLICE = 500  # entries scanned between two looks at the requests


class _Watched:
    """One watched directory."""

    def __init__(self, folder: str, wd: int, identity: tuple[int, int], token: str) -> None:
        self.folder, self.wd, self.identity, self.token = folder, wd, identity, token
        self.generation = 0
        self.changed: dict[str, int] = {}  # name -> the generation it last changed in
        self.stamps: dict[str, tuple[int, ...]] | None = None  # the last complete scan's
        self.linked: frozenset[str] = frozenset()  # names with more than one link
        self.scan: os._ScandirIterator[str] | None = None  # typeshed's name for what scandir gives
        self.scanning: dict[str, tuple[int, ...]] = {}
        self.scanned_at = 0.0  # when the last complete scan ended (time.monotonic())
        self.scan_seconds = 0.0  # what it cost
        self.used = time.monotonic()


class Journal:
    """The change journal of the directories watched (see the module docstring)."""

    def __init__(self) -> None:
        from inotify_simple import INotify, flags  # Linux only: ImportError or OSError elsewhere

        self._inotify = INotify(nonblocking=True)
        self._mask = (
            flags.CREATE
            | flags.DELETE
            | flags.MODIFY
            | flags.ATTRIB
            | flags.CLOSE_WRITE
            | flags.MOVED_FROM
            | flags.MOVED_TO
            | flags.DELETE_SELF
            | flags.MOVE_SELF
            | flags.ONLYDIR
        )
        self._lost = flags.DELETE_SELF | flags.MOVE_SELF | flags.IGNORED | flags.UNMOUNT
        self._overflow = flags.Q_OVERFLOW
        self._by_wd: dict[int, _Watched] = {}
        self._by_folder: dict[str, _Watched] = {}
        # Grows with every change to what the journal would answer: a copy made at one
        # version answers as this one does while the version stays the same.
        self.version = 0

    def fileno(self) -> int:
        return self._inotify.fileno()

    def close(self) -> None:
        for watched in list(self._by_folder.values()):
            if watched.scan is not None:
                watched.scan.close()
        self._by_folder.clear()
        self._by_wd.clear()
        self._inotify.close()

    @property
    def scanning(self) -> bool:
        """Whether a scan is under way (`scan_step` has more to do now)."""
        return any(watched.scan is not None for watched in self._by_folder.values())

    @property
    def folders(self) -> list[str]:
        return sorted(self._by_folder)

    def watch(self, folder: str) -> bool:
        """Watch `folder` (an absolute path) if it is not watched already, or watch it again
        when its path now leads to another directory. False when it cannot be watched: gone,
        not a directory, on a filesystem whose changes may come from elsewhere, or over the
        system's watch limit. The first scan begins; the journal answers once it is done."""
        self.drain()  # events of a watch removed before are not taken for a new one's
        known = self._by_folder.get(folder)
        if known is not None and _identity(folder) == known.identity:
            known.used = time.monotonic()
            return True
        if known is not None:
            self._forget(known)
        before = _identity(folder)
        if before is None or not _local(folder):
            return False
        try:
            wd = self._inotify.add_watch(folder, self._mask)
        except OSError:
            return False
        if _identity(folder) != before or wd in self._by_wd:
            # The path changed between the two looks, or it is a second path to a directory
            # watched already (one watch per inode): neither is trusted.
            if wd not in self._by_wd:
                self._remove_watch(wd)
            return False
        watched = _Watched(folder, wd, before, os.urandom(8).hex())
        watched.scan = os.scandir(folder)
        self._by_wd[wd] = self._by_folder[folder] = watched
        self.version += 1
        while len(self._by_folder) > MAX_WATCHED:
            self._forget(min(self._by_folder.values(), key=lambda w: w.used))
        return True

    def drain(self) -> None:
        """Take in every event queued so far. Each watched directory that had any moves to a
        new generation."""
        touched: set[_Watched] = set()
        for event in self._inotify.read(timeout=0):
            if event.mask & self._overflow:  # events were lost: nothing said before counts
                for gone in list(self._by_folder.values()):
                    self._forget(gone)
                touched.clear()
                continue
            watched = self._by_wd.get(event.wd)
            if watched is None:
                continue
            if event.mask & self._lost:
                self._forget(watched)
                touched.discard(watched)
            elif event.name and is_memory_name(event.name):
                watched.changed[event.name] = watched.generation + 1
                touched.add(watched)
        for watched in touched:
            watched.generation += 1
        self.version += bool(touched)

    def scan_step(self) -> bool:
        """Scan one slice of one directory due for a scan; True while any scan is under way
        or due (call again when idle), False when every scan is done."""
        now = time.monotonic()
        for watched in self._by_folder.values():
            if watched.scan is None and watched.stamps is not None:
                every = max(RESCAN_SECONDS, 200 * watched.scan_seconds)
                if now - watched.scanned_at >= every:
                    try:
                        watched.scan = os.scandir(watched.folder)
                    except OSError:
                        self._forget(watched)
                        return True
                    watched.scanning, watched.scan_seconds = {}, 0.0
            if watched.scan is not None:
                self._scan_slice(watched)
                return True
        return False

    def mark(self, folder: str) -> str | None:
        """What an index that now matches `folder` may store, to ask `since` later; None when
        the journal cannot answer for it (the caller then asks for it to be watched)."""
        watched = self._usable(folder)
        return None if watched is None else f"{watched.token}:{watched.generation}"

    def since(self, folder: str, mark: object) -> list[str] | None:
        """The names to look at again in `folder` since `mark`: those that changed, and those
        with more than one link. None: look at every file."""
        watched = self._usable(folder)
        if watched is None or not isinstance(mark, str):
            return None
        token, _, generation = mark.partition(":")
        if token != watched.token or not generation.isdigit() or int(generation) > watched.generation:
            return None
        at = int(generation)
        return sorted({name for name, when in watched.changed.items() if when > at} | watched.linked)

    def _usable(self, folder: str) -> _Watched | None:
        watched = self._by_folder.get(folder)
        if watched is None or watched.stamps is None or _identity(folder) != watched.identity:
            return None
        return watched

    def _scan_slice(self, watched: _Watched) -> None:
        started = time.monotonic()
        assert watched.scan is not None
        try:
            for _ in range(SCAN_SLICE):
                item = next(watched.scan, None)
                if item is None:
                    break
                if not is_memory_name(item.name):
                    continue
                try:
                    info = item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    stamp = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns, info.st_nlink)
                    watched.scanning[item.name] = stamp
            else:
                watched.scan_seconds += time.monotonic() - started
                return
        except OSError:
            self._forget(watched)
            return
        watched.scan.close()
        watched.scan = None
        watched.scan_seconds += time.monotonic() - started
        self._scanned(watched)

    def _scanned(self, watched: _Watched) -> None:
        """A scan is complete: what it found changed since the last one (a write inotify did
        not report) counts as changed now."""
        before, now = watched.stamps, watched.scanning
        if before is not None:
            differ = {n for n in before.keys() | now.keys() if before.get(n) != now.get(n)}
            for name in differ:
                watched.changed[name] = watched.generation + 1
            if differ:
                watched.generation += 1
        watched.stamps, watched.scanning = now, {}
        self.version += 1
        watched.linked = frozenset(name for name, stamp in now.items() if stamp[4] > 1)
        watched.scanned_at = time.monotonic()

    def _forget(self, watched: _Watched) -> None:
        self.version += 1
        self._by_folder.pop(watched.folder, None)
        if self._by_wd.pop(watched.wd, None) is not None:
            self._remove_watch(watched.wd)
        if watched.scan is not None:
            watched.scan.close()
            watched.scan = None

    def _remove_watch(self, wd: int) -> None:
        try:
            self._inotify.rm_watch(wd)
        except OSError:
            pass  # already gone with its directory


def _identity(folder: str) -> tuple[int, int] | None:
    """The directory a path leads to now (device, inode); None when it leads to none."""
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def _local(folder: str) -> bool:
    """Whether `folder` is on a filesystem of this machine's (`LOCAL_FILESYSTEMS`), by the
    mount it is under in /proc/self/mountinfo."""
    try:
        real = os.path.realpath(folder)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return False
    best, kind = "", ""
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if len(fields) < 5 or not tail:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, tail.split()[0]
    return kind in LOCAL_FILESYSTEMS


# The journal of this process, when it is the resident process or one of its hooks; and the
# folders a hook wanted an answer for and got none (the resident process watches them next).
_current: Journal | None = None
wanted: set[str] = set()


def current() -> Journal | None:
    return _current


def install(journal: Journal | None) -> None:
    global _current
    _current = journal
