"""docs/cli.md's generated regions (sagemem/cli/reference.py): the page is current, each
command has its one region, the check notices a change, every option says what it does, the
page is the same on every click pyproject.toml allows, and the MCP table names every tool,
as does the prose of docs/integrations.md that points to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import click
import pytest

from sagemem.agents.mcp_server import build
from sagemem.cli import cli, reference
from sagemem.memory_store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "cli.md"
INTEGRATIONS = ROOT / "docs" / "integrations.md"
START = re.compile(r"^<!-- \[\[\[generated: (.+)\]\]\] -->$", re.MULTILINE)


def command_paths(group: click.Group, prefix: str) -> list[str]:
    """Every command's full path, found through click's own `commands` tables (not the
    generator's walk), hidden commands included."""
    found = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += command_paths(command, f"{prefix} {name}")
        else:
            found.append(f"{prefix} {name}")
    return found


def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    """Every command with its full path, through click's own `commands` tables."""
    found: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix} {name}")
        else:
            found.append((f"{prefix} {name}", command))
    return found


def region_text(text: str, name: str) -> str:
    start = text.index(f"<!-- [[[generated: {name}]]] -->")
    return text[start : text.index(reference.END, start)]


# --- (a) the page is current: the CI check -------------------------------------------------


def test_the_page_is_current() -> None:
    text = PAGE.read_text(encoding="utf-8")
    outcome = reference.update(text, reference.generated())
    assert outcome.problems() == [], f"run: {reference.REGENERATE}"
    assert outcome.text == text


