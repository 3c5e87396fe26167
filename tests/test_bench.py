"""`sagemem bench`'s corpus and the progress bar of long operations."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem.cli.progress import Bar
from sagemem.search.bench import generate
from sagemem.search.corpus import load
from sagemem.search.retrieve import search
from sagemem.store.memory import parse_memory


def test_the_generated_corpus_is_shaped_like_memories_and_its_queries_find_them(tmp_path: Path) -> None:
    queries = generate(tmp_path / "m", 200, "mixed")
    files = sorted((tmp_path / "m").glob("*_m*.md"))
    assert len(files) == 200
    sizes = []
    for path in files:
        memory = parse_memory(path.name, path.read_bytes())
        assert memory.description and memory.type in ("user", "feedback", "project", "reference")
        paragraphs = [p for p in memory.body.split("\n\n") if p.strip()]
        assert 2 <= len(paragraphs) <= 8
        sizes.append(len(path.read_bytes()))
    assert 300 < sorted(sizes)[100] < 4000  # the median memory: one to a few KB
    corpus = load(tmp_path / "m", tmp_path / "state")
    found = [q for q in queries if search(corpus, q).hits]
    assert len(found) >= 0.8 * len(queries)  # the timed searches do real work


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_draws_only_after_its_delay_and_ends_its_line() -> None:
    stream = _Terminal()  # click draws a bar only on a terminal
    quiet = Bar("indexing", stream, delay=60)
    quiet(5, 10)
    quiet(10, 10)
    assert stream.getvalue() == ""  # a quick operation shows nothing
    bar = Bar("indexing", stream, delay=0)
    bar(5, 10)
    bar(10, 10)
    bar(1, 4, "timing")
    lines = re.sub(r"\x1b\[\?25[lh]", "", stream.getvalue()).split("\n")  # click hides the cursor meanwhile
    assert lines[0].startswith("\rindexing [") and lines[0].endswith("] 10/10")
    assert "5/10" in lines[0] and lines[1].startswith("\rtiming [") and lines[1].endswith("1/4")


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    generate(tmp_path / "m", 600, "en")
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(tmp_path / "m"), "search", "deploy"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert not re.search(r"\[[#.]+\]", done.stderr)


def test_a_bar_is_made_only_for_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert Bar.for_terminal("x") is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert isinstance(Bar.for_terminal("x"), Bar)
