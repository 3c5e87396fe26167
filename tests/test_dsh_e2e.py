"""End to end with the real DeepSeek Harness: opt-in, since it installs dsh from npm.

Set SAGEMEM_DSH_E2E to a runner script that starts dsh headless and offline against a fake
model API and reports whether a text reached the model request (its usage: `RUNNER WORKDIR
HOOK PROMPT EXPECTED`; it honours DSH_PREFIX, DSH_PROJECT, DSH_EVENTS and DSH_ENV, installs
dsh and the Claude Code hooks bridge into DSH_PREFIX, and leaves `requests.jsonl` in WORKDIR).
DSH_PREFIX may name an existing install to reuse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = os.environ.get("SAGEMEM_DSH_E2E", "")

pytestmark = pytest.mark.skipif(not RUNNER, reason="set SAGEMEM_DSH_E2E to run dsh end to end")


def run(workdir: Path, prompt: str, expected: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", RUNNER, str(workdir), "true", prompt, expected],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


def test_a_memory_written_with_sagemem_reaches_dsh_after_install(tmp_path: Path) -> None:
    prefix = Path(os.environ.get("DSH_PREFIX") or tmp_path / "npm")
    setup = run(tmp_path / "setup", "hello", "hello", {"DSH_PREFIX": str(prefix)})  # installs dsh
    assert setup.returncode == 0, setup.stderr
    project = tmp_path / "proj"
    project.mkdir()
    sagemem = [sys.executable, "-m", "sagemem"]
    subprocess.run([*sagemem, "init", "--project"], cwd=project, check=True, capture_output=True)
    subprocess.run(
        [
            *sagemem,
            "new",
            "--type",
            "project",
            "--name",
            "Deploy freeze",
            "--description",
            "Deploy freeze rule: no production deploys on Fridays, codename PELICAN-42",
        ],
        cwd=project,
        check=True,
        capture_output=True,
    )
    home = tmp_path / "dsh-home"
    bridge = prefix / "node_modules" / "@deepseek-ai" / "dsh-hooks-claude-code"
    installed = subprocess.run(
        [*sagemem, "install", "dsh", "--bridge", str(bridge), "--json"],
        env={**os.environ, "DSH_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(installed.stdout)["todo"] is None
    done = run(
        tmp_path / "run",
        "what is our rule about deploying to production on Fridays?",
        "PELICAN-42",
        {
            "DSH_PREFIX": str(prefix),
            "DSH_PROJECT": str(project),
            "DSH_EVENTS": "Stop",  # the runner's own hook does nothing; sagemem's come from the install
            "DSH_ENV": f"DSH_HOME={home}",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "found in request" in done.stdout
    requests = (tmp_path / "run" / "requests.jsonl").read_text()
    assert "mcp__sagemem__memory_search" in requests  # the MCP tools were offered to the model
