"""The "How to save a memory" section of the session-start injection, for harnesses that
tell the model nothing about saving memory themselves (Codex, Gemini CLI, DeepSeek Harness,
Claude Code with its auto memory off: each harness's record in `store/harnesses.py` says).

What a memory store fills up with is decided here, so the text puts first what peers' stores
suffer from most: junk saved because nothing said what not to save (secrets, what the code or
git already hold, task state of the moment), and duplicates piling up because nothing said to
search before adding. Then the fields retrieval lives on (description, aliases in the other
language) and the types. It names either the MCP tools or the exact command lines, never both:
a model offered two ways mixes them up, and a bare `sagemem` would not be found where this
install lives in a virtual environment (`command.py`).

The text is paid for in every session's prompt, so it is capped at `MAX_RULES_BYTES` of UTF-8
in both languages: scope places given by the caller are shortened, then left out, to stay
within it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..store.text import printable
from .tokenize import has_cjk

MAX_RULES_BYTES = 1200
MAX_SCOPES = 3  # scopes named in the text; sagemem has two (project, user)
MAX_SCOPE_NAME_CHARS = 20
MAX_SCOPE_PLACE_CHARS = 60
# Characters of a scope's place, tried in turn until the text fits `MAX_RULES_BYTES`; at 0
# the scopes are named without their places, and past that the scope line is left out.
_PLACE_CHARS = (MAX_SCOPE_PLACE_CHARS, 32, 16, 0)

# The ways to act, the same in both languages: the command lines are to be typed as they are.
WAYS = {
    "mcp": {
        "search": "{tool}memory_search",
        "update": "{tool}memory_update(file, expected_version, ...)",
        "remember": "{tool}memory_remember(type, name, description, body, tags, aliases, scope)",
    },
    "cli": {
        "search": '`{cmd} search "..."`',
        "update": "`{cmd} update FILE --expected-version V ...`",
        "remember": "`{cmd} remember --type T --name N --description D [--alias A] [--in SCOPE] --body ...`",
    },
}

RULES_TEXT = {
    "en": {
        "heading": "How to save a memory",
        "when": 'Save: "remember this", corrections, confirmed approaches, preferences, decisions and why, '
        "links to resources.",
        "never": "Never save: secrets or credentials; what code, docs or git hold; short-lived task state.",
        "search_mcp": "Search first ({search}); if one covers it, update it, no duplicate: "
        "{update} with the hit's version.",
        "search_cli": "Search first: {search}; if one covers it, update it, no duplicate: "
        "{update} (V: `read FILE`).",
        "new": "Else: {remember}.",
        "one": "One subject per memory.",
        "description": "description: one precise line on what it answers (recall uses it).",
        "aliases": "aliases: other wordings, Chinese too.",
        "dates": 'Absolute dates (YYYY-MM-DD), not "today"/"yesterday".',
        "user": "type user: the user's role and preferences.",
        "feedback": "type feedback: corrections, confirmed approaches, with why.",
        "project": "type project: goals, decisions, constraints not in code or git.",
        "reference": "type reference: outside sources (URL, dashboard, ticket).",
        "route_both": "Type user → {user}, others → {project}{others}; {choose}.",
        "route_one": "All types → {scope}{others}; {choose}.",
        "route_none": "Scopes: {places}; {choose}.",
        "others": "; other scopes: {places}",
        "choose_mcp": "set scope to pick another",
        "choose_cli": "--in picks another",
        "separator": ", ",
    },
    "zh": {
        "heading": "如何保存记忆",
        "when": "保存：用户说「记住」、纠正或认可的做法、偏好、决定及理由、外部资源链接。",
        "never": "不存：密钥凭据；代码、文档、git 已有的；短期任务状态。",
        "search_mcp": "先搜（{search}）；已有就更新、勿重复：{update}，版本取自搜索结果。",
        "search_cli": "先搜：{search}；已有就更新、勿重复：{update}（V 见 `read FILE`）。",
        "new": "否则：{remember}。",
        "one": "一条记忆一个主题。",
        "description": "description：准确一句，说它回答什么；检索靠它。",
        "aliases": "aliases：其他说法，含英文。",
        "dates": "用绝对日期 YYYY-MM-DD，不写「今天」「昨天」。",
        "user": "type user：用户的角色和偏好。",
        "feedback": "type feedback：纠正或认可的做法，附原因。",
        "project": "type project：代码和 git 里没有的目标、决定、约束。",
        "reference": "type reference：外部资料在哪（网址、看板、工单）。",
        "route_both": "user 类型 → {user}，其他 → {project}{others}；{choose}。",
        "route_one": "所有类型 → {scope}{others}；{choose}。",
        "route_none": "范围：{places}；{choose}。",
        "others": "；其他范围：{places}",
        "choose_mcp": "用 scope 可另选",
        "choose_cli": "--in 可另选",
        "separator": "、",
    },
}
_LINES = ("when", "never", "search", "new", "one", "description", "aliases", "dates")
_TYPES = ("user", "feedback", "project", "reference")


def saving_rules(
    lang: str, *, mcp: bool, command: str, scopes: Mapping[str, str] | None = None, tool: str = ""
) -> str:
    """The section for `lang` ("en" or "zh"): a heading line, then one short line per rule,
    ending in a newline.

    `mcp` names the MCP tools, else the command lines of `command` (the head that
    `command_line()` gives); `tool` is what the harness puts before an MCP tool's name
    (`mcp__sagemem__` in Claude Code), so the model sees the names it can call. `scopes`
    maps a scope's name to where its memories go and adds
    which type goes where. Deterministic: the same arguments give the same bytes, so a
    harness's prompt cache keeps it."""
    t = RULES_TEXT[lang]
    way = "mcp" if mcp else "cli"
    acts = {key: form.format(cmd=command, tool=tool) for key, form in WAYS[way].items()}
    keys = [f"search_{way}" if key == "search" else key for key in _LINES]
    lines = [t[key].format(**acts) for key in keys] + [t[key] for key in _TYPES]
    text = _section(t, lines)
    if not scopes:
        return text
    for chars in _PLACE_CHARS:
        with_scopes = _section(t, [*lines, _scope_line(t, way, scopes, chars)])
        if len(with_scopes.encode("utf-8")) <= MAX_RULES_BYTES:
            return with_scopes
    # Trigger: a command so long that even the scopes' names overflow. Outcome: no scope
    # line; `remember` still files each type in its default scope.
    return text


