"""`sagemem bench`: how fast the hot path is, on a corpus it generates itself.

The corpus is synthetic but shaped like real memory directories: four types, a one-line
description, two to eight paragraphs of 30 to 400 characters, identifiers, headings; English,
Chinese, or both mixed. Words are drawn by Zipf's law from a vocabulary of about 4,000 per
language (a few hundred real words first, then made-up ones), as in natural text: a few
words are everywhere, most are rare. Queries are two or three words of one memory's topic.

The figures: a cold index build (a fresh process, no cache), warm injection as a whole
process (the hook a harness runs on every prompt, and `sagemem inject`), in-process search,
peak memory, and two baselines measured in the same run, so ratios compare across machines:
a bare `python -c pass` and `grep -rli WORD` over the same files for the hook, and jieba's own
segmentation of the same files in one process for the cold build (the call the index makes,
`jieba.cut_for_search` on every Chinese run: the limit a build that segments with jieba
cannot beat).

The hooks are timed twice: each in its own process (`SAGEMEM_DAEMON=off`), and handed to a
resident process (`agents/daemon.py`) started for the bench in a folder of its own and
stopped after it. A prompt comes seconds after the last, so each run through the resident
process comes after a pause (`PAUSE`) in which it readies its spare, as between prompts.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..store.command import hook_command

EN_WORDS = (
    "deploy release staging production rollback migration schema index query cache latency budget "
    "token session webhook payment ledger invoice refund currency account tenant quota limit retry "
    "timeout backoff queue worker scheduler cron pipeline batch stream kafka postgres redis bucket "
    "storage upload download image thumbnail preview search ranking filter sort page cursor export "
    "report dashboard alert metric trace log error exception crash panic stack heap memory thread "
    "lock mutex race deadlock test fixture mock lint format review branch merge rebase commit tag "
    "version changelog docs guide onboarding laptop editor terminal shell script config secret vault "
    "certificate domain proxy gateway router service client server api endpoint handler middleware "
    "auth login password oauth permission role admin user team owner reviewer deadline milestone"
).split()
ZH_WORDS = (
    "部署 发布 预发 生产 回滚 迁移 数据库 索引 查询 缓存 延迟 预算 会话 回调 支付 账本 发票 退款 "
    "币种 账户 租户 配额 限流 重试 超时 队列 任务 调度 定时 流水线 批量 日志 告警 监控 指标 链路 "
    "错误 异常 崩溃 内存 线程 锁 测试 用例 评审 分支 合并 提交 版本 文档 入职 笔记本 终端 脚本 "
    "配置 密钥 证书 域名 代理 网关 服务 客户端 接口 鉴权 登录 权限 角色 管理员 用户 团队 负责人 "
    "截止 里程碑 规范 约定 原因 步骤 注意 问题 方案 上线 下线"
).split()
TYPES = ("user", "feedback", "project", "reference")
# Made-up words and two-character words fill each vocabulary up to this size.
VOCABULARY = 4000
_SYLLABLES = "ka lo mi ser ton vel dra pix nor quin bex sul tam rof gel vor pan tik mul zen".split()
_HANZI = (
    "人们来时大地为子中你说生国年着就那和要她出也得里后自以会家可下而过天去能对小多然于心学么之都好看起"
    "发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手又行意动方期它头经长儿回位分爱老"
    "因很给名法间斯知世什两次使身者被高已亲其进此话常与活正感见明问力理尔点文几定本公特做外孩相西果走将月"
)
Progress = Callable[[int, int, str], None]
PAUSE = 0.6  # seconds before a hook handed to the resident process: its spare is made after 0.5
# jieba alone over the memory files named on the command line, in one process.
_JIEBA_ALONE = (
    "import logging, re, sys\n"
    "from pathlib import Path\n"
    "import jieba\n"
    "from sagemem.search.tokenize import CJK\n"
    "jieba.setLogLevel(logging.WARNING)\n"
    "chinese = re.compile(f'[{CJK}]+')\n"
    "for folder in sys.argv[1:]:\n"
    "    for path in Path(folder).glob('*.md'):\n"
    "        for run in chinese.findall(path.read_text(encoding='utf-8')):\n"
    "            list(jieba.cut_for_search(run))\n"
)


@dataclass(frozen=True)
class Timing:
    """Seconds over repeated runs."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def to_dict(self) -> dict[str, float]:
        return {"min": min(self.runs), "median": self.median, "max": max(self.runs)}


