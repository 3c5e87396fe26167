"""rjieba, when installed, segments Chinese memory text into the very words jieba gives, on
real text: the project's fixtures always, and the CMRC 2018 trial beside the repository when
it is there. Without rjieba, jieba does the work."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import jieba
import pytest

from sagemem.search import tokenize

rjieba = pytest.importorskip("rjieba")

ROOT = Path(__file__).resolve().parents[1]
CMRC = ROOT.parent / "shared" / "bench" / "cmrc2018-trial" / "memory"
CHINESE_RUN = re.compile(f"[{tokenize.CJK}]+")


def chinese_runs(folder: Path) -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.md"))]
    return [run for text in texts for run in CHINESE_RUN.findall(tokenize.normalize(text))]


@pytest.mark.parametrize("folder", [ROOT / "fixtures", CMRC], ids=["fixtures", "cmrc2018-trial"])
def test_rjieba_cuts_real_chinese_as_jieba_does(folder: Path) -> None:
    if not folder.is_dir():
        pytest.skip(f"{folder} is not on this machine")
    runs = chinese_runs(folder)
    assert sum(map(len, runs)) > 5_000  # enough real text for the comparison to mean something
    jieba.setLogLevel(logging.WARNING)
    differ = [run for run in runs if list(rjieba.cut_for_search(run)) != list(jieba.cut_for_search(run))]
    assert differ == []


def test_the_index_uses_rjieba_when_it_is_installed() -> None:
    assert tokenize.segmenter() == "rjieba"


def test_without_rjieba_jieba_gives_the_same_tokens() -> None:
    text = "\n".join(chinese_runs(ROOT / "fixtures")[:400])
    code = (
        "import sys; sys.modules['rjieba'] = None\n"  # as if it were not installed
        "from sagemem.search import tokenize\n"
        "tokens = tokenize.document_tokens(sys.stdin.read())\n"
        "sys.stdout.write(tokenize.segmenter() + '\\n' + ' '.join(tokens))"
    )
    run = [sys.executable, "-c", code]
    done = subprocess.run(run, input=text, capture_output=True, text=True, check=True)
    name, tokens = done.stdout.split("\n", 1)
    assert name == "jieba"
    assert tokens.split(" ") == tokenize.document_tokens(text)
