"""The import contract of docs/architecture.md, read from the source: each part imports
only the parts below it, the library never imports its front ends, the hook loads no more
than it needs, and the page names every module."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_project import warm_memory

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sagemem"

# Each part and the parts it may import (itself always). Lowest first.
ALLOWED: dict[str, set[str]] = {
    "store": set(),
    "search": {"store"},
    "care": {"store", "search"},
    "facade": {"store", "search", "care"},
    "dream": {"store", "search", "care", "facade"},
    "agents": {"store", "search", "care", "facade", "dream"},
    "ui": {"store", "search", "care", "facade", "dream"},
    "cli": {"store", "search", "care", "facade", "dream", "agents", "ui", "api"},
    "api": {"store", "facade"},  # sagemem/__init__.py: the public names
    "main": {"cli", "agents"},  # sagemem/__main__.py: the program
}
FACADE = {"sagemem.memory_store", "sagemem.memory_set"}
FRONT_ENDS = {"agents", "cli", "ui"}
LIBRARY = {"store", "search", "care", "facade", "dream"}


def part_of(module: str) -> str:
    """The part a module of the package belongs to; a module outside every part fails."""
    if module == "sagemem":
        return "api"
    if module == "sagemem.__main__":
        return "main"
    if module in FACADE:
        return "facade"
    head = module.split(".")[1]
    if head in ALLOWED and head not in ("facade", "api", "main"):
        return head
    raise AssertionError(f"{module} is in no part: put it in one of {sorted(ALLOWED)} (docs/architecture.md)")


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package under `package`, by dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int, bool]]:
    """(module imported, line, at load time) for each import of the package in the module,
    lazy ones and those for type checking included: each is a dependency."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top = {id(node) for node in tree.body}
    root = name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == root and target != name:
                yield target, node.lineno, id(node) in top


def violations(package: Path) -> list[str]:
    """Every import that breaks the contract, as `file:line: rule`."""
    known = modules(package)
    found = []
    for name, path in known.items():
        here = part_of(name)
        for target, line, _ in imports(name, path, known):
            there = part_of(target)
            if there != here and there not in ALLOWED[here]:
                rule = (
                    "the library never imports its front ends"
                    if here in LIBRARY and there in FRONT_ENDS
                    else f"{here} may import only {sorted(ALLOWED[here]) or 'itself'}"
                )
                found.append(f"{path.relative_to(package.parent)}:{line}: imports {target} ({there}): {rule}")
    return found


def test_each_part_imports_only_the_parts_below_it() -> None:
    assert violations(PACKAGE) == []


def test_the_contract_catches_what_it_forbids(tmp_path: Path) -> None:
    """The checker on a copy of the package with three planted imports: the store reaching
    for search, care for the facade, search for a front end."""
    copy = tmp_path / "sagemem"
    for path in modules(PACKAGE).values():
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    planted = {
        "store/names.py": "from ..search import tokenize\n",
        "care/health.py": "def late():\n    from ..memory_store import MemoryStore\n",
        "search/inject.py": "from ..agents.install import apply\n",
    }
    for file, text in planted.items():
        with open(copy / file, "a", encoding="utf-8") as out:
            out.write(text)
    found = violations(copy)
    assert len(found) == 3, found
    assert any("store/names.py" in v and "store may import only itself" in v for v in found)
    assert any("care/health.py" in v and "sagemem.memory_store (facade)" in v for v in found)
    assert any("search/inject.py" in v and "never imports its front ends" in v for v in found)
    (copy / "stray.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="sagemem.stray is in no part"):
        violations(copy)


def load_time_closure(start: str) -> set[str]:
    """The package's modules that importing `start` loads, following load-time imports only."""
    known = modules(PACKAGE)
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += [p for p in parents if p in known]
        todo += [t for t, _, at_load in imports(name, known[name], known) if at_load and t in known]
    return seen


def test_the_hook_module_loads_only_store_and_search() -> None:
    """What `sagemem.agents.hooks` imports when loaded: the rest is imported inside the event
    that needs it, so the prompt hook never pays for the facade, care, dream or a front end."""
    loaded = load_time_closure("sagemem.agents.hooks")
    outside = {m for m in loaded if part_of(m) not in ("store", "search", "api")}
    assert outside == {"sagemem.agents", "sagemem.agents.hooks"}


# The package modules the prompt hook loads, event by event: a new one is a cost paid on
# every prompt, to be weighed (`sagemem bench`) and then added here on purpose.
PROMPT_HOOK = {
    "sagemem", "sagemem.__main__", "sagemem.agents", "sagemem.agents.hooks",
    "sagemem.search", "sagemem.search.bm25", "sagemem.search.cache", "sagemem.search.corpus",
    "sagemem.search.inject", "sagemem.search.lexicon", "sagemem.search.render",
    "sagemem.search.retrieve", "sagemem.search.session", "sagemem.search.tokenize",
    "sagemem.store", "sagemem.store.command", "sagemem.store.config", "sagemem.store.errors",
    "sagemem.store.files", "sagemem.store.ledger", "sagemem.store.locking", "sagemem.store.log",
    "sagemem.store.names", "sagemem.store.text",
}  # fmt: skip
SESSION_START = PROMPT_HOOK | {
    "sagemem.store.archive", "sagemem.store.directory", "sagemem.store.frontmatter",
    "sagemem.store.guard", "sagemem.store.index", "sagemem.store.memory", "sagemem.store.native",
}  # fmt: skip


def loaded_by_hook(memory: Path, event: dict[str, object]) -> set[str]:
    code = (
        "import io, sys\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({json.dumps(event).encode()!r}))\n"
        "from sagemem.__main__ import main\n"
        "sys.argv = ['sagemem', 'hook', 'claude-code']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'sagemem'), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SAGEMEM_DIR": str(memory)},
        cwd=memory.parent,
    )
    assert "project_x.md" in done.stdout or event["hook_event_name"] == "SessionStart"
    return set(done.stderr.split())


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    return warm_memory(tmp_path)


def test_the_hook_loads_the_modules_it_loaded_before_and_no_more(warm: Path) -> None:
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "怎么部署 deploy"}
    assert loaded_by_hook(warm, prompt) == PROMPT_HOOK
    start = {"hook_event_name": "SessionStart", "session_id": "s2", "source": "startup"}
    assert loaded_by_hook(warm, start) == SESSION_START


def test_the_architecture_page_names_every_part_and_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name, path in modules(PACKAGE).items():
        if path.name == "__init__.py":
            assert f"`{path.parent.relative_to(PACKAGE).as_posix()}/`" in page or name == "sagemem", name
        else:
            named = re.search(rf"`(?:[\w/]+/)?{re.escape(path.name)}`", page)
            assert named, f"docs/architecture.md does not name {path.name}"
