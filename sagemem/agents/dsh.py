"""DeepSeek Harness (dsh): what `sagemem install dsh` writes, and `uninstall dsh` takes out.

dsh runs Claude Code-format command hooks only through its bridge plugin
`@deepseek-ai/dsh-hooks-claude-code`, and MCP servers through `@deepseek-ai/dsh-mcp-client`.
Both are mounted by rows in a cordis patch layer that dsh reads on every start: the home layer
`$DSH_HOME/cordis.patch.yml` (every profile) or a profile's `profiles/<name>/cordis.patch.yml`.
dsh reads no configuration from a project, so there is no project scope; the hook finds each
project's `.sagemem/memory` from the directory dsh runs in, as it does everywhere.

Install writes two things:

* `$DSH_HOME/sagemem/hooks.json`, the bridge's hook settings (Claude Code format): sagemem's
  `SessionStart` and `UserPromptSubmit` handlers. The file is sagemem's alone.
* One `insert:` entry at the end of the patch layer, between two marker comments, mounting
  the bridge (by the absolute path of its entry module: dsh does not ship it, and a bare
  name would resolve only inside dsh's own dependencies) and the MCP client.

The rest of the patch file is kept byte for byte; the result is parsed back before it is
written, and the old file is copied beside it first. Uninstall removes the marked entry and
the hooks file; a patch file left with no entries gets `[]` (dsh refuses an empty one).

`dsh`, `npm` and `sagemem` are looked up on PATH's absolute entries only: a relative entry
(`node_modules/.bin`, or an empty one) names a folder of the project install runs in, and
what it finds there (a bridge to mount into every dsh session) came with that project. npm
is asked from the home folder, with that PATH, so that neither it nor the `node` it starts
comes from the project either.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..store.command import MODULE
from ..store.errors import SagememError
from ..store.files import read_config, write_atomic
from ..store.harnesses import HARNESSES, home_folder
from .install import backup_beside

BRIDGE = "@deepseek-ai/dsh-hooks-claude-code"
BRIDGE_INSTALL = (
    "npm install -g @deepseek-ai/dsh-hooks-claude-code@0.0.1-rc.5 @deepseek-ai/dsh-hook-protocol@0.0.1-rc.1"
)
MCP_CLIENT = "@deepseek-ai/dsh-mcp-client"
BEGIN = "# sagemem: begin (written by `sagemem install dsh`; `sagemem uninstall dsh` removes it)"
END = "# sagemem: end"
DSH = HARNESSES["dsh"]
EVENTS = tuple(event.name for event in DSH.events)
HOOK_TIMEOUT = max(event.timeout for event in DSH.events)  # seconds: the bridge's default is ten minutes
HOOKS_FILE = Path(DSH.user_settings).relative_to(DSH.home_dir)  # in dsh's home: sagemem's alone
_EMPTY_LIST = re.compile(r"^\[[ \t]*\][ \t]*(#[^\r\n]*)?\r?$", re.M)  # the template's top-level `[]`


def dsh_home(env: dict[str, str] | None = None) -> Path:
    """dsh's folder, as its record says (`DSH_HOME`, else `~/.dsh`)."""
    return home_folder(DSH, Path.home(), env)


def patch_path(home: Path, profile: str | None) -> Path:
    if profile is None:
        return home / "cordis.patch.yml"
    if not profile or profile in (".", "..", "node_modules") or "/" in profile or "\\" in profile:
        raise SagememError(f"{profile!r}: not a dsh profile name")
    return home / "profiles" / profile / "cordis.patch.yml"


def find_bridge(explicit: str | None = None) -> Path | None:
    """The bridge's entry module: from `explicit` (the package folder or the module), else
    beside the `dsh` on PATH, else in npm's global folder."""
    if explicit:
        found = _entry_module(Path(explicit).expanduser())
        if found is None:
            raise SagememError(f"{explicit}: not the {BRIDGE} package or its entry module")
        return found
    for place in _bridge_places():
        found = _entry_module(place)
        if found is not None:
            return found
    return None


