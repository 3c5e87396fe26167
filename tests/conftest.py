from __future__ import annotations

from pathlib import Path

import pytest

from sagemem import MemoryStore

ENV_VARS = ("SAGEMEM_DIR", "SAGE_MEM_DIR", "SAGEMEM_STATE_DIR")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's memory: no sagemem variables, HOME in a temp dir."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.init()
    return s


def write_file(store: MemoryStore, name: str, text: str | bytes) -> Path:
    """Put a file in the memory dir the way a person's editor would (no sagemem involved)."""
    path = store.memory_dir / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path
