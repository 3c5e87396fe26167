"""The import contract of docs/architecture.md, read from the source: each part imports
only the parts below it, the library never imports its front ends, the hook loads no more
than it needs, and the page names every module."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_project import hook_code, loaded, warm_memory

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sagemem"

# Each part and the parts it may import (itself always). Lowest first.
ALLOWED: dict[str, set[str]] = {
    "store": set(),
    "search": {"store"},
    "care": {"store"},
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


DYNAMIC = {"import_module", "__import__", "run_module"}  # importlib's, the builtin, runpy's


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int, bool]]:
    """(module imported, line, at load time) for each import of the package in the module:
    statements anywhere (in a function: lazy; under `TYPE_CHECKING`: for the checker; both
    are dependencies) and calls of `import_module`, `__import__` and `run_module` with a
    constant name. One with a computed name yields `?`: the contract cannot see it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    root = name.split(".")[0]

    def absolute(module: str, level: int) -> str:
        if not level:
            return module
        base = package.split(".")
        return ".".join(base[: len(base) - level + 1] + ([module] if module else []))

    def walk(node: ast.AST, at_load: bool) -> Iterator[tuple[str, int, bool]]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            at_load = False
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            at_load = False
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node.module or "", node.level)
            named = [f"{source}.{alias.name}" for alias in node.names]
            targets = [module if module in known else source for module in named]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in DYNAMIC and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    text = first.value
                    level = len(text) - len(text.lstrip("."))
                    targets = [absolute(text.lstrip("."), level)]
                else:
                    targets = ["?"]
        for target in targets:
            if target == "?" or (target.split(".")[0] == root and target != name):
                yield target, node.lineno, at_load
        for child in ast.iter_child_nodes(node):
            yield from walk(child, at_load)

    yield from walk(tree, True)


def exports(package: Path) -> dict[str, str]:
    """The public names `sagemem/__init__.py` imports on first use, and their modules."""
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS":
            table = ast.literal_eval(node.value)
            return {key: f"{package.name}.{value}" for key, value in table.items()}
    raise AssertionError("sagemem/__init__.py has no _EXPORTS table")


def violations(package: Path) -> list[str]:
    """Every import that breaks the contract, as `file:line: rule`."""
    known = modules(package)
    for name in known:
        part_of(name)  # a module outside every part fails here
    found = []
    edges = [
        (name, path, target, line)
        for name, path in known.items()
        for target, line, _ in imports(name, path, known)
    ]
    edges += [(package.name, package / "__init__.py", target, 0) for target in exports(package).values()]
    for name, path, target, line in edges:
        where = f"{path.relative_to(package.parent)}:{line}"
        if target == "?":
            if name != package.name:  # the public names' loader: its table is checked above
                found.append(f"{where}: imports a module by a computed name, which the contract cannot check")
            continue
        if target not in known:
            found.append(f"{where}: imports {target}, which does not exist")
            continue
        here, there = part_of(name), part_of(target)
        if there != here and there not in ALLOWED[here]:
            rule = (
                "the library never imports its front ends"
                if here in LIBRARY and there in FRONT_ENDS
                else f"{here} may import only {sorted(ALLOWED[here]) or 'itself'}"
            )
            found.append(f"{where}: imports {target} ({there}): {rule}")
    return found


def test_each_part_imports_only_the_parts_below_it() -> None:
    assert violations(PACKAGE) == []


