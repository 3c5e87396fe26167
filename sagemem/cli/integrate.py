"""Commands that connect sagemem to agent harnesses: hook, install, uninstall, doctor, mcp."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..store.harnesses import HARNESSES
from .base import _Context, _DefaultGroup, _print_json, cli, count, json_option, pass_ctx, say


class _Harnesses(click.Choice):
    """The harnesses' names, read from their records whenever a command line is: a harness
    is one record (`store/harnesses.py`)."""

    def __init__(self) -> None:
        super().__init__(list(HARNESSES))

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        return list(HARNESSES)

    @choices.setter
    def choices(self, value: object) -> None:
        pass  # the records are the choices


# `-h` as well as `--help`: `sagemem hook -h` would otherwise be a hook for a harness "-h",
# answered with silence (`__main__.HELP`).
@cli.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
@click.argument("harness", type=_Harnesses())
@click.argument("event", required=False)
@pass_ctx
def hook(ctx: _Context, harness: str, event: str | None) -> None:
    """Run as a harness hook: the event's JSON on stdin, the harness's JSON on stdout.

    HARNESS is the harness that runs the hook; the answer has its shape. EVENT names the
    event when the JSON does not (its `hook_event_name` wins): SessionStart, the prompt event
    (UserPromptSubmit; Gemini CLI: BeforeAgent) or, for Claude Code, PreToolUse and
    PostToolUse. `sagemem install` writes these hook lines into the harness's settings.

    Always exits 0; a failure prints nothing and is logged to <state>/hook.log.

    \b
    Example (what `sagemem install claude-code` registers):
        sagemem hook claude-code UserPromptSubmit
    """
    from ..agents.hooks import main

    raise SystemExit(
        main(
            [harness, *([event] if event else [])],
            memory_dir=str(ctx.memory_dir) if ctx.memory_dir else None,
            state_dir=str(ctx.state_dir) if ctx.state_dir else None,
        )
    )


def _options(command: Any) -> Any:
    """The arguments `install` and `uninstall` share."""
    for option in reversed(
        [
            click.argument("harness", type=_Harnesses()),
            click.option(
                "--scope",
                type=click.Choice(["project", "user"]),
                help="Where the settings go [default: project; dsh: user, its only scope].",
            ),
            click.option("--profile", help="dsh only: the profile to configure (default: all profiles)."),
            click.option("--bridge", help="dsh only: where the Claude Code hooks bridge is installed."),
            click.option("--dry-run", is_flag=True, help="Show what would change; write nothing."),
            json_option,
        ]
    ):
        command = option(command)
    return command


@cli.command()
@_options
@click.option(
    "--memory",
    type=click.Choice(["both", "sagemem"]),
    help="claude-code only: `sagemem` imports Claude Code's auto memory for this project into "
    "sagemem (the project memory, else the user memory, or the scope --in names), after a snapshot, "
    "then turns it off; `both` turns back on what `sagemem` turned off. Without it, Claude Code's "
    "memory is left as it is.",
)
@pass_ctx
def install(
    ctx: _Context,
    harness: str,
    scope: str | None,
    profile: str | None,
    bridge: str | None,
    dry_run: bool,
    as_json: bool,
    memory: str | None,
) -> None:
    """Add sagemem's hooks to a harness's settings (idempotent; a backup is kept).

    \b
    Example:
        sagemem install claude-code                   # ./.claude/settings.json
        sagemem install claude-code --memory sagemem  # import Claude Code's memories, turn its own off
        sagemem install gemini --scope user           # ~/.gemini/settings.json
        sagemem install dsh                           # ~/.dsh/cordis.patch.yml (every profile)
    """
    if memory is not None and not HARNESSES[harness].own_memory:
        raise click.UsageError("--memory is for claude-code only: it says who holds Claude Code's memories")
    if memory is not None and scope == "user":
        raise click.UsageError(
            "--memory is about one project's memories: use it with the project scope (the default)"
        )
    outcome = _apply(harness, scope, profile, bridge, add=True, dry_run=dry_run, memory=memory, into=ctx.only)
    if not dry_run:
        from ..search import lexicon

        lexicon.where()  # built now, so the harness's first prompt need not build it
    _report(outcome, as_json)


@cli.command()
@_options
def uninstall(
    harness: str, scope: str | None, profile: str | None, bridge: str | None, dry_run: bool, as_json: bool
) -> None:
    """Remove exactly the hooks `install` added (and the `autoMemoryEnabled` setting
    `install --memory sagemem` made); every other setting stays."""
    _report(_apply(harness, scope, profile, bridge, add=False, dry_run=dry_run), as_json)


def _apply(
    harness: str,
    scope: str | None,
    profile: str | None,
    bridge: str | None,
    *,
    add: bool,
    dry_run: bool,
    memory: str | None = None,
    into: str | None = None,
) -> dict[str, object]:
    from ..agents.install import apply, own_installer

    record = HARNESSES[harness]
    if record.installer:  # a module of its own (dsh: its profiles' patch layers, the hooks bridge)
        return own_installer(record)(add=add, scope=scope, profile=profile, bridge=bridge, dry_run=dry_run)
    if profile or bridge:
        raise click.UsageError("--profile and --bridge are for dsh only")
    return apply(harness, scope or record.scopes[0], add=add, dry_run=dry_run, memory=memory, into=into)


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _report(outcome: dict[str, object], as_json: bool) -> None:
    if as_json:
        return _print_json(outcome)
    if outcome.get("import"):  # first, as it is done first: Claude Code's memory goes off after it
        _report_import(outcome["import"], bool(outcome.get("dry_run")))
    # Each file with its own changes (dsh's outcome has one path for all of them).
    files: Any = outcome.get("files") or [{"path": outcome["path"], "changes": outcome["changes"]}]
    for file in files:
        for line in file["changes"] or ["nothing to change"]:
            say(f"{file['path']}: {line}")
    shared = [f["path"] for f in files if f.get("shared") and (f["changes"] or Path(f["path"]).exists())]
    if shared:  # the project's settings, for the team; the rest are this machine's own
        say(f"to commit with the project: {', '.join(shared)}")
        own = [f["path"] for f in files if f.get("shared") is False and f["changes"]]
        if own:
            say(f"this machine's own (not to commit): {', '.join(own)}")
    for backup in _listed(outcome.get("backups")):
        say(f"backup: {backup}")
    for note in _listed(outcome.get("notes")):
        say(str(note))
    if outcome.get("todo"):
        lines = str(outcome["todo"]).splitlines()
        if len(lines) == 1:
            say(f"still to do, by you: {lines[0]}")
        else:
            say("still to do, by you:")
            for line in lines:
                say(f"  {line}")
    if outcome.get("dry_run"):
        say("dry run: nothing written", err=True)
    sys.stdout.flush()


def _report_import(imported: Any, dry_run: bool) -> None:
    """The import of Claude Code's memories, file by file, after the snapshot it took."""
    scope = f"the {imported['into']} scope ({imported['memory_dir']})"
    if imported["snapshot"]:
        say(f"snapshot of {scope} before the import: {imported['snapshot']}")
    elif dry_run and any(f["status"] == "imported" for f in imported["files"]):
        say(f"snapshot of {scope} before the import: not taken in a dry run")
    for file in imported["files"]:
        say(f"{file['path']}: {file['change']}")
    if not imported["files"]:
        say(f"{imported['from']}: no memories to import")


