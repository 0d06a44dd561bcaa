"""Benchmark of the retrieval backends (bm25s, Lucene via pyserini, dense MiniLM int8 + faiss) on
synthetic corpora of 10k and 100k passages, each served by `agentrl retrieve serve` on 127.0.0.1.

    .venv/bin/python bench/retrieval.py            # 10k and 100k passages (dense 100k: long encode)
    .venv/bin/python bench/retrieval.py --quick    # 1k passages, 40 queries: checks the bench still runs

Per backend and size: index build time, single-query latency over HTTP (median, p99; one query
per request, sequential, as one Search-v0 env sees it), batched throughput over HTTP (concurrent
clients, several queries per request, as a trainer's rollout batch sends them), the server's RAM
(resident set after the load) and the index size on disk. Ratios are against bm25s measured in
the same run. Built indexes and dense embedding chunks are kept in --work, so a rerun reuses them
(build times then come from the first build's meta.json). `--recall` adds recall@10 of each
backend on the shipped QA (FanOutQA sub-questions over the 10k Wikipedia leads).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from agentrl.retrievers import build_index, split_title
from agentrl.retrievers.base import read_meta
from agentrl.retrievers.corpus import write_corpus
from agentrl.retrievers.synthetic import generate_world

console = Console(width=140)
BACKENDS = ("bm25", "lucene", "dense")


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = (
        int(
            next(
                line.split()[1]
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")
            )
        )
        / 2**20
    )
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, load {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}"
    )


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dir_mib(path: Path) -> float:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and "embeddings" not in p.parts) / 2**20
    )


def ensure_index(corpus: Path, backend: str, out: Path) -> float:
    """Build unless built before; the build time of the first build either way."""
    if not (out / "meta.json").is_file():
        build_index(corpus, backend, out)
    return float(read_meta(out)["build_seconds"])


class Served:
    """`agentrl retrieve serve` in a child process, so its RAM is the index's alone."""

    def __init__(self, index: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/retrieve"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentrl",
                "retrieve",
                "serve",
                "--index",
                str(index),
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while True:
            try:
                httpx.post(self.url, json={"query": "warm up", "topk": 3}, timeout=60).raise_for_status()
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"server for {index} did not start") from None
                time.sleep(0.3)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def measure(served: Served, queries: list[str], clients: int, batch: int) -> dict[str, float]:
    with httpx.Client(timeout=120) as client:
        for q in queries[:20]:  # warm-up (JIT, caches)
            client.post(served.url, json={"query": q, "topk": 3})
        latencies = []
        for q in queries:
            start = time.perf_counter()
            client.post(served.url, json={"query": q, "topk": 3}).raise_for_status()
            latencies.append((time.perf_counter() - start) * 1000)
    batches = [queries[i : i + batch] for i in range(0, len(queries), batch)] * 2

    def send(part: list[str]) -> None:
        with httpx.Client(timeout=300) as client:
            client.post(
                served.url, json={"queries": part, "topk": 3, "return_scores": True}
            ).raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, batches))
    elapsed = time.perf_counter() - start
    return {
        "p50": float(np.median(latencies)),
        "p99": float(np.percentile(latencies, 99)),
        "qps": sum(map(len, batches)) / elapsed,
        "rss": rss_mib(served.proc.pid),
    }


def run_size(
    size: int, backends: list[str], work: Path, n_queries: int, port: int, dense_limit: int | None
) -> list[dict]:
    world = generate_world(seed=0, passages=size)
    corpus = work / f"synthetic-{size}.jsonl"
    if not corpus.is_file():
        write_corpus(world.passages, corpus)
    queries = [q.question for q in world.questions[:n_queries]]
    rows = []
    for backend in backends:
        if backend == "dense" and dense_limit is not None and size > dense_limit:
            console.print(f"[yellow]{size:,} passages, dense: skipped (--dense-limit {dense_limit:,})[/]")
            continue
        console.print(f"[bold]{size:,} passages, {backend}[/]: build / serve / measure")
        out = work / f"{backend}-{size}"
        build_s = ensure_index(corpus, backend, out)
        served = Served(out, port)
        try:
            rows.append(
                {
                    "size": size,
                    "backend": backend,
                    "build_s": build_s,
                    "disk": dir_mib(out),
                    **measure(served, queries, clients=8, batch=16),
                }
            )
        finally:
            served.close()
    return rows


