"""Commands that connect sagemem to agent harnesses: hook, install, uninstall."""

from __future__ import annotations

import sys

import click

from .base import _Context, _print_json, cli, json_option, pass_ctx


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("harness", type=click.Choice(["claude-code", "codex", "gemini"]))
@click.argument("event", required=False)
@pass_ctx
def hook(ctx: _Context, harness: str, event: str | None) -> None:
    """Run as a harness hook: the event's JSON on stdin, the harness's JSON on stdout.

    Always exits 0; a failure prints nothing and is logged to <state>/hook.log.

    \\b
    Example (what `sagemem install claude-code` registers):
        sagemem hook claude-code UserPromptSubmit
    """
    from ..hooks import main

    raise SystemExit(
        main(
            [harness, *([event] if event else [])],
            memory_dir=str(ctx.memory_dir) if ctx.memory_dir else None,
            state_dir=str(ctx.state_dir) if ctx.state_dir else None,
        )
    )


@cli.command()
@click.argument("harness", type=click.Choice(["claude-code", "codex", "gemini"]))
@click.option("--scope", type=click.Choice(["project", "user"]), default="project", show_default=True)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@json_option
def install(harness: str, scope: str, dry_run: bool, as_json: bool) -> None:
    """Add sagemem's hooks to a harness's settings (idempotent; a backup is kept).

    \\b
    Example:
        sagemem install claude-code            # ./.claude/settings.json
        sagemem install gemini --scope user    # ~/.gemini/settings.json
    """
    from ..install import apply

    _report(apply(harness, scope, add=True, dry_run=dry_run), as_json)


@cli.command()
@click.argument("harness", type=click.Choice(["claude-code", "codex", "gemini"]))
@click.option("--scope", type=click.Choice(["project", "user"]), default="project", show_default=True)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@json_option
def uninstall(harness: str, scope: str, dry_run: bool, as_json: bool) -> None:
    """Remove exactly the hooks `install` added; every other setting stays."""
    from ..install import apply

    _report(apply(harness, scope, add=False, dry_run=dry_run), as_json)


def _report(outcome: dict[str, object], as_json: bool) -> None:
    if as_json:
        return _print_json(outcome)
    for line in outcome["changes"] or ["nothing to change"]:  # type: ignore[union-attr]
        click.echo(f"{outcome['path']}: {line}")
    for backup in outcome.get("backups") or []:  # type: ignore[union-attr]
        click.echo(f"backup: {backup}")
    if outcome.get("todo"):
        click.echo(f"still to do, by you: {outcome['todo']}")
    if outcome.get("dry_run"):
        click.echo("dry run: nothing written", err=True)
    sys.stdout.flush()


@cli.command()
@pass_ctx
def mcp(ctx: _Context) -> None:
    """Serve the memory directory over MCP on stdio (needs `pip install 'sagemem[mcp]'`).

    \b
    Example (Claude Code):
        claude mcp add --scope project sagemem -- sagemem mcp
    """
    from ..errors import SagememError, StoreNotFound

    location = ctx.location
    if not location.memory_dir.is_dir():
        raise StoreNotFound(f"{location.memory_dir}: memory directory does not exist (run `sagemem init`)")
    try:
        from ..mcp_server import serve
    except ImportError:
        raise SagememError("the MCP server needs the mcp package: pip install 'sagemem[mcp]'") from None
    serve(location.memory_dir, location.state_dir)


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

    from ..watch import watch as run

    stop = threading.Event()
    store = ctx.store
    store.memories()  # a missing directory fails here, with the usual message
    click.echo(f"watching {store.memory_dir} (Ctrl-C to stop)", err=True)
    try:
        run(store, lambda line: click.echo(line), stop)
    except KeyboardInterrupt:
        stop.set()
