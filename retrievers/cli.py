"""`agentrl index build` and `agentrl retrieve serve` (imports nothing heavy until run)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    index = subparsers.add_parser("index", help="build retrieval indexes")
    index_sub = index.add_subparsers(dest="index_command", required=True)
    build = index_sub.add_parser("build", help='index a Search-R1 JSONL corpus ({"id", "contents"} per line)')
    build.add_argument(
        "--corpus",
        required=True,
        help="corpus JSONL, or a built-in one: 'wiki' (10k Wikipedia leads) or "
        "'synthetic:N[:SEED]' (a generated world of N passages)",
    )
    build.add_argument("--backend", choices=["bm25", "lucene", "dense"], required=True)
    build.add_argument("--out", required=True, type=Path)
    build.add_argument(
        "--dense-index",
        choices=["auto", "flat", "hnsw"],
        default="auto",
        help="faiss index type for --backend dense (auto: HNSW above 200k passages)",
    )
    build.add_argument("--threads", type=int, default=1, help="Lucene indexing / ONNX encoding threads")
    build.add_argument("--max-tokens", type=int, default=256, help="dense: tokens embedded per passage")
    build.set_defaults(handler=_build)

    retrieve = subparsers.add_parser("retrieve", help="serve an index over Search-R1's HTTP API")
    retrieve_sub = retrieve.add_subparsers(dest="retrieve_command", required=True)
    serve = retrieve_sub.add_parser("serve", help="POST /retrieve {queries, topk, return_scores}")
    serve.add_argument("--index", required=True, type=Path)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--topk", type=int, default=3, help="topk when a request gives none")
    serve.add_argument("--max-batch", type=int, default=64, help="most queries searched in one batch")
    serve.add_argument("--queue-size", type=int, default=256, help="waiting requests before 503")
    serve.set_defaults(handler=_serve)


def corpus_file(spec: str, workdir: Path) -> Path:
    """A corpus path, writing a built-in corpus to `workdir` first when `spec` names one."""
    from agentrl.retrievers.corpus import write_corpus

    if spec == "wiki":
        from agentrl.retrievers.datasets import wiki_corpus

        return write_corpus(wiki_corpus(), workdir / "wiki.jsonl")
    if spec.startswith("synthetic:"):
        from agentrl.retrievers.synthetic import generate_world

        parts = spec.split(":")
        world = generate_world(seed=int(parts[2]) if len(parts) > 2 else 0, passages=int(parts[1]))
        return write_corpus(world.passages, workdir / "synthetic.jsonl")
    path = Path(spec)
    if not path.is_file():
        raise SystemExit(f"corpus {spec!r} is not a file (nor 'wiki' / 'synthetic:N[:SEED]')")
    return path


def _build(args: argparse.Namespace) -> int:
    import tempfile

    from agentrl.retrievers.base import build_index

    with tempfile.TemporaryDirectory() as tmp:
        corpus = corpus_file(args.corpus, Path(tmp))
        build_index(
            corpus,
            args.backend,
            args.out,
            index_type=args.dense_index,
            threads=args.threads,
            max_tokens=args.max_tokens,
        )
    print(f"built {args.backend} index in {args.out}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from agentrl.retrievers.base import open_index
    from agentrl.retrievers.server import create_app
    from agentrl.serving.runner import run_server

    retriever = open_index(args.index)
    app = create_app(retriever, default_topk=args.topk, max_batch=args.max_batch, queue_size=args.queue_size)
    run_server(app, host=args.host, port=args.port)
    retriever.close()
    return 0
