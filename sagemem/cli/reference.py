"""The generated parts of docs/cli.md: each command's usage and option table, read from the
click commands, and the MCP tools' table, read from the server's own tool list.

The page is prose written by hand around regions this module writes; a region is the lines
between two marker comments, each on a line of its own:

    <!-- [[[generated: sagemem snapshot rollback]]] -->
    ...written by this module: never edit by hand...
    <!-- [[[end]]] -->

A region is named after what it documents: a command by its full path (`sagemem` itself,
`sagemem init`, `sagemem snapshot rollback`), the MCP tools as `mcp tools`. Every command and
subcommand, hidden ones included, has exactly one region; a region that names nothing is an
error. To regenerate the regions in place, or to check them without writing (exit 1, naming
each stale, missing or unknown region; what CI runs through tests/test_cli_reference.py):

    python -m sagemem.cli.reference docs/cli.md
    python -m sagemem.cli.reference --check docs/cli.md

Why not the help text itself, or cog: `--help` wraps to the terminal and hides defaults,
while a table is stable and says more; cog would be a dependency and puts Python in the page
(docs/decisions.md). The output depends on nothing but the code: no terminal width (click's
formatter is not used), no environment values and no absolute paths. Only the generator and
the tests import this module; the hooks and the other commands never do.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

PROG = "sagemem"  # the name `main()` gives the root group, whatever the script is called
MCP_REGION = "mcp tools"
START = re.compile(r"^<!-- \[\[\[generated: (?P<name>[^\]]+?)\]\]\] -->$")
END = "<!-- [[[end]]] -->"
MARKER = re.compile(r"^<!-- \[\[\[")  # any line that looks like a marker: a typo is an error
REGENERATE = "python -m sagemem.cli.reference docs/cli.md"

# --- commands ------------------------------------------------------------------------------


def walk(root: click.Command, prog: str = PROG) -> Iterator[click.Context]:
    """A context for every command under `root` and `root` itself, parents before their
    subcommands, subcommands in click's order (sorted by name). A context gives the command
    its full path and, with the command's `context_settings` as click's own would have them,
    its help option's names; none is invoked, so nothing is parsed or run."""

    def visit(command: click.Command, name: str, parent: click.Context | None) -> Iterator[click.Context]:
        ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
        yield ctx
        if isinstance(command, click.Group):
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                if sub is not None:
                    yield from visit(sub, sub_name, ctx)

    yield from visit(root, prog, None)


def render_command(ctx: click.Context) -> str:
    """One command's region: its usage line as click prints it (never wrapped), what click
    knows about it beyond that (hidden, deprecated, runs without a subcommand), the table of
    its arguments and options, and for a group the table of its commands."""
    command = ctx.command
    usage = " ".join([ctx.command_path, *_usage_pieces(ctx)])
    parts = ["```\n" + usage + "\n```"]
    notes = []
    if command.hidden:
        notes.append("Hidden from the list of commands in `--help`.")
    if command.deprecated:
        notes.append("Deprecated.")
    if isinstance(command, click.Group) and command.invoke_without_command:
        notes.append("Runs without a command too.")
    if notes:
        parts.append(" ".join(notes))
    rows = [_param_row(param, ctx) for param in command.get_params(ctx) if _documented(param, ctx)]
    if rows:
        parts.append(_table(("Parameter", "Type", "Required", "Default", "Description"), rows))
    else:
        parts.append("No options besides `--help`.")
    if isinstance(command, click.Group):
        listed = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                summary = _markdown(sub.get_short_help_str(limit=10_000), cell=True)
                listed.append((f"`{name}`", summary + (" (hidden)" if sub.hidden else "")))
        parts.append(_table(("Command", "Summary"), listed))
    return "\n\n".join(parts) + "\n"


# The subcommand's place in a group's usage line, as click spells it by default: before
# click 8.4.2 always `COMMAND [ARGS]...`, since then `[COMMAND] [ARGS]...` for a group that
# runs without a command too. Keyed by (chain, invoke_without_command).
_SUBCOMMAND_METAVARS = {
    (False, False): "COMMAND [ARGS]...",
    (False, True): "[COMMAND] [ARGS]...",
    (True, False): "COMMAND1 [ARGS]... [COMMAND2 [ARGS]...]...",
    (True, True): "[COMMAND1] [ARGS]... [COMMAND2 [ARGS]...]...",
}