def test_the_contract_catches_what_it_forbids(tmp_path: Path) -> None:
    """The checker on a copy of the package with planted imports of every kind: statements at
    load time, in a function and for type checking, `import_module` and `__import__` by a
    constant name, one by a computed name, and a public name exported from a front end."""
    copy = tmp_path / "sagemem"
    for path in modules(PACKAGE).values():
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert violations(copy) == []
    planted = {
        "store/names.py": "from ..search import tokenize\n",
        "care/health.py": "def late():\n    from ..memory_store import MemoryStore\n",
        "care/snapshot.py": "if TYPE_CHECKING:\n    from ..search.corpus import Corpus\n",
        "search/inject.py": "from ..agents.install import apply\n",
        "search/render.py": "import importlib\nui = importlib.import_module('sagemem.ui.server')\n",
        "store/files.py": "def f():\n    return __import__('sagemem.memory_store')\n",
        "store/text.py": "def g(name):\n    import importlib\n    return importlib.import_module(name)\n",
    }
    for file, text in planted.items():
        with open(copy / file, "a", encoding="utf-8") as out:
            out.write(text)
    init = copy / "__init__.py"
    init.write_text(
        init.read_text().replace(
            '"MemorySet": "memory_set",', '"MemorySet": "memory_set", "serve": "ui.server",'
        )
    )
    found = violations(copy)
    expected = [
        ("store/names.py", "sagemem.search.tokenize (search): store may import only itself"),
        ("care/health.py", "sagemem.memory_store (facade): care may import only ['store']"),
        ("care/snapshot.py", "sagemem.search.corpus (search): care may import only ['store']"),
        ("search/inject.py", "sagemem.agents.install (agents): the library never imports its front ends"),
        ("search/render.py", "sagemem.ui.server (ui): the library never imports its front ends"),
        ("store/files.py", "sagemem.memory_store (facade): store may import only itself"),
        ("store/text.py", "a module by a computed name"),
        ("sagemem/__init__.py", "sagemem.ui.server (ui): api may import only ['facade', 'store']"),
    ]
    for file, rule in expected:
        assert any(file in v and rule in v for v in found), (file, rule, found)
    assert len(found) == len(expected), found
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
    "sagemem", "sagemem.__main__", "sagemem.agents", "sagemem.agents.hooks", "sagemem.agents.relay",
    "sagemem.search", "sagemem.search.bilingual", "sagemem.search.bm25", "sagemem.search.cache",
    "sagemem.search.corpus", "sagemem.search.decide", "sagemem.search.fitted", "sagemem.search.inject",
    "sagemem.search.lexicon", "sagemem.search.related", "sagemem.search.render", "sagemem.search.tables",
    "sagemem.search.retrieve", "sagemem.search.session", "sagemem.search.tokenize",
    "sagemem.store", "sagemem.store.command", "sagemem.store.config", "sagemem.store.digests",
    "sagemem.store.errors", "sagemem.store.forms", "sagemem.store.harnesses",
    "sagemem.store.files", "sagemem.store.journal", "sagemem.store.ledger", "sagemem.store.locking",
    "sagemem.store.log",
    "sagemem.store.names", "sagemem.store.records", "sagemem.store.secret_shapes",
    "sagemem.store.secrets", "sagemem.store.shape", "sagemem.store.text",
}  # fmt: skip
# A start looks at MEMORY.md and the file names alone: no memory is parsed, no YAML read,
# unless the index needs mending (or the archive folder exists).
SESSION_START = PROMPT_HOOK | {
    "sagemem.store.index", "sagemem.store.listing", "sagemem.store.native",
    "sagemem.search.rules",  # the memories' language, for a start's framing
}  # fmt: skip
FILE_TOOL = PROMPT_HOOK | {
    "sagemem.store.directory", "sagemem.store.archive", "sagemem.store.frontmatter",
    "sagemem.store.guard", "sagemem.store.index", "sagemem.store.listing", "sagemem.store.memory",
}  # fmt: skip


def loaded_by_hook(memory: Path, event: dict[str, object]) -> set[str]:
    """The package's modules Claude Code's hook loads for `event`."""
    done = loaded(hook_code(event), tuple(modules(PACKAGE)), {**os.environ, "SAGEMEM_DIR": str(memory)})
    assert "project_x.md" in done.stdout or event["hook_event_name"] != "UserPromptSubmit"
    return set(done.stderr.split())


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    return warm_memory(tmp_path)


