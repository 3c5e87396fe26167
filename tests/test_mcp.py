"""The MCP server, in-process through the SDK's client and over stdio as a subprocess."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from sagemem import MemoryStore  # noqa: E402

from .mcp_client import connect  # noqa: E402
from .memories import DANCE, make  # noqa: E402

pytestmark = pytest.mark.anyio
TOOLS = {
    "memory_search",
    "memory_read",
    "memory_list",
    "memory_remember",
    "memory_update",
    "memory_write",
    "memory_archive",
    "memory_check",
    "memory_cite",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", DANCE)


def data(result: Any) -> Any:
    assert result.is_error is False, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return (
            content.get("result", content)
            if isinstance(content, dict) and set(content) == {"result"}
            else content
        )
    return json.loads(result.content[0].text)


async def test_every_tool_in_process(store: MemoryStore) -> None:
    async with connect(store) as client:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        assert all(t.description for t in listed.tools)

        hits = data(await client.call_tool("memory_search", {"query": "studio lease rent"}))
        assert hits[0]["file"] == "project_studio_opening.md" and len(hits[0]["version"]) == 64
        assert hits[0]["strong"] is True
        assert data(await client.call_tool("memory_search", {"query": "how do I undo a git commit"})) == []
        asked = "what was the lease negotiation about with the bank?"  # weak: asked for, so listed
        weak = data(await client.call_tool("memory_search", {"query": asked}))
        assert weak[0]["file"] == "project_studio_opening.md" and weak[0]["strong"] is False

        read = data(await client.call_tool("memory_read", {"file": "project_studio_opening.md"}))
        assert read["version"] == hits[0]["version"] and "Fifth Street" in read["text"]
        assert store.ledger()["project_studio_opening.md"].read.count == 1

        new_text = read["text"].replace("five years", "six years")
        written = data(
            await client.call_tool(
                "memory_write",
                {
                    "file": "project_studio_opening.md",
                    "content": new_text,
                    "expected_version": read["version"],
                },
            )
        )
        assert written["version"] != read["version"]

        # The old version again: refused, structured enough to act on, and kept as a conflict.
        stale = await client.call_tool(
            "memory_write",
            {
                "file": "project_studio_opening.md",
                "content": "---\ndescription: stale\n---\nx\n",
                "expected_version": read["version"],
            },
        )
        assert stale.is_error is True
        message = stale.content[0].text
        assert "version_conflict" in message
        conflict_id = message.split("conflict_id=")[1].rstrip("]")
        assert store.conflict(conflict_id).proposed == b"---\ndescription: stale\n---\nx\n"

        # A whole memory or nothing: no frontmatter, no description, or a new secret is refused.
        for content, rule in (
            ("just a note\n", "content has no frontmatter"),
            ("---\nname: x\n---\nbody\n", "description must not be empty"),
            ("---\ndescription: ci\n---\ntoken ghp_" + "Zx9" * 12 + "\n", "looks like a GitHub token"),
        ):
            refused = await client.call_tool("memory_write", {"file": "project_note.md", "content": content})
            assert refused.is_error is True and rule in refused.content[0].text
        assert not (store.memory_dir / "project_note.md").exists()

        traversal = await client.call_tool("memory_read", {"file": "../../etc/passwd.md"})
        assert traversal.is_error is True and "single path segment" in traversal.content[0].text
        reserved = await client.call_tool("memory_write", {"file": "MEMORY.md", "content": "x"})
        assert reserved.is_error is True and "reserved" in reserved.content[0].text

        created = data(
            await client.call_tool(
                "memory_write",
                {
                    "file": "project_new.md",
                    "content": "---\ndescription: made over mcp\ntype: project\n---\nhi\n",
                },
            )
        )
        assert created["file"] == "project_new.md"
        assert data(
            await client.call_tool("memory_cite", {"files": ["project_new.md"], "receipt": "r1"})
        ) == {"counted": ["project_new.md"]}
        archived = data(
            await client.call_tool("memory_archive", {"file": "project_new.md", "reason": "test"})
        )
        assert (
            archived["file"] == "project_new.md"
            and (store.memory_dir / "archive" / "project_new.md").exists()
        )
        report = data(await client.call_tool("memory_check", {}))
        assert report["ok"] is False  # the fixture's files were never listed in MEMORY.md
        assert {f["check"] for f in report["findings"]} == {"index-unlisted"}
        store.rebuild_index()
        assert data(await client.call_tool("memory_check", {}))["ok"] is True


async def test_edits_made_by_others_are_seen_without_a_restart(tmp_path: Path) -> None:
    # The project layout, where the memory folder itself sits inside `.sagemem`.
    store = make(tmp_path / "proj" / ".sagemem" / "memory", DANCE)
    async with connect(store) as client:
        assert data(await client.call_tool("memory_search", {"query": "zeppelin hangar"})) == []
        path = store.memory_dir / "reference_hangar.md"
        temp = store.memory_dir / ".hangar.tmp"
        temp.write_text(
            "---\ndescription: zeppelin hangar keys\n---\n\nThe zeppelin hangar key is at the desk.\n"
        )
        temp.rename(path)  # an editor's atomic save
        for _ in range(100):  # the watcher's event arrives within moments
            hits = data(await client.call_tool("memory_search", {"query": "zeppelin hangar"}))
            if hits:
                break
            await anyio.sleep(0.05)
        assert hits and hits[0]["file"] == "reference_hangar.md"
        path.write_text(path.read_text().replace("zeppelin", "airship"))  # edited in place

        def described(hits: list[dict[str, Any]]) -> list[str]:
            return [h["description"] for h in hits if h["file"] == "reference_hangar.md"]

        for _ in range(100):  # "hangar" still matches; the description must be the new one
            hits = data(await client.call_tool("memory_search", {"query": "zeppelin hangar"}))
            if described(hits) == ["airship hangar keys"]:
                break
            await anyio.sleep(0.05)
        assert described(hits) == ["airship hangar keys"]
        assert described(data(await client.call_tool("memory_search", {"query": "airship"}))) == [
            "airship hangar keys"
        ]


async def test_over_stdio_as_a_subprocess(store: MemoryStore) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sagemem", "--dir", str(store.memory_dir), "mcp"]
    )
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        hits = data(await client.call_tool("memory_search", {"query": "周一晚上可以排舞蹈课吗"}))
        assert hits[0]["file"] == "feedback_舞蹈课.md"
        bad = await client.call_tool("memory_read", {"file": "../x.md"})
        assert bad.is_error is True


async def test_tools_are_described_for_a_model(store: MemoryStore) -> None:
    async with connect(store) as client:
        for tool in (await client.list_tools()).tools:
            assert tool.description and "\n    " not in tool.description, tool.name  # no source indentation
            for name, schema in tool.input_schema.get("properties", {}).items():
                assert schema.get("description"), f"{tool.name}({name}) has no description"


async def test_remember_update_and_list_as_an_agent_uses_them(store: MemoryStore) -> None:
    store.rebuild_index()  # the fixture's files were written by hand: list them first
    async with connect(store) as client:
        made = data(
            await client.call_tool(
                "memory_remember",
                {
                    "type": "project",
                    "name": "studio lease",
                    "description": "When the studio lease on Fifth Street ends and the rent",
                    "body": "The lease runs to 2031-03-01; rent is due on the first.",
                    "aliases": ["租约"],
                },
            )
        )
        assert made["file"] == "project_studio_lease.md"
        assert [s["file"] for s in made["similar"]][:1] == ["project_studio_opening.md"]  # update it instead?
        text = (store.memory_dir / "project_studio_lease.md").read_text()
        assert text.startswith("---\nname: studio lease\n") and "aliases: [租约]" in text
        assert "(project_studio_lease.md)" in (store.memory_dir / "MEMORY.md").read_text()
        assert store.check().ok
        updated = data(
            await client.call_tool(
                "memory_update",
                {"file": made["file"], "expected_version": made["version"], "tags": ["lease"]},
            )
        )
        assert store.get("project_studio_lease.md").tags == ("lease",)
        stale = await client.call_tool(
            "memory_update", {"file": made["file"], "expected_version": made["version"], "tags": ["x"]}
        )
        assert stale.is_error and "version_conflict" in stale.content[0].text
        assert updated["version"] == store.get("project_studio_lease.md").version
        secret = await client.call_tool(
            "memory_remember",
            {"type": "reference", "name": "ci", "description": "CI token", "body": "ghp_" + "Zx9" * 12},
        )
        assert secret.is_error and "looks like a GitHub token" in secret.content[0].text
        taken = await client.call_tool(
            "memory_remember",
            {"type": "project", "name": "studio lease", "description": "Another lease", "body": "x"},
        )
        said = taken.content[0].text  # a name taken: what to do now, and how the person closes it
        assert taken.is_error and "duplicate name" in said
        assert "replaces the existing memory with it. Choose another name" in said  # a sentence of its own
        [cid] = re.findall(r"\[conflict_id=([0-9a-f]+)\]", said)  # two records may share a second
        assert "conflicts resolve" in said and store.conflict(cid).kind == "duplicate"
        listed = data(await client.call_tool("memory_list", {"type": "project"}))
        assert {m["file"] for m in listed} >= {"project_studio_lease.md", "project_studio_opening.md"}
        assert all(m["type"] == "project" for m in listed)