def vocabulary(lang: str, rng: random.Random) -> list[str]:
    """Words in order of frequency: the real ones first, then made-up ones."""
    if lang == "zh":
        made = {a + b for a, b in itertools.product(_HANZI, repeat=2)} - set(ZH_WORDS)
        base = list(ZH_WORDS)
    else:
        made = {a + b + c for a, b, c in itertools.product(_SYLLABLES, repeat=3)} - set(EN_WORDS)
        base = list(EN_WORDS)
    rng.shuffle(base)
    return base + rng.sample(sorted(made), VOCABULARY - len(base))


class _Words:
    """Draws words from a vocabulary by Zipf's law (frequency ~ 1 / rank)."""

    def __init__(self, lang: str, rng: random.Random) -> None:
        self.words = vocabulary(lang, rng)
        self.weights = list(itertools.accumulate(1 / rank for rank in range(1, len(self.words) + 1)))
        self.rng = rng
        self.join = "" if lang == "zh" else " "

    def draw(self, count: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.weights, k=count)


def generate(folder: Path, count: int, lang: str, seed: int = 7) -> list[str]:
    """Write `count` memories and MEMORY.md into `folder`; return queries that fit them."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    pools = {code: _Words(code, rng) for code in ("en", "zh")}
    queries = []
    index_lines = ["# Memory", ""]
    for i in range(count):
        kind = TYPES[i % 4]
        words = pools["zh" if lang == "zh" or (lang == "mixed" and i % 2) else "en"]
        join = words.join
        # A topic: words from the rarer part of the vocabulary, as names and terms are.
        topic = rng.sample(words.words[200:], 3)
        description = join.join(topic + words.draw(5) + [f"svc{i % 97}"])
        paragraphs = []
        for p in range(rng.randint(2, 8)):
            sentence = join.join(words.draw(rng.randint(6, 60)) + rng.sample(topic, 1))
            if p and rng.random() < 0.3:
                sentence = f"## {join.join(words.draw(2))}\n{sentence}"
            if rng.random() < 0.3:
                sentence += f" `ERR_{rng.randint(10, 999)}` v{rng.randint(1, 9)}.{rng.randint(0, 9)}"
            paragraphs.append(sentence)
        name = f"{kind}_m{i:05d}.md"
        body = "\n\n".join(paragraphs)
        updated = f"2026-10-{1 + i % 28:02d}"
        text = f"---\nname: m{i}\ndescription: {description}\ntype: {kind}\nupdated: {updated}\n---\n\n"
        (folder / name).write_text(text + body + "\n", encoding="utf-8")
        index_lines.append(f"- [m{i}]({name}) — {description[:120]}")
        if i % max(1, count // 40) == 0:
            queries.append(join.join(topic[:2] + words.draw(1)))
    (folder / "MEMORY.md").write_text("\n".join(index_lines) + "\n", encoding="utf-8")
    return queries


def run(
    count: int, lang: str, repeat: int, progress: Progress | None = None, *, scopes: int = 1
) -> dict[str, Any]:
    """The figures; with `scopes` 2, the memories are split between a project's memory and
    the user's, found as a harness's hook finds them (from the project, through HOME)."""
    step = progress or (lambda _done, _total, _label: None)
    with tempfile.TemporaryDirectory(prefix="sagemem-bench-") as tmp:
        project = Path(tmp) / "proj"
        folder = project / ".sagemem" / "memory" if scopes > 1 else Path(tmp) / "memory"
        step(0, 1, "generating")
        queries = generate(folder, count, lang)
        folders = [folder]
        if scopes > 1:
            user = Path(tmp) / "home" / ".sagemem" / "memory"
            user.mkdir(parents=True)
            for i, path in enumerate(sorted(folder.glob("*_m*.md"))):
                if i % 2:
                    path.rename(user / path.name)
            folders.append(user)
        python = sys.executable
        # The installed script (`python -m` adds runpy's imports), and a hook as `install`
        # registers it, so as a harness runs it.
        script = Path(python).with_name("sagemem")
        sagemem = [str(script)] if script.is_file() else [python, "-m", "sagemem"]
        hook = [*hook_command(), "hook", "claude-code"]
        # Found through the environment, as an installed hook finds it: `--dir` would be a
        # global option, which takes the command-line path instead of the hook's fast one.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SAGEMEM_", "SAGE_MEM_"))}
        # This machine's word-frequency lexicon, built before any timing: it is built once per
        # machine, not per index (`lexicon.py`). Found in a child: a child's peak memory counts
        # this process's pages at the fork, and reading wordfreq would add a hundred MB.
        found = subprocess.run(
            [python, "-c", "from sagemem.search import lexicon; print(lexicon.where() or '')"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        env["SAGEMEM_LEXICON"] = found or "off"
        env["SAGEMEM_DAEMON"] = "off"
        if scopes > 1:  # a project of its own, and a home whose user memory is the second scope
            env.update(HOME=str(Path(tmp) / "home"), XDG_CACHE_HOME=str(Path(tmp) / "home" / ".cache"))
        else:
            env["SAGEMEM_DIR"] = str(folder)
        cwd = project if scopes > 1 else None
        runs: dict[str, list[float]] = {
            k: []
            for k in (
                "bare",
                "grep",
                "jieba",
                "cold",
                "hook",
                "start",
                "inject",
                "hook_daemon",
                "start_daemon",
            )
        }
        peak: dict[str, int] = {"cold": 0, "hook": 0, "start": 0, "inject": 0}
        colds = 1 if count >= 10_000 else min(repeat, 3)
        grep = shutil.which("grep")
        total = repeat * (7 if grep else 6) + colds * 2
        done = 0
        # The resident process's own folder (sockets, lock), and the hooks that reach it.
        resident = dict(env, SAGEMEM_DAEMON="on", TMPDIR=str(Path(tmp) / "run"))
        (Path(tmp) / "run").mkdir(mode=0o700)

        def timed(
            kind: str,
            command: list[str],
            stdin: bytes | None = None,
            found: bool = False,
            through: dict[str, str] = env,
        ) -> None:
            """`found`: exit status 1 is an answer too (grep's "no line matched")."""
            nonlocal done
            seconds, rss = _timed(command, through, stdin, cwd, (0, 1) if found else (0,))
            runs[kind].append(seconds)
            if kind in peak:
                peak[kind] = max(peak[kind], rss)
            done += 1
            step(done, total, f"timing ({kind})")

        for _ in range(colds):
            for item in (f for place in folders for f in (place / ".sagemem").glob("cache/*")):
                item.unlink()
            timed("cold", [*sagemem, "search", queries[0]])
            timed("jieba", [python, "-c", _JIEBA_ALONE, *map(str, folders)])
        served = _resident(sagemem, resident, cwd, "start")
        try:
            if served is not None:  # one hook first: it tells the resident process what to watch
                event = {"hook_event_name": "SessionStart", "session_id": "bench-warm", "source": "startup"}
                _timed(hook, resident, json.dumps(event).encode("utf-8"), cwd)
            for i in range(repeat):
                query = queries[i % len(queries)]
                timed("bare", [python, "-c", "pass"])
                if grep:  # one word of the query, as a person would look for it
                    timed("grep", [grep, "-rli", query.split()[0], *map(str, folders)], found=True)
                prompt = {"hook_event_name": "UserPromptSubmit", "session_id": f"bench-{i}", "prompt": query}
                # A new session: the saving rules, the baseline memories, a check of the index.
                start = {
                    "hook_event_name": "SessionStart",
                    "session_id": f"bench-start-{i}",
                    "source": "startup",
                }
                for kind, event in (("hook", prompt), ("start", start)):
                    timed(kind, hook, json.dumps(event).encode("utf-8"))
                    if served is not None:
                        time.sleep(PAUSE)
                        event = {**event, "session_id": f"{event['session_id']}-resident"}
                        timed(f"{kind}_daemon", hook, json.dumps(event).encode("utf-8"), through=resident)
                    else:
                        done += 1
                timed("inject", [*sagemem, "inject", "--query", query])
            handed = _resident(sagemem, resident, cwd, "status")
        finally:
            if served is not None:
                _resident(sagemem, resident, cwd, "stop")
        step(0, 1, "searching in process")
        search = _in_process(folders, queries, repeat)
    bare = Timing(tuple(runs["bare"]))
    prompted, injected = Timing(tuple(runs["hook"])), Timing(tuple(runs["inject"]))
    started, cold = Timing(tuple(runs["start"])), Timing(tuple(runs["cold"]))
    jieba = Timing(tuple(runs["jieba"]))
    grep_timing = Timing(tuple(runs["grep"])) if runs["grep"] else None
    through = {}
    if runs["hook_daemon"] and handed is not None and served is not None:
        hook_d, start_d = Timing(tuple(runs["hook_daemon"])), Timing(tuple(runs["start_daemon"]))
        through = {
            "warm_hook_resident": hook_d.to_dict(),
            "warm_hook_resident_ratio": hook_d.median / bare.median,
            "warm_hook_resident_grep_ratio": hook_d.median / grep_timing.median if grep_timing else None,
            "session_start_resident": start_d.to_dict(),
            "session_start_resident_ratio": start_d.median / bare.median,
            # how many of the timed hooks it ran (the others ran in their own process)
            "resident_ran": handed - served - 1,
            "resident_timed": len(runs["hook_daemon"]) + len(runs["start_daemon"]),
        }
    return {
        "memories": count,
        "scopes": scopes,
        "lang": lang,
        "repeat": repeat,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "bare_python": bare.to_dict(),
        "grep": grep_timing.to_dict() if grep_timing else None,
        "jieba_alone": jieba.to_dict(),
        "cold_build": cold.to_dict(),
        "cold_build_jieba_ratio": cold.median / jieba.median,
        "warm_hook": prompted.to_dict(),
        "warm_hook_ratio": prompted.median / bare.median,
        "warm_hook_grep_ratio": prompted.median / grep_timing.median if grep_timing else None,
        "session_start": started.to_dict(),
        "session_start_ratio": started.median / bare.median,
        "warm_inject": injected.to_dict(),
        "warm_inject_ratio": injected.median / bare.median,
        "search": search.to_dict(),
        "peak_rss_mb": {kind: rss / 1024 for kind, rss in peak.items()},
        "resident": through or None,
    }


def _resident(sagemem: list[str], env: dict[str, str], cwd: Path | None, action: str) -> int | None:
    """Start, ask or stop the bench's resident process: how many hooks it has run (None:
    there is none, or it does not answer: hooks cannot use one on this machine)."""
    if action != "status":
        subprocess.run([*sagemem, "daemon", action], env=env, cwd=cwd, capture_output=True, check=False)
    if action == "stop":
        return None
    ends = time.monotonic() + 10
    while time.monotonic() < ends:
        found = subprocess.run(
            [*sagemem, "daemon", "status", "--json"], env=env, cwd=cwd, capture_output=True, check=False
        )
        try:
            answer = json.loads(found.stdout)
        except ValueError:
            return None
        if not isinstance(answer, dict) or not answer.get("enabled"):
            return None
        if answer.get("running"):
            return int(answer.get("hooks", 0))
        time.sleep(0.1)
    return None


def _in_process(folders: list[Path], queries: list[str], repeat: int) -> Timing:
    """What the hook does on open indexes (the candidates and the decision, `recall`), each
    query once as a fresh call: its terms are fetched from the index, not from what an
    earlier query left in memory."""
    from ..store.config import Settings
    from . import lexicon
    from .corpus import load
    from .retrieve import Shelf, recall

    settings = Settings()
    times = []
    for i in range(max(repeat, len(queries))):
        corpora = [load(f, f / ".sagemem") for f in folders]
        shelves = [Shelf(f"s{n}" if len(folders) > 1 else "", c) for n, c in enumerate(corpora)]
        started = time.perf_counter()
        with lexicon.opened() as words:
            recall(shelves, queries[i % len(queries)], settings, words)
        times.append(time.perf_counter() - started)
        for corpus in corpora:
            corpus.close()
    return Timing(tuple(times))


def _timed(
    command: list[str],
    env: dict[str, str],
    stdin: bytes | None = None,
    cwd: Path | None = None,
    success: tuple[int, ...] = (0,),
) -> tuple[float, int]:
    """Wall seconds and peak resident memory (KiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    if stdin is not None:
        process.stdin.write(stdin)  # type: ignore[union-attr]
    process.stdin.close()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in success:
        raise RuntimeError(f"{' '.join(command[:4])}... exited with {process.returncode}")
    return seconds, usage.ru_maxrss


def format_report(report: dict[str, Any]) -> str:
    def ms(d: dict[str, float]) -> str:
        return f"{d['median'] * 1000:9.1f} ms  (min {d['min'] * 1000:.1f}, max {d['max'] * 1000:.1f})"

    peak = report["peak_rss_mb"]
    grep = report.get("grep")
    versus_grep = f", {report['warm_hook_grep_ratio']:.2f}x grep" if grep else ""
    return "\n".join(
        [
            f"{report['memories']} memories"
            + (f" in {report['scopes']} scopes" if report.get("scopes", 1) > 1 else "")
            + f", {report['lang']}, {report['repeat']} runs, "
            f"Python {report['python']}, {report['cpus']} CPUs (medians)",
            f"bare python -c pass    {ms(report['bare_python'])}",
            *([f"grep -rli WORD         {ms(grep)}"] if grep else []),
            f"jieba alone            {ms(report['jieba_alone'])}",
            f"cold index build       {ms(report['cold_build'])}"
            f"  = {report['cold_build_jieba_ratio']:.2f}x jieba alone",
            f"warm hook (process)    {ms(report['warm_hook'])}  = {report['warm_hook_ratio']:.1f}x bare"
            + versus_grep,
            f"session start (hook)   {ms(report['session_start'])}"
            f"  = {report['session_start_ratio']:.1f}x bare",
            f"warm inject (process)  {ms(report['warm_inject'])}  = {report['warm_inject_ratio']:.1f}x bare",
            *_resident_lines(report.get("resident"), ms, bool(grep)),
            f"search (in-process)    {ms(report['search'])}",
            f"peak memory            cold build {peak['cold']:.0f} MB, hook {peak['hook']:.0f} MB, "
            f"session start {peak.get('start', 0):.0f} MB, inject {peak['inject']:.0f} MB",
        ]
    )


def _resident_lines(
    found: dict[str, Any] | None, ms: Callable[[dict[str, float]], str], grep: bool
) -> list[str]:
    if not found:
        return ["resident process       none on this machine (Linux only)"]
    versus_grep = f", {found['warm_hook_resident_grep_ratio']:.2f}x grep" if grep else ""
    return [
        f"warm hook (resident)   {ms(found['warm_hook_resident'])}"
        f"  = {found['warm_hook_resident_ratio']:.1f}x bare{versus_grep}",
        f"session start (res.)   {ms(found['session_start_resident'])}"
        f"  = {found['session_start_resident_ratio']:.1f}x bare",
        f"  the resident process ran {found['resident_ran']} of these {found['resident_timed']} hooks",
    ]
