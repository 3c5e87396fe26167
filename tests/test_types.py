"""The type checker over the package, as CI runs it (its settings: `[tool.mypy]` in
pyproject.toml), and the marker that lets users' checkers read sagemem's types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_type_checks(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_a_mistake_is_reported(tmp_path: Path) -> None:
    """The settings check what they say: an unused ignore and an ignore without its code fail."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "x: int = 1  # type: ignore[assignment]\ny: int = 'no'  # type: ignore\nz: int = 'no'\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), str(wrong)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1
    assert "wrong.py:1: error: Unused" in done.stdout
    assert "wrong.py:2: error: " in done.stdout and "[ignore-without-code]" in done.stdout
    assert "wrong.py:3: error: " in done.stdout and "[assignment]" in done.stdout


def test_the_package_says_it_is_typed() -> None:
    assert (ROOT / "sagemem" / "py.typed").is_file()
    assert '"sagemem" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