def _fixed_path() -> str:
    """PATH's absolute entries: the ones that name the same folders wherever one is."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(e for e in entries if os.path.isabs(e))


def _bridge_places() -> Iterator[Path]:
    path = _fixed_path()
    dsh = shutil.which("dsh", path=path)
    if dsh:
        yield from [p / BRIDGE for p in Path(dsh).resolve().parents if p.name == "node_modules"][:1]
    npm = shutil.which("npm", path=path)
    if npm is None:
        return
    env = {k: v for k, v in os.environ.items() if k != "PATH"} | ({"PATH": path} if path else {})
    try:  # asked only when the place beside dsh did not have it
        root = subprocess.run(
            [npm, "root", "-g"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
            cwd=Path.home(),
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return
    yield Path(root.stdout.strip()) / BRIDGE


def _entry_module(place: Path) -> Path | None:
    if place.is_file() and place.suffix in (".js", ".mjs"):
        return place.resolve()
    try:
        package = json.loads(read_config(place / "package.json", 1024 * 1024) or b"{}")
    except (OSError, ValueError, SagememError):
        return None
    if not isinstance(package, dict):
        return None
    if package.get("name") != BRIDGE:
        return None
    exports = package.get("exports", {})
    main = exports.get(".", exports) if isinstance(exports, dict) else exports
    if isinstance(main, dict):
        main = main.get("default") or main.get("import")
    entry = (place / str(main or package.get("main") or "lib/index.js")).resolve()
    return entry if entry.is_file() else None


def sagemem_command() -> list[str]:
    """`store/command.py`'s command, but always by absolute path: dsh runs hooks and MCP
    servers in environments that may not have the user's PATH."""
    from ..store.command import sagemem_command as words

    command = list(words())
    if command == ["sagemem"]:  # this install's script, first on PATH: named by where PATH has it
        found, first = shutil.which("sagemem", path=_fixed_path()), shutil.which("sagemem")
        if found and first and os.path.samefile(found, first):
            return [found]
        return [sys.executable, *MODULE]
    return command


def hook_words() -> list[str]:
    """What runs a hook: `store/command.py`'s hook words where they name this Python (an
    absolute path already), else `sagemem_command()`."""
    from ..store.command import HOOK_CODE, hook_command

    words = list(hook_command())
    return words if HOOK_CODE in words else sagemem_command()


def hooks_settings(command: list[str]) -> dict[str, Any]:
    def handler(event: str, timeout: int) -> dict[str, Any]:
        line = shlex.join([*command, "hook", DSH.name, event])
        return {"type": "command", "command": line, "timeout": timeout}

    return {"hooks": {event: [{"hooks": [handler(event, timeout)]}] for event, _, timeout in DSH.events}}


def block(hooks_file: Path, bridge: Path | None, command: list[str]) -> str:
    """The marked patch entry (JSON flow values, which are YAML)."""
    rows = []
    if bridge is not None:
        config = {"configPath": str(hooks_file), "defaultTimeoutMs": HOOK_TIMEOUT * 1000}
        rows.append({"id": "sagemem-hooks", "name": str(bridge), "config": config})
    executable, *rest = command
    config = {"serverName": "sagemem", "transport": "stdio", "command": executable, "args": [*rest, "mcp"]}
    rows.append({"id": "sagemem-mcp", "name": MCP_CLIENT, "config": config})
    lines = [BEGIN, "- insert:", *(f"    - {json.dumps(row, ensure_ascii=False)}" for row in rows), END]
    return "\n".join(lines) + "\n"


def install(
    *, add: bool, scope: str | None, profile: str | None, bridge: str | None, dry_run: bool
) -> dict[str, Any]:
    """`sagemem install dsh` (`add`) and `uninstall dsh`: for the user (every profile, or one);
    dsh reads no project settings."""
    if scope == "project":
        raise SagememError(
            "dsh reads no project settings: install for your user (the default) or one --profile;"
            " the hook still uses each project's .sagemem/memory"
        )
    return apply(add=add, profile=profile, bridge=bridge, dry_run=dry_run)