@cli.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check that sagemem really runs where it is installed; changes nothing.

    For each harness whose settings hold a sagemem hook: the hook's command resolves and
    answers a test event, each MCP entry starts and answers, the harness lets the hooks run
    (Codex trust, Claude Code's disableAllHooks, Gemini folder trust); then the memory
    directory a hook would use here. One line per finding, with the fix for each problem;
    exits 1 if there is a problem.

    \b
    Example:
        sagemem doctor
    """
    from ..agents.doctor import UNKNOWN, diagnose

    report = diagnose()
    if as_json:
        _print_json(report.to_dict())
    else:
        for finding in report.findings:
            label = "could not check" if finding.status == UNKNOWN else finding.status
            say(f"{label}: {finding.area}: {finding.message}")
            if finding.fix:
                say(f"  fix: {finding.fix}")
        unchecked = f", {report.unknown} not checked" if report.unknown else ""
        say(f"{count(report.problems, 'problem')}{unchecked}")
    if not report.ok:
        sys.exit(1)


@cli.command()
@pass_ctx
def mcp(ctx: _Context) -> None:
    """Serve the memory set over MCP on stdio.

    \b
    Example (Claude Code):
        claude mcp add --scope project sagemem -- sagemem mcp
    """
    from .. import __version__
    from ..agents.mcp_server import serve

    serve(ctx.scopes, version=__version__)  # scopes not made yet too: the first save makes its own


@cli.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1 (default: any free one)."
)
@click.option("--no-open", is_flag=True, help="Print the URL; do not open a browser.")
@pass_ctx
def ui(ctx: _Context, port: int, no_open: bool) -> None:
    """Serve a local web page to browse, edit, archive and check the memories of every scope.

    Only on 127.0.0.1, and only for the URL printed (it carries this run's token).

    \b
    Example:
        sagemem ui --no-open
    """
    from ..ui.server import serve

    memories = ctx.memory_set
    memories.first.memories()  # a missing directory fails here, with the usual message
    try:
        serve(memories, port=port, open_browser=not no_open, announce=lambda line: say(line, err=True))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None


@cli.command()
@pass_ctx
def watch(ctx: _Context) -> None:
    """Watch the memory directory: print health problems as they appear (+) and clear (-),
    and keep the search cache current. Ctrl-C stops it.

    \b
    Example:
        sagemem watch
    """
    import threading

    from .watch import watch as run

    stop = threading.Event()
    store = ctx.store
    store.memories()  # a missing directory fails here, with the usual message
    say(f"watching {store.memory_dir} (Ctrl-C to stop)", err=True)
    try:
        run(store, lambda line: say(line), stop)
    except KeyboardInterrupt:
        stop.set()


@cli.group(cls=_DefaultGroup, default="status")
@json_option
def daemon(as_json: bool) -> None:
    """The resident process that runs hooks warm: status (default), start, stop, serve.

    Hooks start it themselves, and it ends after half an hour without a hook; these commands
    are for looking at it and for scripts. SAGEMEM_DAEMON=off: hooks run in their own process.
    """


@daemon.command("status")
@json_option
def daemon_status(as_json: bool = False) -> None:
    """Whether it runs, and which memory directories it watches."""
    from ..agents.daemon import status

    found = status()
    if as_json:
        return _print_json(found)
    if not found["enabled"]:
        return say("hooks run in their own process here (Linux only; SAGEMEM_DAEMON=off turns it off)")
    if not found["running"]:
        return say(f"not running (the next hook starts it); socket {found['socket']}")
    journal = "watches" if found["journal"] else "cannot watch (no inotify), lists"
    say(f"running, pid {found['pid']}, {count(found['hooks'], 'hook')} run; {journal}:")
    for folder in found["watched"]:
        say(f"  {folder}")


@daemon.command("start")
def daemon_start() -> None:
    """Start it in the background now, rather than at the next hook."""
    from ..agents.daemon import start, status

    if status()["running"]:
        return say("already running")
    say("started" if start(asked=True) else "not started: hooks run in their own process here")


@daemon.command("stop")
def daemon_stop() -> None:
    """End it; the next hook starts it again unless SAGEMEM_DAEMON=off."""
    from ..agents.daemon import stop

    say("stopped" if stop() else "not running")


@daemon.command("serve", hidden=True)
@click.option("--key", default=None, help="The installation the starting hook expects.")
def daemon_serve(key: str | None) -> None:
    """Run it in the foreground (what `start` runs, detached)."""
    from ..agents.daemon import serve

    serve(key)
