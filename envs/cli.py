"""The `agentrl` command.

Each part of agentrl adds its own subcommands through an `add_cli(subparsers)` function, so
this file stays a table and importing it loads nothing heavy.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

# modules providing `add_cli(subparsers)`; each imports its heavy dependencies only when run
CLI_MODULES = (
    "agentrl.demo",
    "agentrl.server.cli",
    "agentrl.server.mcp.cli",
    "agentrl.server.cluster.cli",
    "agentrl.sandbox_server.cli",
    "agentrl.retrievers.cli",
)
# commands whose module, with its own parser, loads only when the command runs: `check` runs the env
# contract (agentrl.testing), which building this parser must not load (it pulls in the server)
DEFERRED_COMMANDS = {
    "check": ("agentrl.testing.cli", "check that an env keeps the env contract's promises (exit 1 naming "
              "each one broken)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl", description=__doc__.splitlines()[0] if __doc__ else None)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, (_, summary) in DEFERRED_COMMANDS.items():
        subparsers.add_parser(name, help=summary, add_help=False)  # listed here, parsed by its module
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DEFERRED_COMMANDS:
        return int(import_module(DEFERRED_COMMANDS[argv[0]][0]).main(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