def describes_lang(descriptions: Iterable[str]) -> str:
    """The language most memory descriptions are written in: "zh" when more than half of the
    non-empty ones hold Chinese script, else "en". The saving rules then read in the language
    the memories are kept in; a `lang` setting, where there is one, wins in the caller."""
    chinese = total = 0
    for description in descriptions:
        if description.strip():
            total += 1
            chinese += has_cjk(description)
    return "zh" if chinese * 2 > total else "en"


def _section(t: Mapping[str, str], lines: list[str]) -> str:
    return t["heading"] + "\n" + "".join(f"- {line}\n" for line in lines)


def _scope_line(t: Mapping[str, str], way: str, scopes: Mapping[str, str], chars: int) -> str:
    """Which type goes to which scope, each scope with its place (cut to `chars`), and how to
    pick another: `user` memories to the user scope, the rest to the project scope when there
    is one."""
    named: dict[str, str] = {}
    for name, place in list(scopes.items())[:MAX_SCOPES]:
        named.setdefault(_clean(name, MAX_SCOPE_NAME_CHARS), _clean(place, chars) if chars else "")

    def label(name: str) -> str:
        return f"{name} ({named[name]})" if named[name] else name

    choose = t[f"choose_{way}"]
    routed = [name for name in ("user", "project") if name in named]
    rest = t["separator"].join(label(name) for name in named if name not in routed)
    others = t["others"].format(places=rest) if rest else ""
    if len(routed) == 2:
        return t["route_both"].format(
            user=label("user"), project=label("project"), others=others, choose=choose
        )
    if routed:
        return t["route_one"].format(scope=label(routed[0]), others=others, choose=choose)
    return t["route_none"].format(places=rest, choose=choose)


def _clean(text: str, limit: int) -> str:
    """One line of at most `limit` characters (cut in the middle), hidden characters escaped:
    a scope's text comes from the caller, a path among it, and must neither start a line of
    its own nor break the cap."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: (limit - 1) // 2] + "…" + text[len(text) - limit // 2 :]
    return printable(text)
