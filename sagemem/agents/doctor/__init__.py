"""`sagemem doctor`: is sagemem really running in the harnesses it was installed in?

A hook that cannot start leaves no trace: the harness drops the failure, the agent works on
without memory, and only the harness's debug log knows. So for each harness whose settings
hold a sagemem hook, doctor checks what the harness would do: that the command resolves (as
the harness's shell would, and not only because a virtual environment is active in this
shell), that it answers a test prompt event, that each MCP entry for sagemem starts and
answers `initialize`, that the harness's own switches let the hooks run (Codex's hook trust,
`hooks` feature and project trust; Claude Code's `disableAllHooks`; Gemini's folder trust and
`hooksConfig`), and that the memory directory a hook would use here exists and is healthy.

Each check returns findings (ok; a problem, with its fix; information; or "could not
check", with why); the CLI prints them. Doctor changes nothing: no setting is written and no
trust is granted. Every external step (a hook, an MCP server, `codex app-server`) runs in
its own process group with a timeout, and the group is killed when time is up.

A command is run only when it has the form sagemem's own entries have (`<sagemem> hook
<harness> <event>` or `<python> -m sagemem ...`, with nothing else on the line but
sagemem's `--dir`/`--state-dir` options) and its program is this sagemem: this Python, or a
console script that runs it, after links, `..` and `/proc` are followed. A cloned project's
settings are not a script for doctor to run: any other program is named, with where it
leads, and not run, and no fix tells the person to run it. Every child runs without the
relative entries of the search paths (PATH, PYTHONPATH, the loader's): in the project they
are the project's folders, where `env node` or `import yaml` would find the project's files;
`codex app-server` is started in the home folder. The test event has no `session_id`, so
the hook runs stateless (no session ledger is written), with a prompt that asks for nothing.

The rules for Codex's trust, Claude Code's settings and auto memory, and Gemini's folder
trust are those of Codex 0.171, Claude Code 2.1 and Gemini CLI 0.61, checked against those
programs. For Codex, the listing of `codex app-server` (Codex's own answer) is used when
`codex` is on PATH; otherwise trust is worked out from `config.toml` with the hash Codex
computes.

The package, each module importing only those above it:

- `findings`: `Finding` and `Report`, the values every check returns;
- `places`: `Places`, where doctor looks, `ThisSagemem`, the one sagemem it runs, the
  project's git root, and which search-path entries are relative;
- `settings`: sagemem's hooks and MCP entries in a harness's settings files;
- `commands`: which command lines doctor runs, where their programs are, and whether each
  is this sagemem;
- `process`: child processes in a group of their own, within a deadline, without the
  relative entries of their search paths;
- `probes`: the hook runs and MCP starts, once per command line;
- `claude`, `codex`, `gemini`, `dsh`: one harness each, with its own gates;
- `memory_dir`: the memory directory a hook would use here;
- `diagnosis`: `diagnose`, all of it in order; a harness with no module of its own is
  checked from its record (`store/harnesses.py`) alone.
"""

from .claude import claude_auto_memory, claude_memory_dir, claude_slug
from .codex import CODEX_NO_MATCHER, codex_hash, codex_key, codex_listing, codex_trust
from .commands import Resolved, hook_words, interpreter, resolve
from .diagnosis import diagnose
from .findings import INFO, OK, PROBLEM, UNKNOWN, Finding, Report
from .gemini import gemini_trust
from .memory_dir import memory_findings
from .places import Places, ThisSagemem, git_main_root, git_root
from .probes import INITIALIZE, PROMPT_EVENTS, TEST_PROMPT, hook_findings
from .process import Ran, Session, run
from .settings import MAX_SETTINGS_BYTES, Hook, McpEntry, hooks_in, mcp_entry, read_settings

__all__ = [
    "CODEX_NO_MATCHER",
    "INFO",
    "INITIALIZE",
    "MAX_SETTINGS_BYTES",
    "OK",
    "PROBLEM",
    "PROMPT_EVENTS",
    "TEST_PROMPT",
    "ThisSagemem",
    "UNKNOWN",
    "Finding",
    "Hook",
    "McpEntry",
    "Places",
    "Ran",
    "Report",
    "Resolved",
    "Session",
    "claude_auto_memory",
    "claude_memory_dir",
    "claude_slug",
    "codex_hash",
    "codex_key",
    "codex_listing",
    "codex_trust",
    "diagnose",
    "gemini_trust",
    "git_main_root",
    "git_root",
    "hook_findings",
    "hook_words",
    "hooks_in",
    "interpreter",
    "mcp_entry",
    "memory_findings",
    "read_settings",
    "resolve",
    "run",
]