def test_the_hook_loads_the_modules_it_loaded_before_and_no_more(warm: Path) -> None:
    start = {"hook_event_name": "SessionStart", "session_id": "s", "source": "startup"}
    assert loaded_by_hook(warm, start) == SESSION_START
    assert "yaml" not in loaded(hook_code(start), ("yaml",), {**os.environ, "SAGEMEM_DIR": str(warm)}).stderr
    # A session's prompts after the one that settled its saving rules (its start, here).
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "怎么部署 deploy"}
    assert loaded_by_hook(warm, prompt) == PROMPT_HOOK
    # Records are plain named tuples at run time (store/records.py), digests come from
    # CPython's own sha256 (store/digests.py): neither `typing` nor OpenSSL is paid.
    env = {**os.environ, "SAGEMEM_DIR": str(warm)}
    assert loaded(hook_code(prompt), ("typing", "hashlib", "_hashlib"), env).stderr.split() == []
    # A session whose first hook is a prompt reads, once, whether it needs the rules (and
    # writes them).
    first = {**prompt, "session_id": "s2"}
    assert loaded_by_hook(warm, first) <= PROMPT_HOOK | {"sagemem.store.native", "sagemem.search.rules"}
    edit = {"file_path": str(warm / "project_x.md"), "old_string": "deploy", "new_string": "ship"}
    done = {"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Edit", "tool_input": edit}
    assert loaded_by_hook(warm, done) == FILE_TOOL


def test_a_hook_handed_to_the_resident_process_loads_only_the_relay() -> None:
    """What a relayed hook's own process imports beyond a bare start, before it hands its
    streams over: the entry point, the relay and the installation's digest; no `collections`
    (which `store/records.py` needs), no `re`, no `typing`."""
    code = (
        "import sys; before = set(sys.modules); import sagemem.__main__; "
        "from sagemem.agents import relay; relay.key(); print(*sorted(set(sys.modules) - before))"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    new = set(done.stdout.split())
    assert {m for m in new if m.startswith("sagemem")} == {
        "sagemem", "sagemem.__main__", "sagemem.agents", "sagemem.agents.relay", "sagemem.store",
        "sagemem.store.digests",
    }  # fmt: skip
    assert not new & {"collections", "re", "enum", "typing", "hashlib", "json"}, new


def test_a_file_tool_on_a_file_that_is_no_memory_loads_no_scanner(warm: Path) -> None:
    """PreToolUse runs before every Write and Edit the agent makes: on a file that is no
    memory it pays the prompt's modules and `native` (where Claude Code's folder is), and
    never the secret scan, which runs only for a memory file."""
    for path in (warm.parent / "src" / "main.py", warm.parent / "README.md"):
        write = {"file_path": str(path), "content": "token ghp_" + "Q7w" * 12}
        event = {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write"}
        code = hook_code({**event, "tool_input": write})
        env = {**os.environ, "SAGEMEM_DIR": str(warm)}
        done = loaded(code, (*modules(PACKAGE), "detect_secrets"), env)
        assert set(done.stderr.split()) <= PROMPT_HOOK | {"sagemem.store.native"}, path


def test_the_prompt_hook_that_indexes_a_file_itself_imports_no_scanner(warm: Path) -> None:
    """A file changed since the index was built is read by the prompt hook within its deadline:
    its secrets are looked for by the pattern pass, so detect-secrets is never imported on a
    prompt; the snippet it injects is redacted all the same."""
    token = "ghp_" + "Q7w" * 12
    text = f"---\ndescription: 部署 deploy notes\n---\n\n上线前先部署预发 deploy {token}\n"
    (warm / "project_x.md").write_text(text)
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s3", "prompt": "怎么部署 deploy"}
    env = {**os.environ, "SAGEMEM_DIR": str(warm)}
    done = loaded(hook_code(prompt), ("detect_secrets", "sagemem.store.secrets"), env)
    assert "project_x.md" in done.stdout and "[REDACTED by sagemem]" in done.stdout
    assert token not in done.stdout and done.stderr.split() == ["sagemem.store.secrets"]


def test_the_architecture_page_names_every_part_and_module() -> None:
    """Every folder, and every module by its name (with its folder where two share a name)."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    files = [path for path in modules(PACKAGE).values() if path.name != "__init__.py"]
    for path in modules(PACKAGE).values():
        if path.name == "__init__.py":
            folder = path.parent.relative_to(PACKAGE).as_posix()
            assert folder == "." or f"`{folder}/`" in page, f"docs/architecture.md does not name {folder}/"
            continue
        shared = sum(other.name == path.name for other in files) > 1
        name = f"{path.parent.name}/{path.name}" if shared else path.name
        named = re.search(rf"`(?:[\w/]+/)?{re.escape(name)}`", page)
        assert named, f"docs/architecture.md does not name {name}"