def apply(
    *,
    add: bool,
    profile: str | None = None,
    bridge: str | None = None,
    dry_run: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Install (`add`) or uninstall; returns what changed and what is left for the person.
    Everything is worked out and checked first; only then is anything written."""
    home = dsh_home(env)
    path = patch_path(home, profile)
    if profile is not None and not path.parent.is_dir():
        # dsh sets a profile up on its first use; a folder made here would look set up.
        raise SagememError(f"{path.parent}: no such dsh profile (start `dsh --profile {profile}` once first)")
    target = path.resolve() if path.is_symlink() else path  # a dotfiles link stays a link
    hooks_file = home / HOOKS_FILE
    raw = read_config(target)
    original = None if raw is None else _decode(path, raw)
    before = _parse(path, original)
    kept = _without_block(path, original or "")
    newline = "\r\n" if "\r\n" in (original or "") else "\n"
    changes: list[str] = []
    todo: list[str] = []
    settings: bytes | None = None
    if add:
        elsewhere = [str(p) for p in _layers(home) if p != path and BEGIN in _text(p)]
        if elsewhere:
            raise SagememError(
                f"sagemem is already loaded by {elsewhere[0]}; dsh would load it twice"
                " (uninstall it there first); nothing was changed"
            )
        command = sagemem_command()
        entry = find_bridge(bridge) or _bridge_in(before)
        if entry is None:  # dsh does not ship its Claude Code hooks bridge
            todo.append(BRIDGE_INSTALL)
        if todo:
            todo.append("sagemem install dsh" + (f" --profile {profile}" if profile else ""))
        ours = block(hooks_file, entry, command)
        text = _with_block(kept, ours.replace("\n", newline))
        hooks = hooks_settings(hook_words())
        settings = (json.dumps(hooks, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    elif original is not None and BEGIN in original:
        text = kept if _parse(path, kept) is not None else kept.rstrip("\r\n") + f"{newline}[]{newline}"
    else:
        text = original or ""  # nothing of sagemem's in this layer
    _check(path, before, _parse(path, text), add)
    rewrite = text != (original or "")
    if rewrite:
        changes.append(f"{'added' if add else 'removed'} sagemem's rows (hooks bridge, MCP server)")
    hooks_now = read_config(hooks_file)
    # The hooks file is shared by every layer: it goes only when no layer loads sagemem.
    drop_hooks = (
        not add and hooks_now is not None and not any(BEGIN in _text(p) for p in _layers(home) if p != path)
    )
    if add and hooks_now != settings:
        changes.append(f"wrote the bridge's hook settings to {hooks_file}")
    if drop_hooks:
        changes.append(f"removed {hooks_file}")
    backup = None
    if not dry_run:
        if rewrite:
            if raw is not None:
                backup = backup_beside(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text.encode("utf-8"))
        if add and settings is not None and hooks_now != settings:
            hooks_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(hooks_file, settings)
        if drop_hooks:
            hooks_file.unlink()
            _remove_empty(hooks_file.parent)
    return {
        "path": str(path),
        "changes": changes,
        "backup": str(backup) if backup else None,
        "backups": [str(backup)] if backup else [],
        "todo": "\n".join(todo) if todo else None,
        "dry_run": dry_run,
    }


def _layers(home: Path) -> list[Path]:
    """Every patch layer that can load sagemem: the home one and each profile's."""
    return [home / "cordis.patch.yml", *sorted(home.glob("profiles/*/cordis.patch.yml"))]


def _text(path: Path) -> str:
    try:
        return (read_config(path) or b"").decode("utf-8", "replace")
    except (OSError, SagememError):
        return ""


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SagememError(f"{path}: not UTF-8 text; nothing was changed") from None


def _bridge_in(entries: list[Any] | None) -> Path | None:
    """The bridge module an earlier install found, if it is still there: running install
    again from a shell without `dsh` on its PATH must not unload the hooks."""
    for entry in entries or []:
        if _is_ours(entry):
            for row in entry["insert"]:
                module = Path(str(row.get("name", "")))
                if row.get("id") == "sagemem-hooks" and module.is_file():
                    return module
    return None


def _without_block(path: Path, text: str) -> str:
    start = text.find(BEGIN)
    if start < 0:
        return text
    end = text.find(END, start)
    if end < 0:
        raise SagememError(f"{path}: `{BEGIN[:17]}` without its `{END}` line; remove the block by hand")
    end += len(END)
    rest = text[end:]
    return text[:start] + rest[2:] if rest.startswith("\r\n") else text[:start] + rest.removeprefix("\n")


def _with_block(text: str, ours: str) -> str:
    """`text` with `ours` appended as the last entry; an empty flow list (`[]`, the template
    dsh writes) is dropped, since a block entry cannot follow it."""
    if _EMPTY_LIST.search(text) and _parse(Path("x"), _EMPTY_LIST.sub("", text)) is None:
        text = _EMPTY_LIST.sub("", text)
    if text and not text.endswith("\n"):
        text += "\n"
    return text + ours


class _Tagged(str):
    """A value with a tag PyYAML does not know (dsh's `!!js` expressions), kept as text."""


def _parse(path: Path, text: str | None) -> list[Any] | None:
    """The patch list in `text` (None for no entries); a file that is not one is refused."""
    if text is None:
        return None
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> _Tagged:
        return _Tagged(f"{node.tag} {getattr(node, 'value', '')}")

    Loader.add_multi_constructor("", tagged)
    try:
        data = yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise SagememError(f"{path}: not valid YAML ({exc}); nothing was changed") from None
    if data is None:
        return None
    if not isinstance(data, list):
        raise SagememError(f"{path}: a cordis patch file must be a YAML list; nothing was changed")
    return data


def _check(path: Path, before: list[Any] | None, after: list[Any] | None, add: bool) -> None:
    """The edit touched only sagemem's entry: the person's entries parse to what they were."""
    mine = [e for e in before or [] if not _is_ours(e)]
    theirs = [e for e in after or [] if not _is_ours(e)]
    if mine != theirs or (not add and any(_is_ours(e) for e in after or [])):
        raise SagememError(
            f"{path}: sagemem's entry cannot be changed without touching yours (edited by hand?);"
            " nothing was changed"
        )


def _is_ours(entry: Any) -> bool:
    rows = entry.get("insert") if isinstance(entry, dict) else None
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(isinstance(r, dict) and r.get("id") in ("sagemem-hooks", "sagemem-mcp") for r in rows)
    )


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty: something else of the person's is there
