from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from sagemem import MemoryStore
from sagemem.search import lexicon

# Every run tries the same examples, a newcomer's as CI's: derandomized (a seed from each test),
# no example database, the reproduction blob printed with a failure; what Hypothesis's own "ci"
# profile sets, for every run whatever the environment says. No deadline and no too-slow check:
# both are timed assertions, which fail on a loaded machine, not on slow code (speed is
# measured with `sagemem bench`). To hunt for new failures with fresh examples, kept in
# .hypothesis/ until they pass: `python -m pytest --hypothesis-profile=explore`.
_BASE = settings.get_profile("default")
_UNTIMED = {"deadline": None, "print_blob": True, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("repeatable", _BASE, derandomize=True, database=None, **_UNTIMED)
settings.register_profile("explore", _BASE, **_UNTIMED)
settings.load_profile("repeatable")


@pytest.fixture(scope="session")
def lexicon_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The word-frequency lexicon, built once for the whole run (about a second)."""
    folder = tmp_path_factory.mktemp("lexicon")
    assert lexicon.build(folder / lexicon.NAME)
    return folder


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lexicon_dir: Path) -> None:
    """No test sees the developer's memory or settings: no SAGEMEM_* or SAGE_MEM_* variables,
    HOME and the cache dir in a temp dir. Every test shares one lexicon (`SAGEMEM_LEXICON`),
    as a machine does."""
    for name in list(os.environ):
        if name.startswith(("SAGEMEM_", "SAGE_MEM_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("SAGEMEM_LEXICON", str(lexicon_dir))
    monkeypatch.setenv("SAGEMEM_MODEL", "off")  # no embedding model of this machine's (`related.py`)
    # Hooks run in their own process: a resident process would outlive the test. The tests
    # of the resident process turn it on, in a folder of their own (`test_daemon.py`).
    monkeypatch.setenv("SAGEMEM_DAEMON", "off")


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
