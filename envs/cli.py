"""The `agentrl` command.

Each part of agentrl adds its own subcommands through an `add_cli(subparsers)` function, so
this file stays a table and importing it loads nothing heavy.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import import_module

# modules providing `add_cli(subparsers)`; each imports its heavy dependencies only when run
CLI_MODULES = (
    "agentrl.demo",
    "agentrl.server.cli",
    "agentrl.server.cluster.cli",
    "agentrl.sandbox_server.cli",
    "agentrl.retrievers.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl", description=__doc__.splitlines()[0] if __doc__ else None)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in CLI_MODULES:
        try:
            module = import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.add_cli(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