def recall_table(backends: list[str], work: Path, max_tokens: int) -> Table:
    from agentrl.retrievers import open_index
    from agentrl.retrievers.datasets import fanoutqa_questions, wiki_corpus

    rows = wiki_corpus()
    questions = fanoutqa_questions({split_title(r["contents"])[0] for r in rows})
    corpus = work / "wiki.jsonl"
    if not corpus.is_file():
        write_corpus(rows, corpus)
    table = Table(
        title=f"recall@10 on the shipped QA ({len(questions)} FanOutQA sub-questions, "
        f"{len(rows):,} Wikipedia leads)"
    )
    for col in ("backend", "recall@1", "recall@10", "ratio vs bm25s"):
        table.add_column(col, justify="right")
    base = None
    for backend in backends:
        out = work / f"wiki-{backend}"
        if not (out / "meta.json").is_file():
            build_index(corpus, backend, out, max_tokens=max_tokens)
        with open_index(out) as retriever:
            hits = retriever.search([q.question for q in questions], 10)
        titles = [[split_title(h.contents)[0] for h in per] for per in hits]
        r1 = np.mean([q.evidence[0] in t[:1] for q, t in zip(questions, titles, strict=True)])
        r10 = np.mean([q.evidence[0] in t for q, t in zip(questions, titles, strict=True)])
        base = base or r10
        label = backend + (f" (max_tokens={max_tokens})" if backend == "dense" else "")
        table.add_row(label, f"{r1:.3f}", f"{r10:.3f}", f"{r10 / base:.2f}x")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*")
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "agentrl-bench-retrieval")
    parser.add_argument("--port", type=int, default=8431)
    parser.add_argument(
        "--dense-limit", type=int, help="skip dense above this many passages (slow CPU encode)"
    )
    parser.add_argument("--recall", action="store_true", help="also recall@10 on the shipped QA")
    parser.add_argument("--recall-max-tokens", type=int, default=128)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sizes = args.sizes or ([1_000] if args.quick else [10_000, 100_000])
    n_queries = 40 if args.quick else 300
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes:
        results += run_size(size, args.backends, args.work, n_queries, args.port, args.dense_limit)

    table = Table(title="retrieval backends over HTTP (agentrl retrieve serve, 127.0.0.1, topk=3)")
    for col in (
        "passages",
        "backend",
        "build s",
        "latency p50 ms",
        "p99 ms",
        "batched q/s",
        "server RAM MiB",
        "index MiB",
        "build x",
        "p50 x",
        "q/s x",
        "RAM x",
    ):
        table.add_column(col, justify="right")
    for r in results:
        base = next((b for b in results if b["size"] == r["size"] and b["backend"] == "bm25"), r)
        table.add_row(
            f"{r['size']:,}",
            r["backend"],
            f"{r['build_s']:.1f}",
            f"{r['p50']:.2f}",
            f"{r['p99']:.2f}",
            f"{r['qps']:.0f}",
            f"{r['rss']:.0f}",
            f"{r['disk']:.1f}",
            f"{r['build_s'] / base['build_s']:.2f}",
            f"{r['p50'] / base['p50']:.2f}",
            f"{r['qps'] / base['qps']:.2f}",
            f"{r['rss'] / base['rss']:.2f}",
        )
    console.print(table)
    console.print(
        "ratios (x) are against bm25s at the same size, measured in this run. "
        "latency: one query per request, sequential; q/s: 8 clients x 16 queries per request."
    )
    if args.recall:
        console.print(recall_table(args.backends, args.work, args.recall_max_tokens))
    console.print(f"machine: {machine()}")
    (args.work / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
