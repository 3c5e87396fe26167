"""`sagemem dream`: consolidation by a model, report first; list, show, apply, rollback."""

from __future__ import annotations

from typing import Any

import click

from .base import _Context, _DefaultGroup, _print_json, cli, json_option, parts_option, pass_ctx, say


@cli.group(cls=_DefaultGroup)
@click.option(
    "--apply", "apply_", is_flag=True, help="Let the model change the directory (after a snapshot)."
)
@click.option("--scope", metavar="SCOPE", help="The scope to tidy (project, user ...; see `sagemem path`).")
@click.option("--model", help="Model name (else SAGEMEM_DREAM_MODEL, the dream_model setting).")
@click.option("--base-url", help="OpenAI-compatible endpoint (else SAGEMEM_DREAM_BASE_URL, OPENAI_BASE_URL).")
@click.option("--max-rounds", type=click.IntRange(1, 200), help="Model requests at most (default 24).")
@click.option(
    "--sessions",
    is_flag=True,
    help="Let the model search past sessions' transcripts (sends conversation text to it).",
)
@json_option
@click.pass_context
def dream(
    click_ctx: click.Context,
    apply_: bool,
    scope: str | None,
    model: str | None,
    base_url: str | None,
    max_rounds: int | None,
    sessions: bool,
    as_json: bool,
) -> None:
    """A model tidies the memory directory: merges duplicates, archives what was
    contradicted, fixes links and dates. Report mode unless --apply: nothing changes, the
    proposals go to a report (`dream apply RUN` carries them out after review).

    \b
    Example:
        sagemem dream --base-url https://api.deepseek.com --model deepseek-chat
    """
    from ..dream import dream as run

    ctx = click_ctx.find_object(_Context)
    if ctx is None:  # the root command makes one before any subcommand runs
        raise click.UsageError("sagemem dream runs under the sagemem command")
    if scope:
        ctx.only = scope
    manifest = run(
        ctx.store, apply=apply_, model=model, base_url=base_url, max_rounds=max_rounds, sessions=sessions
    )
    if as_json:
        return _print_json(manifest)
    _summary(ctx, manifest)


@dream.command("list")
@json_option
@pass_ctx
def dream_list(ctx: _Context, as_json: bool) -> None:
    """Every run, oldest first, with its status (`rolled back` once undone)."""
    from ..dream import summaries

    found = summaries(ctx.store)
    if as_json:
        return _print_json(found)
    width = max([11] + [len(m["status"]) for m in found])
    for m in found:
        say(
            f"{m['id']}  {m['mode']:<6}  {m['status']:<{width}}  {m['changes']:>3} changes"
            f"  {m['proposals']:>3} proposals  {m['model'] or '-'}"
        )


@dream.command("show")
@click.argument("run_id")
@json_option
@pass_ctx
def dream_show(ctx: _Context, run_id: str, as_json: bool) -> None:
    """One run's manifest (--json) or its report."""
    from ..dream import report, show

    manifest = show(ctx.store, run_id)
    if as_json:
        return _print_json(manifest)
    # The model's words, its reasons and refused arguments are quoted in the report: each
    # line is shown with escapes for what a terminal would act on, as every command shows text.
    text = report.text(manifest)
    for line in text.removesuffix("\n").split("\n") if text else []:
        say(line)


@dream.command("apply")
@click.argument("run_id")
@json_option
@pass_ctx
def dream_apply(ctx: _Context, run_id: str, as_json: bool) -> None:
    """Carry out a report run's proposals as reviewed, without asking the model again."""
    from ..dream import apply_proposals

    manifest = apply_proposals(ctx.store, run_id)
    if as_json:
        return _print_json(manifest)
    _summary(ctx, manifest)


@dream.command("rollback")
@click.argument("run_id")
@parts_option("files: only what the run changed; all: the whole directory as before the run.")
@json_option
@pass_ctx
def dream_rollback(ctx: _Context, run_id: str, parts: str, as_json: bool) -> None:
    """Undo a run, once (the present is snapshotted first; nothing is deleted)."""
    from ..dream import rollback

    done = rollback(ctx.store, run_id, scope=parts)
    if as_json:
        return _print_json(done)
    say(f"rolled back dream {run_id} (the present is kept as snapshot {done['protection']})")
    for key in ("restored", "archived", "retired", "kept", "conflicts"):
        if done.get(key):
            say(f"{key}: {', '.join(done[key])}")


def _summary(ctx: _Context, m: dict[str, Any]) -> None:
    say(f"dream {m['id']} ({m['mode']}): {m['status']}" + (f", {m['stop']}" if m.get("stop") else ""))
    changes, proposals = len(m["changes"]), len(m["proposals"])
    say(f"{m['rounds']} rounds, {m['tokens']} tokens; {changes} changes, {proposals} proposals")
    for c in m["changes"]:
        say(f"  {c['op']:<7} {c['file']}  {c['reason'] or '(no reason given)'}")
    for p in m["proposals"]:
        say(f"  propose {p['op']:<7} {p['file']}  {p['reason'] or '(no reason given)'}")
    if m["refused"]:
        say(f"{len(m['refused'])} refused calls (see the report)")
    if m.get("report_error"):
        say(f"report: not written ({m['report_error']}); `sagemem dream show {m['id']}` prints it")
    else:
        from ..dream import report

        say(f"report: {report.path(ctx.store, m['id'])}")
