"""`sagemem bench`: how fast the hot path is, on a corpus it generates itself.

The corpus is synthetic but shaped like real memory directories: four types, a one-line
description, two to eight paragraphs of 30 to 400 characters, identifiers, headings; English,
Chinese, or both mixed. The figures: a cold index build (a fresh process), warm `inject` as
a whole process (what a hook pays on every prompt), in-process search, peak memory, and a
bare `python -c pass` measured in the same run, so ratios compare across machines.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class Timing:
    """Seconds over repeated runs."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def to_dict(self) -> dict[str, float]:
        return {"min": min(self.runs), "median": self.median, "max": max(self.runs)}


def generate(folder: Path, count: int, lang: str, seed: int = 7) -> list[str]:
    """Write `count` memories and MEMORY.md into `folder`; return queries that fit them."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    queries = []
    index_lines = ["# Memory", ""]
    for i in range(count):
        kind = TYPES[i % 4]
        zh = lang == "zh" or (lang == "mixed" and i % 2)
        words = ZH_WORDS if zh else EN_WORDS
        join = "" if zh else " "
        topic = rng.sample(words, 3) + [f"svc{i % 97}"]
        description = join.join(topic + rng.sample(words, 5))
        paragraphs = []
        for p in range(rng.randint(2, 8)):
            sentence = join.join(rng.choice(words) for _ in range(rng.randint(6, 60)))
            if p and rng.random() < 0.3:
                sentence = f"## {join.join(rng.sample(words, 2))}\n{sentence}"
            if rng.random() < 0.3:
                sentence += f" `ERR_{rng.randint(10, 999)}` v{rng.randint(1, 9)}.{rng.randint(0, 9)}"
            paragraphs.append(sentence)
        name = f"{kind}_m{i:05d}.md"
        body = "\n\n".join(paragraphs)
        updated = f"2026-10-{1 + i % 28:02d}"
        text = f"---\nname: m{i}\ndescription: {description}\ntype: {kind}\nupdated: {updated}\n---\n\n"
        (folder / name).write_text(text + body + "\n", encoding="utf-8")
        index_lines.append(f"- [m{i}]({name}) — {description[:120]}")
        if i % max(1, count // 20) == 0:
            queries.append(join.join(topic[:2] + [rng.choice(words)]))
    (folder / "MEMORY.md").write_text("\n".join(index_lines) + "\n", encoding="utf-8")
    return queries


def run(count: int, lang: str, repeat: int, progress: Any = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sagemem-bench-") as tmp:
        folder = Path(tmp) / "memory"
        queries = generate(folder, count, lang)
        python = sys.executable
        step = progress or (lambda _label: None)
        step("bare interpreter")
        bare = Timing(tuple(_timed([python, "-c", "pass"])[0] for _ in range(repeat)))
        step("cold index build")
        cold_runs, cold_rss = [], 0
        for _ in range(max(1, min(repeat, 3))):
            for item in (folder / ".sagemem").glob("cache/*"):
                item.unlink()
            seconds, rss = _timed([python, "-m", "sagemem", "--dir", str(folder), "search", queries[0]])
            cold_runs.append(seconds)
            cold_rss = max(cold_rss, rss)
        step("warm inject")
        warm_runs, warm_rss = [], 0
        for i in range(repeat):
            seconds, rss = _timed(
                [
                    python,
                    "-m",
                    "sagemem",
                    "--dir",
                    str(folder),
                    "inject",
                    "--query",
                    queries[i % len(queries)],
                ]
            )
            warm_runs.append(seconds)
            warm_rss = max(warm_rss, rss)
        step("in-process search")
        search = _in_process(folder, queries, repeat)
    warm = Timing(tuple(warm_runs))
    return {
        "memories": count,
        "lang": lang,
        "repeat": repeat,
        "bare_python": bare.to_dict(),
        "cold_build": Timing(tuple(cold_runs)).to_dict(),
        "warm_inject": warm.to_dict(),
        "warm_inject_ratio": warm.median / bare.median,
        "search": search.to_dict(),
        "peak_rss_mb": {"cold_build": cold_rss / 1024, "warm_inject": warm_rss / 1024},
    }


def _in_process(folder: Path, queries: list[str], repeat: int) -> Timing:
    from .config import Settings
    from .corpus import load
    from .retrieve import search

    corpus = load(folder, folder / ".sagemem")
    settings = Settings()
    times = []
    for i in range(max(repeat, len(queries))):
        started = time.perf_counter()
        search(corpus, queries[i % len(queries)], settings)
        times.append(time.perf_counter() - started)
    return Timing(tuple(times))


def _timed(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak resident memory (KiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{' '.join(command[:4])}... exited with {process.returncode}")
    return seconds, usage.ru_maxrss


def format_report(report: dict[str, Any]) -> str:
    def ms(d: dict[str, float]) -> str:
        return f"{d['median'] * 1000:8.1f} ms  (min {d['min'] * 1000:.1f}, max {d['max'] * 1000:.1f})"

    return "\n".join(
        [
            f"{report['memories']} memories, {report['lang']}, {report['repeat']} runs",
            f"bare python -c pass   {ms(report['bare_python'])}",
            f"cold index build      {ms(report['cold_build'])}",
            f"warm inject (process) {ms(report['warm_inject'])}  = {report['warm_inject_ratio']:.1f}x bare",
            f"search (in-process)   {ms(report['search'])}",
            f"peak memory           cold build {report['peak_rss_mb']['cold_build']:.0f} MB, "
            f"warm inject {report['peak_rss_mb']['warm_inject']:.0f} MB",
        ]
    )
