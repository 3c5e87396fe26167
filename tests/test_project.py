"""Checks on the project itself: docs cover the commands, the Quick start matches CI,
imports stay light (their directions: test_architecture.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click

from sagemem.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def test_every_command_is_documented() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## `([\w-]+)`", doc, re.MULTILINE))
    assert headings == set(cli.commands)
    for name, command in cli.commands.items():
        assert command.help, name
        if isinstance(command, click.Group):
            for sub in command.commands:
                assert f"sagemem {name} {sub}" in doc or f"sagemem {name} [{sub}]" in doc


def test_quick_start_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2
    assert "fixtures/demo" in commands[0]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_importing_the_package_is_light() -> None:
    heavy = "('yaml', 'click', 'filelock')"
    code = f"import sys, sagemem; print(' '.join(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_writing_memories_does_not_import_filelock_where_flock_exists(tmp_path: Path) -> None:
    code = (
        "import sys; from sagemem import MemoryStore; "
        f"s = MemoryStore({str(tmp_path / 'm')!r}); s.init(); "
        "s.create(type='user', name='x', description='d'); print('filelock' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def warm_memory(tmp_path: Path) -> Path:
    """A memory dir with one bilingual memory and its index already built (building it is
    what loads jieba)."""
    memory = tmp_path / "m"
    subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(memory), "init"], check=True, capture_output=True
    )
    (memory / "project_x.md").write_text(
        "---\ndescription: 部署 deploy notes\n---\n\n上线前先部署预发 deploy\n"
    )
    subprocess.run([sys.executable, "-m", "sagemem", "--dir", str(memory), "search", "x"], check=True)
    return memory


def loaded(
    code: str, heavy: tuple[str, ...], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `code`, then report on stderr which of the `heavy` modules it imported."""
    report = f"\nprint(' '.join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
    return subprocess.run(
        [sys.executable, "-c", code + report], capture_output=True, text=True, check=True, env=env
    )


def test_inject_does_not_load_what_it_does_not_need(tmp_path: Path) -> None:
    """The hot path: no YAML, no jieba, no filelock once the cache is warm."""
    memory = warm_memory(tmp_path)
    code = (
        "import sys; from sagemem.cli import cli\n"
        f"sys.argv = {['sagemem', '--dir', str(memory), 'inject', '--query', '怎么部署 deploy']!r}\n"
        "try:\n    cli(prog_name='sagemem')\nexcept SystemExit:\n    pass"
    )
    done = loaded(code, ("yaml", "jieba", "rjieba", "filelock", "sagemem.memory_store"))
    assert "project_x.md" in done.stdout
    assert done.stderr.strip() == ""


def hook_code(event: dict[str, object]) -> str:
    """Python that runs Claude Code's hook in-process on `event`, as `sagemem hook` would."""
    return (
        "import io, sys\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({json.dumps(event).encode()!r}))\n"
        "from sagemem.__main__ import main\n"
        "sys.argv = ['sagemem', 'hook', 'claude-code']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )


def test_the_mcp_server_answers_without_the_sdk_or_pydantic(tmp_path: Path) -> None:
    """The server is in every install and answers `initialize` as soon as Python is up: it
    loads neither the MCP SDK nor pydantic (a second of imports), whatever is installed."""
    memory = warm_memory(tmp_path)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    line = json.dumps(request).encode() + b"\n"
    code = (
        "import io, os, sys\n"
        "read, write = os.pipe()\n"
        f"os.write(write, {line!r}); os.close(write); os.dup2(read, 0)\n"
        "from sagemem.__main__ import main\n"
        f"sys.argv = {['sagemem', '--dir', str(memory), 'mcp']!r}\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    done = loaded(code, ("mcp", "pydantic", "anyio", "jieba", "rjieba", "detect_secrets"))
    assert '"serverInfo"' in done.stdout and done.stderr.strip() == ""


def test_the_prompt_hook_loads_only_what_it_needs(tmp_path: Path) -> None:
    """Every import is paid on every prompt: none of these may creep onto the hook's path."""
    memory = warm_memory(tmp_path)
    code = hook_code({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "怎么部署 deploy"})
    heavy = ("click", "yaml", "jieba", "rjieba", "filelock", "dataclasses", "inspect", "tempfile", "shutil")
    heavy += ("shlex",)
    heavy += ("subprocess", "multiprocessing", "concurrent.futures", "detect_secrets")
    heavy += ("sagemem.memory_store", "sagemem.care", "sagemem.dream")  # the pattern pass is light
    done = loaded(code, heavy, {**os.environ, "SAGEMEM_DIR": str(memory)})
    assert "project_x.md" in done.stdout
    assert done.stderr.strip() == ""
