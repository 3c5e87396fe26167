from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from sagemem.store.errors import InvalidMemory, MemoryNotFound, StorageError
from sagemem.store.files import MAX_FILE_BYTES, read_bytes, write_atomic


def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_read_regular_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"hello")
    assert read_bytes(tmp_path / "a.md") == b"hello"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MemoryNotFound):
        read_bytes(tmp_path / "nope.md")


def test_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "link.md").symlink_to(tmp_path / "real.md")
    with pytest.raises(InvalidMemory, match="symbolic link"):
        read_bytes(tmp_path / "link.md")


def test_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(InvalidMemory, match="not a regular file"):
        read_bytes(tmp_path / "pipe.md")


def test_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(InvalidMemory, match="not a regular file"):
        read_bytes(tmp_path / "dir.md")


def test_size_cap(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    (tmp_path / "edge.md").write_bytes(b"x" * MAX_FILE_BYTES)
    with pytest.raises(InvalidMemory, match="larger than 512 KiB"):
        read_bytes(tmp_path / "big.md")
    assert len(read_bytes(tmp_path / "edge.md")) == MAX_FILE_BYTES
    assert len(read_bytes(tmp_path / "big.md", limit=MAX_FILE_BYTES + 1)) == MAX_FILE_BYTES + 1


def test_hard_link_is_allowed(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("shared")
    os.link(tmp_path / "a.md", tmp_path / "b.md")
    assert read_bytes(tmp_path / "b.md") == b"shared"


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert temp_files(tmp_path) == []


def test_new_file_gets_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "n.md", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "n.md").stat().st_mode) == 0o640


def test_create_only_refuses_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    target.write_text("mine")
    with pytest.raises(FileExistsError):
        write_atomic(target, b"theirs", create_only=True)
    assert target.read_text() == "mine"
    assert temp_files(tmp_path) == []


def test_failed_replace_removes_the_temp_file(tmp_path: Path) -> None:
    (tmp_path / "taken.md").mkdir()  # os.replace onto a directory fails
    with pytest.raises(OSError):
        write_atomic(tmp_path / "taken.md", b"data")
    assert temp_files(tmp_path) == []
    assert (tmp_path / "taken.md").is_dir()


def test_write_into_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as caught:
        write_atomic(tmp_path / "nope" / "a.md", b"x")
    assert caught.value.errno == errno.ENOENT and isinstance(caught.value, OSError)
    assert str(tmp_path / "nope" / "a.md") in str(caught.value) and "failed" in str(caught.value)
    assert not (tmp_path / "nope").exists()
