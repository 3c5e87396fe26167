"""End to end with the real DeepSeek Harness: opt-in, since it installs dsh from npm
(`SAGEMEM_E2E=1`, docs/e2e.md; the rig is tests/e2e, DSH_PREFIX names an install to reuse).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.rigs import Rig, dsh_install, e2e

pytestmark = e2e


def test_a_memory_written_with_sagemem_reaches_dsh_after_install(tmp_path: Path) -> None:
    _, _, bridge = dsh_install()
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
    installed = subprocess.run(
        [*sagemem, "install", "dsh", "--bridge", str(bridge), "--json"],
        env={**os.environ, "DSH_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(installed.stdout)["todo"] is None
    prompt = "what is our rule about deploying to production on Fridays?"
    run = Rig(tmp_path / "run").dsh(project, prompt, dsh_home=home).check()
    requests = run.log.read_text(encoding="utf-8")
    assert "PELICAN-42" in requests
    assert "mcp__sagemem__memory_search" in requests  # the MCP tools were offered to the model
