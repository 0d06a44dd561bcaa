"""`agentrl check ENV_ID`: the env contract from the command line; exit 1 naming each broken promise.

The env is played by its registered `Play`; an env without one (another package's, say) is played by
`PROBE_PLAY`: each of its tools called once with placeholder arguments built from its schema, which
makes a real episode of any tool env (the probe takes no action that needs the task understood).
`agentrl` loads this module only when `check` runs (`agentrl.cli.DEFERRED_COMMANDS`): the contract
pulls in the server and its clients.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentrl.core.parsing import tool_call
from agentrl.registration import ENV_ENTRY_POINTS, import_env_modules
from agentrl.testing.contract import PROMISES, ContractBroken, ContractUnavailable, check_contract
from agentrl.testing.plays import PLAYS, Play, register

# an argument of each JSON-schema type, for a call that is well formed if not wise
PLACEHOLDERS: dict[str, Any] = {"string": "a", "integer": 0, "number": 0, "boolean": False, "array": [],
                                "object": {}, "null": None}
PROBE_TEXT = "Hello."  # the probe's action for an env without tools


def placeholder_arguments(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Placeholder values for the required arguments of a tool's JSON schema: an enum's first value,
    a default where there is one, a number's minimum, else one of the schema's type."""
    properties = parameters.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in parameters.get("required") or []:
        schema = properties.get(name) or {}
        if schema.get("enum"):
            arguments[name] = schema["enum"][0]
        elif "default" in schema:
            arguments[name] = schema["default"]
        elif "minimum" in schema:
            arguments[name] = schema["minimum"]
        else:
            kind = schema.get("type")
            kind = kind[0] if isinstance(kind, list) and kind else kind
            arguments[name] = PLACEHOLDERS.get(kind if isinstance(kind, str) else "string", "a")
    return arguments


def probe_actions(env: Any) -> Iterator[str]:
    """Each tool the env lists, called once with placeholder arguments, in order (the episode may
    end at any of them); then plain text. An env without tools gets plain text only."""
    specs = env.tool_specs() if hasattr(env, "tool_specs") else []
    for spec in specs:
        function = spec.get("function") or {}
        yield tool_call(function.get("name", ""), **placeholder_arguments(function.get("parameters") or {}))
    while True:
        yield PROBE_TEXT


PROBE_PLAY = Play(probe_actions, max_steps=6)


def build_parser() -> argparse.ArgumentParser:
    summary = (__doc__ or "").splitlines()[0] or None  # `python -OO` drops docstrings
    parser = argparse.ArgumentParser(prog="agentrl check", description=summary)
    parser.add_argument("env_id", metavar="ENV_ID")
    parser.add_argument("--env-kwargs", type=json.loads, default=None, metavar="JSON",
                        help="the env's constructor arguments, on top of its play's")
    parser.add_argument("--promise", dest="promises", action="append", choices=list(PROMISES),
                        help="check only this promise (repeatable; default: all)")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (one that registers envs, or plays with "
                        "agentrl.testing.register); repeatable")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import_env_modules(args.imports)
        if args.env_id not in ENV_ENTRY_POINTS:
            raise ValueError(f"unknown env {args.env_id!r}; known: {', '.join(ENV_ENTRY_POINTS)}")
    except ValueError as exc:
        print(f"agentrl check: {exc}", file=sys.stderr)
        return 2
    if args.env_id not in PLAYS:
        print(f"{args.env_id} has no Play: probing each of its tools with placeholder arguments")
        register(args.env_id, PROBE_PLAY)
    try:
        report = check_contract(args.env_id, args.env_kwargs, promises=args.promises)
    except ContractBroken as exc:
        print(exc)
        return 1
    except ContractUnavailable as exc:
        print(f"agentrl check: not checked here: {exc}", file=sys.stderr)
        return 2
    names = ", ".join(f"{name} ({seconds:.1f} s)" for name, seconds in report.seconds.items())
    print(f"{args.env_id} keeps the env contract's promises: {names}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