def _usage_pieces(ctx: click.Context) -> list[str]:
    """The usage line's pieces after the command's path, as click gives them, but a group's
    subcommand in the newest click's spelling whichever click is installed: the page is the
    same on every click that pyproject.toml allows (a metavar a group chose is kept)."""
    command = ctx.command
    pieces = command.collect_usage_pieces(ctx)
    if isinstance(command, click.Group) and pieces and pieces[-1] in _SUBCOMMAND_METAVARS.values():
        pieces[-1] = _SUBCOMMAND_METAVARS[(command.chain, command.invoke_without_command)]
    return pieces


def _documented(param: click.Parameter, ctx: click.Context) -> bool:
    """What `--help` shows, less `--help` itself (every command has it): hidden options (an
    old spelling kept working) are for the prose to mention."""
    if isinstance(param, click.Option):
        if param.hidden:
            return False
        if param.is_flag and set(param.opts) <= set(ctx.help_option_names):
            return False
    return True


def _param_row(param: click.Parameter, ctx: click.Context) -> tuple[str, str, str, str, str]:
    if isinstance(param, click.Option):
        names = ", ".join(f"`{opt}`" for opt in _by_length(param.opts))
        if param.secondary_opts:
            names += " / " + ", ".join(f"`{opt}`" for opt in _by_length(param.secondary_opts))
        text = param.help or ""
    else:
        many = param.nargs == -1 or param.nargs > 1
        names = f"`{param.human_readable_name}{'...' if many else ''}`"
        text = getattr(param, "help", None) or ""  # click's arguments have no help of their own
    return (
        names,
        _type(param, ctx),
        "yes" if param.required else "",
        _default(param, ctx),
        _markdown(text, cell=True),
    )


def _by_length(opts: Sequence[str]) -> list[str]:
    """Short options first, as click's help lists them (`-q, --query`)."""
    return sorted(opts, key=lambda opt: len(opt) - len(opt.lstrip("-/+")))


def _type(param: click.Parameter, ctx: click.Context) -> str:
    """The value a parameter takes, in words; choices and ranges spelled out."""
    kind = param.type
    if isinstance(param, click.Option) and param.count:
        return "count"
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(kind, click.Choice):
        said = ", ".join(f"`{_choice(choice)}`" for choice in kind.choices)
    elif isinstance(kind, (click.IntRange, click.FloatRange)):
        base = "integer" if isinstance(kind, click.IntRange) else "number"
        said = f"{base}, {_bounds(kind)}"
    elif isinstance(kind, click.Path):
        said = "file" if not kind.dir_okay else "directory" if not kind.file_okay else "path"
    elif isinstance(kind, click.File):
        said = "file"
    else:
        said = {"text": "text", "integer": "integer", "float": "number", "boolean": "true or false"}.get(
            kind.name, kind.name
        )
    if param.metavar and not isinstance(kind, click.Choice):
        said = f"`{param.metavar}` ({said})"
    if isinstance(param, click.Option) and param.multiple:
        said += ", repeatable"
    if isinstance(param, click.Argument) and param.nargs == -1:
        said += ", one or more" if param.required else ", any number"
    elif param.nargs > 1:
        said += f", {param.nargs} of them"
    return _markdown(said, cell=True, escape=False)


def _choice(choice: Any) -> str:
    return choice.name if isinstance(choice, enum.Enum) else str(choice)


def _bounds(kind: click.IntRange | click.FloatRange) -> str:
    low, high = kind.min, kind.max
    if low is not None and high is not None and not kind.min_open and not kind.max_open:
        return f"{low} to {high}"
    said = []
    if low is not None:
        said.append(f"{'more than' if kind.min_open else 'at least'} {low}")
    if high is not None:
        said.append(f"{'less than' if kind.max_open else 'at most'} {high}")
    return " and ".join(said) or "any"


def _default(param: click.Parameter, ctx: click.Context) -> str:
    """The default as click knows it, never as this machine would compute it: a default
    computed at run time is said as click's help says it (a `show_default` text) or as
    `(computed)`; an absolute path is not shown (the help says where it comes from)."""
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str):
        return _markdown(shown, cell=True)
    if shown is False:
        return ""  # the command chose to say nothing about it
    value = param.get_default(ctx, call=False)
    if callable(value):
        said = "(computed)"
    elif isinstance(param, click.Option) and param.is_flag:
        said = "on" if value is not None and value is not False and value == param.flag_value else ""
    else:
        said = _value(value)
    envvar = param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar or ())
    if envvar:
        said = f"{said}; env `{envvar}`" if said else f"env `{envvar}`"
    return said


