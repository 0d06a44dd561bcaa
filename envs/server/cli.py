"""`agentrl serve`: run the episode server."""

from __future__ import annotations

import argparse
from typing import Any

from agentrl.server.config import TOKEN_ENV_VAR, ServerConfig


def add_cli(subparsers: Any) -> None:
    defaults = ServerConfig()
    p = subparsers.add_parser("serve", help="serve agentrl envs over HTTP (one env instance per episode)")
    p.add_argument("--host", default=defaults.host, help="bind address (non-loopback requires a token)")
    p.add_argument("--port", type=int, default=defaults.port)
    p.add_argument("--env", dest="env_ids", action="append", metavar="ENV_ID",
                   help="serve only this env id (repeatable); default: every registered env")
    p.add_argument("--default-env", help="env of OpenEnv WebSocket sessions at /ws that name none")
    p.add_argument("--token", help=f"bearer token clients must send (default: ${TOKEN_ENV_VAR})")
    p.add_argument("--max-episodes", type=int, default=defaults.max_episodes)
    p.add_argument("--idle-ttl", type=float, default=defaults.idle_ttl_s, help="seconds an episode may idle")
    p.add_argument("--max-age", type=float, default=defaults.max_age_s, help="seconds an episode may live")
    p.add_argument("--max-action-chars", type=int, default=defaults.max_action_chars)
    p.add_argument("--workers", type=int, default=defaults.workers, help="threads running env code")
    p.add_argument("--log-level", default="warning")
    p.set_defaults(handler=serve)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        host=args.host, port=args.port, env_ids=tuple(args.env_ids) if args.env_ids else None,
        default_env_id=args.default_env, token=args.token, max_episodes=args.max_episodes,
        idle_ttl_s=args.idle_ttl, max_age_s=args.max_age, max_action_chars=args.max_action_chars,
        workers=args.workers,
    )


def serve(args: argparse.Namespace) -> int:
    import logging

    from agentrl.server.local import run

    logging.basicConfig(format="agentrl: %(message)s")
    logging.getLogger("agentrl.server").setLevel(logging.INFO)
    config = config_from_args(args)
    try:
        config.check()
    except ValueError as exc:
        print(f"agentrl serve: {exc}")
        return 2
    print(f"agentrl serving on http://{config.host}:{config.port} (docs at /docs)", flush=True)
    run(config, log_level=args.log_level)
    return 0
