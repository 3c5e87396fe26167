"""The real agent CLIs, run headless against `FakeAPI` with a home of their own.

Opt-in: nothing here runs unless `SAGEMEM_E2E=1` (read at import, since the suite's fixture
clears SAGEMEM_* variables before each test). Each CLI is found, or installed with npm once,
under a prefix: CC_PREFIX, CODEX_PREFIX, GEMINI_PREFIX or DSH_PREFIX when given (an install to reuse),
else `$SAGEMEM_E2E_NPM/<cli>` (default `~/.cache/sagemem-e2e/npm/<cli>`).

A `Rig` is one test's work folder: each run starts a fake API with a log of its own
(`requests-N.jsonl`), gives the CLI the isolated home `work/home` (made fresh unless the run
keeps it, as a second session does), an environment holding no credential of the caller's
(only PATH, the locale, the fake API's URL and dummy keys), and this interpreter's folder
first on PATH, so the portable hook line `sagemem install` writes finds this sagemem.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from filelock import FileLock

from tests.e2e.fake_api import FakeAPI, requests

COMMAND = (
    "SAGEMEM_E2E=1 .venv/bin/python -m pytest -n 4"
    " tests/test_loop_e2e.py tests/test_doctor_e2e.py tests/test_dsh_e2e.py"
)
ENABLED = os.environ.get("SAGEMEM_E2E") == "1"
NPM = Path(os.environ.get("SAGEMEM_E2E_NPM") or Path.home() / ".cache" / "sagemem-e2e" / "npm")
# Installs to reuse, read now for the same reason as SAGEMEM_E2E.
GIVEN = {
    name: os.environ.get(name, "") for name in ("CC_PREFIX", "CODEX_PREFIX", "GEMINI_PREFIX", "DSH_PREFIX")
}
# The caller's locale and temp settings pass; nothing else of the caller's environment does.
PASSED = ("LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL")

e2e = pytest.mark.skipif(not ENABLED, reason=f"end to end with the real CLIs from npm: {COMMAND}")


@dataclass(frozen=True)
class CLI:
    name: str
    package: str
    variable: str

    def prefix(self) -> Path:
        return Path(GIVEN[self.variable]) if GIVEN[self.variable] else NPM / self.name

    def binary(self) -> Path:
        """The CLI's executable, installed under its prefix first when missing."""
        prefix = self.prefix()
        exe = prefix / "node_modules" / ".bin" / self.name
        if exe.exists():
            return exe
        if GIVEN[self.variable]:
            pytest.fail(f"{self.variable}={prefix} holds no {self.package}")
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is needed to install {self.package}")
        prefix.mkdir(parents=True, exist_ok=True)
        with FileLock(str(prefix) + ".lock"):  # one install, whatever the number of workers
            if not exe.exists():
                done = subprocess.run(
                    [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", self.package],
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                assert done.returncode == 0 and exe.exists(), done.stdout + done.stderr
        return exe


CLAUDE = CLI("claude", "@anthropic-ai/claude-code", "CC_PREFIX")
CODEX = CLI("codex", "@openai/codex", "CODEX_PREFIX")
GEMINI = CLI("gemini", "@google/gemini-cli", "GEMINI_PREFIX")


# DeepSeek Harness: the newest dsh whose dependencies are all published, its dependency tree
# pinned to its release era (newer plugins break its boot), and the Claude Code hooks bridge
# it runs sagemem's hooks with, which it does not install itself; it needs node ^22.19 or 24.
DSH = {
    "dsh": "@deepseek-ai/dsh@0.1.0-rc.8",
    "before": "2026-08-25T00:00:00Z",
    "bridge": ["@deepseek-ai/dsh-hooks-claude-code@0.0.1-rc.5", "@deepseek-ai/dsh-hook-protocol@0.0.1-rc.1"],
    "node": "24",
}


def _npm(prefix: Path, *args: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is needed to install the CLIs")
    command = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, " ".join(command) + "\n" + done.stdout + done.stderr


def _node_ok(node: Path | str | None) -> bool:
    if not node:
        return False
    try:
        done = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    major, minor = (int(x) for x in done.stdout.strip().lstrip("v").split(".")[:2])
    return (major == 22 and minor >= 19) or major >= 24


def _missing_peers(modules: Path) -> list[str]:
    """The required @deepseek-ai peer dependencies not installed (npm's --legacy-peer-deps,
    without which its resolver spins for minutes on dsh's tree, installs none)."""
    wanted: dict[str, str] = {}
    for manifest in [*modules.glob("*/package.json"), *modules.glob("@*/*/package.json")]:
        try:
            package = json.loads(manifest.read_text(encoding="utf-8"))
        except ValueError:
            continue
        optional = package.get("peerDependenciesMeta") or {}
        for name, version in (package.get("peerDependencies") or {}).items():
            if (
                name.startswith("@deepseek-ai/")
                and name != "@deepseek-ai/dsh-bash"
                and not (optional.get(name) or {}).get("optional")
                and not (modules / name).exists()
            ):
                wanted.setdefault(name, version)
    return [f"{name}@{version}" for name, version in sorted(wanted.items())]


def dsh_install() -> tuple[Path, Path, Path]:
    """(node, dsh's bin.js, the hooks bridge's folder), installed under the prefix first."""
    prefix = Path(GIVEN["DSH_PREFIX"]) if GIVEN["DSH_PREFIX"] else NPM / "dsh"
    modules = prefix / "node_modules"
    main, bridge = (
        modules / "@deepseek-ai" / "dsh" / "lib" / "bin.js",
        modules / "@deepseek-ai" / "dsh-hooks-claude-code",
    )
    prefix.mkdir(parents=True, exist_ok=True)
    with FileLock(str(prefix) + ".lock"):
        node: Path | str | None = shutil.which("node")
        if not _node_ok(node):
            node = next(iter((prefix / "node" / "node_modules").glob("node-*/bin/node")), None)
        if not _node_ok(node):
            arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}[os.uname().machine]
            _npm(prefix / "node", f"node-{sys.platform}-{arch}@{DSH['node']}")
            node = next(iter((prefix / "node" / "node_modules").glob("node-*/bin/node")))
        if not (main.exists() and bridge.exists()):
            pinned = ["--legacy-peer-deps", f"--before={DSH['before']}"]
            _npm(prefix, *pinned, DSH["dsh"])
            for _ in range(6):
                peers = _missing_peers(modules)
                if not peers:
                    break
                _npm(prefix, *pinned, *peers)
            _npm(prefix, "--legacy-peer-deps", *DSH["bridge"])  # newer than the pin
    return Path(str(node)), main, bridge


@dataclass
class Run:
    """What one run of a CLI left: its output and the requests the fake API recorded."""

    log: Path
    returncode: int
    stdout: str
    stderr: str
    served_all: bool = True
    shell: list[dict] = field(default_factory=list)

    def requests(self, path: str = "") -> list[dict]:
        return requests(self.log, path)

    def check(self) -> Run:
        assert self.returncode == 0 and self.served_all, self.explain()
        return self

    def explain(self) -> str:
        return (
            f"exit {self.returncode}, script served: {self.served_all}, shell steps: {self.shell}\n"
            f"stdout: {self.stdout[-4000:]}\nstderr: {self.stderr[-4000:]}\nrequests: {self.log}"
        )


def _environment(home: Path, **extra: str) -> dict[str, str]:
    path = [str(Path(sys.executable).parent)]  # this sagemem, for the hooks' portable line
    node = shutil.which("node")
    if node:
        path.append(str(Path(node).parent))
    path.append(os.environ.get("PATH", "/usr/bin:/bin"))
    env = {name: os.environ[name] for name in PASSED if name in os.environ}
    env.update(
        PATH=os.pathsep.join(path),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        TERM="dumb",
        NO_COLOR="1",
    )
    env.update(extra)
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """Run a CLI in a process group of its own, and end that group after it (the hooks and
    MCP servers it started may outlive it)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return -1, out, f"timed out after {timeout}s\n{err}"
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return process.returncode, out, err


def review_hooks(exe: Path, project: Path, env: dict[str, str]) -> list[dict]:
    """Trust every hook Codex lists for `project` that is untrusted or changed, through its
    app-server (JSON-RPC on stdio: hooks/list, then config/batchWrite of hooks.state by each
    hook's current hash), as its /hooks review does. The hooks as listed after."""
    server = subprocess.Popen(
        [str(exe), "app-server"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    asked = 0

    def call(method: str, params: dict) -> dict:
        nonlocal asked
        asked += 1
        server.stdin.write(json.dumps({"id": asked, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        for line in server.stdout:
            message = json.loads(line)
            if message.get("id") == asked and "method" not in message:
                assert "error" not in message, (method, message)
                return message["result"]
        raise AssertionError(f"codex app-server ended before answering {method}")

    try:
        call("initialize", {"clientInfo": {"name": "sagemem-e2e", "version": "1"}})
        server.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        server.stdin.flush()
        hooks = [
            h
            for e in call("hooks/list", {"cwds": [str(project)]}).get("data", [])
            for h in e.get("hooks", [])
        ]
        state = {
            h["key"]: {"trusted_hash": h["currentHash"]}
            for h in hooks
            if h.get("trustStatus") in ("untrusted", "modified")
        }
        if state:
            edit = {"keyPath": "hooks.state", "value": state, "mergeStrategy": "upsert"}
            call("config/batchWrite", {"edits": [edit]})
            hooks = [
                h
                for e in call("hooks/list", {"cwds": [str(project)]}).get("data", [])
                for h in e.get("hooks", [])
            ]
        return hooks
    finally:
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()


class Rig:
    """One test's work folder; `home` is the CLIs' HOME."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.runs = 0

    @property
    def next_log(self) -> Path:
        """Where the next run's requests will be recorded."""
        return self.work / f"requests-{self.runs}.jsonl"

    def _start(self, keep_home: bool) -> Path:
        self.work.mkdir(parents=True, exist_ok=True)
        if not keep_home and self.home.exists():
            shutil.rmtree(self.home)
        self.home.mkdir(exist_ok=True)
        log = self.next_log
        self.runs += 1
        return log

    # -- Claude Code ----------------------------------------------------------------------

    def claude(
        self,
        project: Path,
        prompt: str,
        script: list[dict] | None = None,
        *,
        keep_home: bool = False,
        user_settings: dict | None = None,
        approve_mcp: bool = True,
        timeout: float = 300,
    ) -> Run:
        """`claude -p PROMPT` in `project`, its main loop answered by `script` (each step
        a turn; see FakeAPI). The project's MCP servers are approved in ~/.claude.json, as a
        person does when asked, unless `approve_mcp` is false."""
        exe = CLAUDE.binary()
        log = self._start(keep_home)
        config = self.home / ".claude"
        config.mkdir(exist_ok=True)
        state = self.home / ".claude.json"
        known = json.loads(state.read_text(encoding="utf-8")) if state.exists() else {}
        known.update(hasCompletedOnboarding=True, bypassPermissionsModeAccepted=True)
        here = known.setdefault("projects", {}).setdefault(str(project), {})
        here.update(hasTrustDialogAccepted=True, hasCompletedProjectOnboarding=True)
        mcp = project / ".mcp.json"
        if approve_mcp and mcp.exists():
            here["enabledMcpjsonServers"] = list(
                json.loads(mcp.read_text(encoding="utf-8")).get("mcpServers", {})
            )
        state.write_text(json.dumps(known, indent=2), encoding="utf-8")
        if user_settings is not None:
            (config / "settings.json").write_text(json.dumps(user_settings), encoding="utf-8")
        with FakeAPI(log, script=script or [{"text": "ok"}], cwd=project) as api:
            env = _environment(
                self.home,
                CLAUDE_CONFIG_DIR=str(config),
                ANTHROPIC_BASE_URL=api.url,
                ANTHROPIC_API_KEY="sk-ant-e2e-dummy",
                DISABLE_TELEMETRY="1",
                DISABLE_AUTOUPDATER="1",
                DISABLE_ERROR_REPORTING="1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            )
            if os.getuid() == 0:
                env["IS_SANDBOX"] = "1"  # bypassPermissions as root
            argv = [str(exe), "-p", prompt, "--output-format", "stream-json", "--verbose"]
            argv += ["--permission-mode", "bypassPermissions"]
            code, out, err = _run(argv, project, env, timeout)
            assert api.script is not None
            return Run(log, code, out, err, api.script.done, api.script.shell_log)

    # -- Codex ----------------------------------------------------------------------------

    def codex(
        self,
        project: Path,
        prompt: str,
        *,
        home: Path | None = None,
        keep_home: bool = False,
        trust: str = "review",
        timeout: float = 180,
    ) -> Run:
        """`codex exec PROMPT` in `project`, its hooks as installed there; HOME is `home` when
        given (a person's, with a user memory), CODEX_HOME the rig's, with a config.toml
        naming the fake API as the model provider and the project as trusted.

        Codex runs a project's hooks once a person has reviewed them (its /hooks screen):
        `trust="review"` trusts each through Codex's own app-server, as that screen does;
        "bypass" runs with `--dangerously-bypass-hook-trust`; "none" trusts nothing (Codex
        then skips the hooks)."""
        exe = CODEX.binary()
        log = self._start(keep_home)
        codex_home = self.home / ".codex"
        codex_home.mkdir(exist_ok=True)
        with FakeAPI(log) as api:
            config = "\n".join(
                [
                    'model = "gpt-5.5"',
                    'model_provider = "e2e"',
                    'approval_policy = "never"',
                    'sandbox_mode = "read-only"',
                    "check_for_update_on_startup = false",
                    "[model_providers.e2e]",
                    'name = "sagemem e2e"',
                    f'base_url = "{api.url}/v1"',
                    'wire_api = "responses"',
                    'env_key = "SAGEMEM_E2E_KEY"',
                    "request_max_retries = 0",
                    "stream_max_retries = 0",
                    "[analytics]",
                    "enabled = false",
                    "[features]",
                    "plugins = false",
                    "remote_plugin = false",
                    "apps = false",
                    f"[projects.{json.dumps(str(project))}]",
                    'trust_level = "trusted"',
                    "",
                ]
            )
            (codex_home / "config.toml").write_text(config, encoding="utf-8")
            env = _environment(home or self.home, CODEX_HOME=str(codex_home), SAGEMEM_E2E_KEY="sk-e2e-dummy")
            if trust == "review":
                review_hooks(exe, project, env)
            argv = [
                str(exe),
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--color",
                "never",
                "-C",
                str(project),
            ]
            argv += ["--dangerously-bypass-hook-trust"] if trust == "bypass" else []
            argv += ["--", prompt]
            code, out, err = _run(argv, project, env, timeout)
            return Run(log, code, out, err)

    # -- DeepSeek Harness -----------------------------------------------------------------

    def dsh(
        self, project: Path, prompt: str, *, dsh_home: Path, home: Path | None = None, timeout: float = 180
    ) -> Run:
        """`dsh --profile headless PROMPT` in `project`, with DSH_HOME `dsh_home` (where
        `sagemem install dsh` wrote its patch and hooks: dsh reads no configuration from a
        project) and its default route, deepseek-official, pointed at the fake API; HOME is
        `home` when given (a person's, with a user memory)."""
        node, main, _ = dsh_install()
        log = self._start(keep_home=False)
        with FakeAPI(log, models=("deepseek-v4-flash",)) as api:
            env = _environment(
                home or self.home,
                DSH_HOME=str(dsh_home),
                DEEPSEEK_BASE_URL=api.url,
                DEEPSEEK_API_KEY="sk-e2e-dummy",
                DSH_TELEMETRY_DISABLED="1",
            )
            env["PATH"] = os.pathsep.join([env["PATH"].split(os.pathsep)[0], str(node.parent), env["PATH"]])
            argv = [str(node), str(main), "--profile", "headless", prompt]
            code, out, err = _run(argv, project, env, timeout)
            return Run(log, code, out, err)

    # -- Gemini CLI -----------------------------------------------------------------------

    def gemini(
        self,
        project: Path,
        prompt: str,
        *,
        keep_home: bool = False,
        trusted: bool = True,
        timeout: float = 240,
    ) -> Run:
        """`gemini --prompt PROMPT` in `project`, its settings as installed there, the
        project listed as trusted in the isolated ~/.gemini/trustedFolders.json (unless
        `trusted` is false: `gemini -p` then refuses to run)."""
        exe = GEMINI.binary()
        log = self._start(keep_home)
        folder = self.home / ".gemini"
        folder.mkdir(exist_ok=True)
        user = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "ide": {"enabled": False, "hasSeenNudge": True},
        }
        (folder / "settings.json").write_text(json.dumps(user), encoding="utf-8")
        if trusted:
            listed = {str(project): "TRUST_FOLDER"}
            (folder / "trustedFolders.json").write_text(json.dumps(listed), encoding="utf-8")
        tmp = self.work / "tmp"
        tmp.mkdir(exist_ok=True)
        with FakeAPI(log) as api:
            env = _environment(
                self.home,
                GEMINI_CLI_HOME=str(self.home),
                TMPDIR=str(tmp),
                GOOGLE_GEMINI_BASE_URL=api.url,
                GEMINI_API_KEY="gemini-e2e-dummy",
                GEMINI_TELEMETRY_ENABLED="false",
            )
            argv = [str(exe), f"--prompt={prompt}", "--output-format", "json"]
            code, out, err = _run(argv, project, env, timeout)
            return Run(log, code, out, err)