def test_the_check_command_passes_on_the_page_and_fails_on_a_stale_copy(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sagemem.cli.reference", "--check"]
    done = subprocess.run([*command, str(PAGE)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    stale = tmp_path / "cli.md"
    text = PAGE.read_text(encoding="utf-8")
    old = region_text(text, "sagemem init")
    stale.write_text(text.replace(old, old.replace("| `--git` |", "| `--gut` |")), encoding="utf-8")
    before = stale.read_bytes()
    done = subprocess.run([*command, str(stale)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert "region `sagemem init` is stale" in done.stderr
    assert "sagemem new" not in done.stderr
    assert stale.read_bytes() == before  # --check writes nothing


def test_regenerating_rewrites_only_the_regions(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    emptied = text
    for name in ("sagemem install", "mcp tools"):
        emptied = emptied.replace(region_text(text, name), f"<!-- [[[generated: {name}]]] -->\nold\n")
    page = tmp_path / "cli.md"
    page.write_text(emptied, encoding="utf-8")
    assert reference.main([str(page)]) == 0
    assert page.read_text(encoding="utf-8") == text  # the prose around them untouched
    assert reference.main(["--check", str(page)]) == 0


def test_the_output_is_the_same_whatever_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    first, home = reference.generated(), str(Path.home())
    monkeypatch.setenv("COLUMNS", "30")
    monkeypatch.setenv("HOME", "/somewhere/else")
    assert reference.generated() == first
    text = "".join(first.values())
    assert home not in text and str(ROOT) not in text and os.getcwd() not in text


# --- (b) one region for each command, none for a command that does not exist ---------------


def test_every_command_has_exactly_one_region() -> None:
    named = Counter(START.findall(PAGE.read_text(encoding="utf-8")))
    commands = command_paths(cli, "sagemem")
    assert len(commands) == len(set(commands))
    assert {name: n for name, n in named.items() if n != 1} == {}
    assert set(named) == {*commands, reference.MCP_REGION}
    assert "sagemem daemon serve" in named  # hidden from --help, documented all the same


def test_a_region_naming_no_command_and_a_missing_one_are_reported(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    renamed = text.replace("<!-- [[[generated: sagemem lock]]] -->", "<!-- [[[generated: sagemem lok]]] -->")
    outcome = reference.update(renamed, reference.generated())
    assert outcome.unknown == ["sagemem lok"] and outcome.missing == ["sagemem lock"]
    page = tmp_path / "cli.md"
    page.write_text(renamed, encoding="utf-8")
    assert reference.main([str(page)]) == 1
    assert page.read_text(encoding="utf-8") == renamed  # a region naming nothing: not written


def test_a_repeated_region_and_broken_markers_are_refused() -> None:
    block = "<!-- [[[generated: sagemem lock]]] -->\n<!-- [[[end]]] -->\n"
    outcome = reference.update(block + block, reference.generated(mcp=False))
    assert outcome.repeated == ["sagemem lock"] and not outcome.current
    with pytest.raises(reference.MarkerError, match="never closed"):
        reference.regions(["<!-- [[[generated: sagemem lock]]] -->", "text"])
    with pytest.raises(reference.MarkerError, match="closes no region"):
        reference.regions(["<!-- [[[end]]] -->"])
    with pytest.raises(reference.MarkerError, match="not a marker"):
        reference.regions(["<!-- [[[generate: sagemem lock]]] -->"])


def test_every_option_of_every_command_says_what_it_does() -> None:
    """An option without help is an empty cell in its table and a bare name in `--help`;
    hidden ones included (their help says what replaced them)."""
    bare = [
        f"{path} {'/'.join(param.opts)}"
        for path, command in commands(cli, "sagemem")
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert bare == []


# --- (c) the check can fail: a new option changes the output ------------------------------


def tiny(with_fast: bool) -> click.Group:
    """A group with one command, which has `--fast` or not."""

    @click.group()
    @click.option("--verbose", is_flag=True, help="Say more.")
    def tool(verbose: bool) -> None:
        """A tool."""

    def run(name: str, fast: bool = False, level: int = 2) -> None:
        """Run a thing."""

    if with_fast:
        run = click.option("--fast", is_flag=True, help="Go fast.")(run)
    level = click.option("--level", type=click.IntRange(1, 5), default=2, show_default=True, help="How hard.")
    run = level(run)
    run = click.argument("name")(run)
    tool.command("run")(run)
    return tool


def test_a_new_option_makes_the_region_stale() -> None:
    before = reference.generated(tiny(False), "tool", mcp=False)
    after = reference.generated(tiny(True), "tool", mcp=False)
    assert set(before) == {"tool", "tool run"}
    assert before["tool"] == after["tool"]
    assert "--fast" not in before["tool run"]
    assert "| `--fast` | flag |  |  | Go fast. |" in after["tool run"]
    page = "# tool\n\n" + "".join(f"<!-- [[[generated: {n}]]] -->\n<!-- [[[end]]] -->\n\n" for n in before)
    current = reference.update(page, before).text
    assert reference.update(current, before).current
    stale = reference.update(current, after)
    assert stale.stale == ["tool run"]
    assert "--fast" in stale.text and reference.update(stale.text, after).current


def test_a_command_is_rendered_from_its_click_objects() -> None:
    block = reference.generated(tiny(True), "tool", mcp=False)["tool run"]
    assert block.startswith("```\ntool run [OPTIONS] NAME\n```\n")
    assert "| `NAME` | text | yes |  |  |" in block
    assert "| `--level` | integer, 1 to 5 |  | `2` | How hard. |" in block
    assert "--help" not in block
    group = reference.generated(tiny(True), "tool", mcp=False)["tool"]
    assert "| `run` | Run a thing. |" in group


def test_a_groups_usage_line_is_the_same_on_every_click() -> None:
    """click before 8.4.2 spells the subcommand of a group that runs without one
    `COMMAND [ARGS]...`, since then `[COMMAND] [ARGS]...`: the page says the latter on any
    click pyproject.toml allows. The old spelling is set by hand here, as click 8.1 sets it."""

    @click.group(invoke_without_command=True, subcommand_metavar="COMMAND [ARGS]...")
    def alone() -> None:
        """Runs alone too."""

    @click.group(subcommand_metavar="[COMMAND] [ARGS]...")
    def needs() -> None:
        """Needs a command."""

    @click.group(subcommand_metavar="TASK")
    def own() -> None:
        """Chose its own metavar."""

    for group in (alone, needs, own):
        group.command("run")(lambda: None)
    usage = {
        name: reference.generated(group, name, mcp=False)[name].split("\n")[1]
        for name, group in (("alone", alone), ("needs", needs), ("own", own))
    }
    assert usage == {
        "alone": "alone [OPTIONS] [COMMAND] [ARGS]...",
        "needs": "needs [OPTIONS] COMMAND [ARGS]...",
        "own": "own [OPTIONS] TASK",
    }


def test_help_text_is_escaped_for_a_markdown_table() -> None:
    new = reference.generated()["sagemem new"]
    assert r"\<type>\_\<slug>.md" in new  # not an HTML tag, not emphasis
    assert reference._markdown("a|b `c|d` <e>", cell=True) == r"a\|b `c\|d` \<e>"
    assert reference._markdown("snake_case and _x_", cell=False) == r"snake_case and \_x\_"


# --- (d) the MCP table lists every tool the server serves ----------------------------------


def test_the_mcp_table_lists_every_tool_and_parameter() -> None:
    server = build(MemoryStore(os.devnull))
    table = region_text(PAGE.read_text(encoding="utf-8"), reference.MCP_REGION)
    listed = re.findall(r"^\*\*`(\w+)`\*\*", table, re.MULTILINE)
    assert listed == list(server.tools)
    assert len(listed) == 9
    for name, tool in server.tools.items():
        section = table.split(f"**`{name}`**", 1)[1].split("\n**`", 1)[0]
        for param, _, required in tool.params:
            row = next(line for line in section.splitlines() if line.startswith(f"| `{param}` |"))
            assert row.split(" | ")[2] == ("yes" if required else ""), (name, param)
        if not tool.params:
            assert "No parameters." in section


def test_integrations_names_every_served_tool_and_points_to_the_table() -> None:
    """docs/integrations.md keeps no table of its own (it would drift from the served tools):
    its MCP section names each tool the server lists and links to the generated table; no
    tool it names anywhere is one the server does not serve."""
    served = list(build(MemoryStore(os.devnull)).tools)
    text = INTEGRATIONS.read_text(encoding="utf-8")
    section = text.split("\n## MCP server\n", 1)[1].split("\n## ", 1)[0]
    assert "(cli.md#mcp-tools)" in section
    assert re.search(r"^### MCP tools$", PAGE.read_text(encoding="utf-8"), re.MULTILINE)  # the anchor
    assert set(re.findall(r"`(memory_\w+)`", section)) == set(served)
    assert set(re.findall(r"memory_[a-z]+(?![a-z_])", text)) <= set(served)
    assert not re.search(r"^\| tool \|", text, re.MULTILINE)
