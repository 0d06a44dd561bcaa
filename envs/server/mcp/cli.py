"""`agentrl mcp serve ENV_ID`: one episode of an agentrl env as an MCP server (stdio or HTTP).

This module loads nothing heavy: the `mcp` SDK (the `[mcp]` extra) and the env load when the
command runs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentrl.server.config import TOKEN_ENV_VAR, ServerConfig


def add_cli(subparsers: Any) -> None:
    defaults = ServerConfig()
    group = subparsers.add_parser("mcp", help="agentrl envs over the Model Context Protocol")
    commands = group.add_subparsers(dest="mcp_command", required=True)
    p = commands.add_parser("serve", help="serve one episode of an env as an MCP server: its tools, its "
                            "task as a prompt, each tool call a step")
    p.add_argument("env_id", metavar="ENV_ID")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default: the client starts this command) or streamable HTTP at /mcp")
    p.add_argument("--seed", type=int, help="the episode's seed (default: none, a random episode)")
    p.add_argument("--options", type=_json_object, default={}, metavar="JSON", help="reset options")
    p.add_argument("--env-kwargs", type=_json_object, default={}, metavar="JSON",
                   help="the env's constructor arguments")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (one that registers envs); repeatable")
    p.add_argument("--max-action-chars", type=int, default=defaults.max_action_chars)
    p.add_argument("--host", default=defaults.host, help="HTTP bind address (non-loopback requires a token)")
    p.add_argument("--port", type=int, default=defaults.port)
    p.add_argument("--token", help=f"bearer token HTTP clients must send (default: ${TOKEN_ENV_VAR})")
    p.add_argument("--log-level", default="warning")
    p.set_defaults(handler=serve)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def serve(args: argparse.Namespace) -> int:
    import contextlib
    import sys

    from agentrl.registration import ENV_ENTRY_POINTS, import_env_modules

    try:
        import anyio

        from agentrl.server.mcp.episode import ServedEpisode
        from agentrl.server.mcp.serve import serve_http, serve_stdio
    except ModuleNotFoundError as exc:
        if exc.name not in ("mcp", "mcp_types"):
            raise
        print("agentrl mcp serve needs the MCP SDK: pip install 'agentrl-gym[mcp]'", file=sys.stderr)
        return 2
    config = ServerConfig(host=args.host, port=args.port, token=args.token)
    try:
        import_env_modules(args.imports)
        if args.env_id not in ENV_ENTRY_POINTS:
            raise ValueError(f"unknown env {args.env_id!r}; known: {', '.join(ENV_ENTRY_POINTS)}")
        if args.transport == "http":
            config.check()  # before the env is built: a refused bind costs nothing
    except ValueError as exc:
        print(f"agentrl mcp serve: {exc}", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the protocol's: the env prints elsewhere
        episode = ServedEpisode(args.env_id, seed=args.seed, options=args.options,
                                env_kwargs=args.env_kwargs, max_action_chars=args.max_action_chars)
    try:
        if args.transport == "stdio":
            anyio.run(serve_stdio, episode)
        else:
            print(f"agentrl: one {args.env_id} episode served over MCP at http://{config.host}:{config.port}/mcp",
                  file=sys.stderr, flush=True)
            serve_http(episode, host=config.host, port=config.port, token=config.resolved_token(),
                       log_level=args.log_level)
    finally:
        episode.close()
    return 0