def _value(value: Any) -> str:
    """A default that reads the same on every machine, else ""."""
    if type(value).__module__.partition(".")[0] == "click":
        return ""  # click's own "no default" marker (an enum member since click 8.3)
    if isinstance(value, (list, tuple)):
        items = [_value(item) for item in value]
        return ", ".join(items) if all(items) else ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, enum.Enum):
        return f"`{value.name}`"
    if isinstance(value, (int, float)):
        return f"`{value}`"
    if isinstance(value, (str, Path)) and str(value):
        text = str(value)
        if os.path.isabs(text) or text.startswith("~") or "\n" in text:
            return ""
        return "`" + text.replace("`", "'").replace("|", "\\|") + "`"
    return ""  # None, "", or an object with no spelling that holds on every machine


# --- MCP tools -----------------------------------------------------------------------------


def mcp_tools() -> list[dict[str, Any]]:
    """The tools as the server lists them to a client (`tools/list`), asked in-process: the
    server is built over a directory it never opens, and nothing is started or read."""
    from ..agents.mcp_server import build
    from ..memory_store import MemoryStore

    server = build(MemoryStore(os.devnull))
    reply = server.answer(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    if reply is None or "result" not in reply:
        raise RuntimeError(f"the MCP server did not list its tools: {reply!r}")
    tools: list[dict[str, Any]] = reply["result"]["tools"]
    return tools


def render_mcp_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """Each tool in the server's order: its name, its description and a table of its
    parameters from the input schema."""
    parts = [f"{len(tools)} tools, in the order the server lists them."]
    for tool in tools:
        parts.append(f"**`{tool['name']}`**: {_markdown(tool.get('description', ''), cell=False)}")
        schema = tool.get("inputSchema", {})
        required = set(schema.get("required", ()))
        rows = []
        for name, prop in schema.get("properties", {}).items():
            default = f"`{json.dumps(prop['default'], ensure_ascii=False)}`" if "default" in prop else ""
            rows.append(
                (
                    f"`{name}`",
                    _schema_type(prop),
                    "yes" if name in required else "",
                    default.replace("|", "\\|"),
                    _markdown(prop.get("description", ""), cell=True),
                )
            )
        if rows:
            parts.append(_table(("Parameter", "Type", "Required", "Default", "Description"), rows))
        else:
            parts.append("No parameters.")
    return "\n\n".join(parts) + "\n"


def _schema_type(schema: Mapping[str, Any]) -> str:
    """A JSON Schema type in words: `string or null`, `array of string`."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_schema_type(option) for option in schema[key])
    if "enum" in schema:
        return ", ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in schema["enum"]).replace("|", "\\|")
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return "array of " + _schema_type(schema.get("items", {}))
    return str(kind) if kind else "any"


# --- Markdown ------------------------------------------------------------------------------

_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def _markdown(text: str, *, cell: bool, escape: bool = True) -> str:
    """`text` on one line, shown as written: outside code spans the characters Markdown
    would take as markup (`<type>` as an HTML tag, `*` as emphasis) are escaped; in a table
    cell every `|` is (GitHub's tables split cells on it, code spans included)."""
    text = " ".join(text.split())
    if escape:
        done, at = [], 0
        for code in _CODE.finditer(text):
            done += [_escape(text[at : code.start()]), code.group(0)]
            at = code.end()
        text = "".join([*done, _escape(text[at:])])
    return text.replace("|", "\\|") if cell else text


def _escape(prose: str) -> str:
    prose = re.sub(r"([\\<*])", r"\\\1", prose)
    # `_` is emphasis only where it is not inside a word (`snake_case` stays as it is).
    return re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", prose)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- regions -------------------------------------------------------------------------------


def generated(root: click.Command | None = None, prog: str = PROG, *, mcp: bool = True) -> dict[str, str]:
    """Every region's text by name: each command under `root` (sagemem's own by default),
    and the MCP tools unless `mcp` is false (a test's own group has none)."""
    from . import cli

    blocks = {ctx.command_path: render_command(ctx) for ctx in walk(root or cli, prog)}
    if mcp:
        blocks[MCP_REGION] = render_mcp_tools(mcp_tools())
    return blocks


@dataclass(frozen=True)
class Region:
    name: str
    start: int  # index of the opening marker's line
    end: int  # index of the closing marker's line


class MarkerError(ValueError):
    """Markers that do not pair up: nothing can be regenerated safely."""


def regions(lines: Sequence[str]) -> list[Region]:
    """The regions of a page given as its lines (with or without line ends)."""
    found, open_name, open_at = [], None, -1
    for index, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        start = START.match(line)
        if start:
            if open_name is not None:
                opened = f"`{open_name}` (line {open_at + 1})"
                raise MarkerError(f"line {index + 1}: a region opens inside {opened}")
            open_name, open_at = start.group("name"), index
        elif line == END:
            if open_name is None:
                raise MarkerError(f"line {index + 1}: {END} closes no region")
            found.append(Region(open_name, open_at, index))
            open_name = None
        elif MARKER.match(line):
            raise MarkerError(f"line {index + 1}: not a marker this generator knows: {line}")
    if open_name is not None:
        raise MarkerError(f"line {open_at + 1}: region `{open_name}` is never closed ({END})")
    return found


@dataclass
class Outcome:
    """The page with every known region written anew, and what was wrong with the old one."""

    text: str
    stale: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return not (self.stale or self.missing or self.unknown or self.repeated)

    def problems(self, path: str = "docs/cli.md") -> list[str]:
        said = [f"{path}: region `{name}` is stale" for name in self.stale]
        said += [
            f"{path}: region `{name}` names no command and is not `{MCP_REGION}` (remove it)"
            for name in self.unknown
        ]
        said += [f"{path}: region `{name}` appears more than once (keep one)" for name in self.repeated]
        return said + self.missing_said(path)

    def missing_said(self, path: str = "docs/cli.md") -> list[str]:
        """How to add each missing region: only a person knows where in the prose it goes."""
        return [
            f"{path}: no region for `{name}`: add the two lines "
            f"`<!-- [[[generated: {name}]]] -->` and `{END}` where it belongs, then regenerate"
            for name in self.missing
        ]


def update(text: str, blocks: Mapping[str, str]) -> Outcome:
    """`text` with each region that names a block holding that block (blank lines around
    it, so the Markdown around it keeps its meaning); other regions are left as they are."""
    lines = text.splitlines(keepends=True)
    found = regions(lines)
    counts = Counter(region.name for region in found)
    outcome = Outcome(
        text,
        missing=[name for name in blocks if name not in counts],
        unknown=sorted({region.name for region in found if region.name not in blocks}),
        repeated=sorted(name for name, n in counts.items() if n > 1),
    )
    done, at = [], 0
    for region in found:
        done += lines[at : region.start + 1]
        old = "".join(lines[region.start + 1 : region.end])
        new = old if region.name not in blocks else "\n" + blocks[region.name] + "\n"
        if new != old and region.name not in outcome.stale:
            outcome.stale.append(region.name)
        done.append(new)
        at = region.end
    done += lines[at:]
    outcome.text = "".join(done)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the regions of a page in place, or with `--check` only say which are not
    current. Exit 0 when the page is (or now is) current, 1 otherwise."""
    parser = argparse.ArgumentParser(
        prog="python -m sagemem.cli.reference", description="Regenerate the generated regions of docs/cli.md."
    )
    parser.add_argument("page", type=Path, help="the Markdown page, docs/cli.md")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 unless all is current")
    args = parser.parse_args(argv)
    page: Path = args.page
    try:
        text = page.read_text(encoding="utf-8")
        outcome = update(text, generated())
    except (OSError, MarkerError) as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 1
    problems = outcome.problems(str(page))
    if args.check:
        for problem in problems:
            print(problem, file=sys.stderr)
        if outcome.stale:
            print(f"regenerate with: {REGENERATE}", file=sys.stderr)
        return 0 if outcome.current else 1
    if outcome.unknown or outcome.repeated:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{page}: not written", file=sys.stderr)
        return 1
    if outcome.text != text:
        from ..store.files import write_atomic

        write_atomic(page, outcome.text.encode("utf-8"))
        for name in outcome.stale:
            print(f"{page}: regenerated `{name}`")
    for problem in outcome.missing_said(str(page)):
        print(problem, file=sys.stderr)
    return 1 if outcome.missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
