"""`agentrl serve`: run the episode server."""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentrl.server.config import HOLDER_ENV_VAR, OPERATOR_TOKEN_ENV_VAR, TOKEN_ENV_VAR, ServerConfig
from agentrl.serving.children import cpu_count


def add_cli(subparsers: Any) -> None:
    defaults = ServerConfig()
    p = subparsers.add_parser("serve", help="serve agentrl envs over HTTP (one env instance per episode)")
    p.add_argument("--host", default=defaults.host, help="bind address (non-loopback requires a token)")
    p.add_argument("--port", type=int, default=defaults.port)
    p.add_argument("--env", dest="env_ids", action="append", metavar="ENV_ID",
                   help="serve only this env id (repeatable); default: every registered env")
    p.add_argument("--default-env", help="env of OpenEnv WebSocket sessions at /ws that name none")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first, a module that registers envs with Gymnasium, and serve them "
                   "too (repeatable; packages declaring the entry point group agentrl.envs need none)")
    p.add_argument("--token", help=f"bearer token clients must send (default: ${TOKEN_ENV_VAR})")
    p.add_argument("--operator-token", help="a second bearer token that reaches and lists every client's "
                   f"episodes (default: ${OPERATOR_TOKEN_ENV_VAR})")
    p.add_argument("--max-episodes", type=int, default=defaults.max_episodes)
    p.add_argument("--idle-ttl", type=float, default=defaults.idle_ttl_s, help="seconds an episode may idle")
    p.add_argument("--max-age", type=float, default=defaults.max_age_s, help="seconds an episode may live")
    p.add_argument("--max-action-chars", type=int, default=defaults.max_action_chars)
    p.add_argument("--workers", type=int, default=defaults.workers, help="threads running env code")
    p.add_argument("--env-kwargs", action="append", default=[], metavar="ENV_ID=JSON", type=_env_kwargs,
                   help="constructor arguments for one env id, e.g. "
                   "'agentrl/Bash-v0={\"sandbox_url\": \"http://127.0.0.1:8090\"}' (repeatable)")
    p.add_argument("--no-ui", dest="ui", action="store_false", help="do not serve the page at /ui")
    p.add_argument("--holder", help="name heading every episode id this process creates, for routing "
                   f"by id (default: ${HOLDER_ENV_VAR}, else host name and port)")
    p.add_argument("--state-dir", help="directory where the server keeps the ended episodes it remembers "
                   "(a file per holder name), so a restarted server still answers them as ended "
                   "(default: memory only; with --processes, a directory the cluster makes for its run)")
    p.add_argument("--ended-memory", type=int, default=defaults.ended_memory, metavar="N",
                   help="ended episodes remembered, each until it is past --max-age")
    p.add_argument("--processes", type=_processes, metavar="N|auto",
                   help="run N server processes (auto: one per core), each with its own loopback port; "
                   "this address then serves GET /v1/cluster, where clients find them (default: one "
                   "process serving everything here)")
    p.add_argument("--ray", action="store_true",
                   help="run the server processes as Ray actors (--processes of them, default 1) over the "
                   "Ray cluster at --ray-address, or a Ray started here; this address serves GET /v1/cluster")
    p.add_argument("--ray-address", help="a running Ray cluster to join (as `ray.init(address=...)`)")
    p.add_argument("--ray-cpus", type=float, default=1.0, help="Ray CPUs each server actor takes")
    p.add_argument("--ray-sandboxes", action="store_true",
                   help="with --ray: one sandbox server per node (nodes offering the resource `docker`, "
                   "if any does), used by the Bash-v0/Code-v0 episodes of that node's servers")
    p.add_argument("--log-level", default="warning")
    p.set_defaults(handler=serve)


def _processes(text: str) -> int:
    if text == "auto":
        return cpu_count()
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive number of processes or 'auto'")
    return int(text)


def _env_kwargs(text: str) -> tuple[str, dict[str, Any]]:
    env_id, sep, body = text.partition("=")
    try:
        kwargs = json.loads(body) if sep else None
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON after {env_id}=: {exc.msg}") from None
    if not isinstance(kwargs, dict):
        raise argparse.ArgumentTypeError("expected ENV_ID={...JSON object...}")
    return env_id, kwargs


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        host=args.host, port=args.port, env_ids=tuple(args.env_ids) if args.env_ids else None,
        default_env_id=args.default_env, token=args.token, operator_token=args.operator_token,
        max_episodes=args.max_episodes,
        idle_ttl_s=args.idle_ttl, max_age_s=args.max_age, max_action_chars=args.max_action_chars,
        workers=args.workers, env_kwargs=dict(args.env_kwargs), ui=args.ui, holder=args.holder,
        state_dir=args.state_dir, ended_memory=args.ended_memory,
    )


def serve(args: argparse.Namespace) -> int:
    import logging

    from agentrl.server.local import run

    logging.basicConfig(format="agentrl: %(message)s")
    logging.getLogger("agentrl.server").setLevel(logging.INFO)
    if args.imports:
        from agentrl.registration import import_env_modules

        if args.processes is not None or args.ray:  # each child would have to import them too
            print("agentrl serve: --import serves from this process only; with --processes or --ray, "
                  "declare the envs in the agentrl.envs entry point group, which every process reads")
            return 2
        try:
            import_env_modules(args.imports)
        except ValueError as exc:
            print(f"agentrl serve: {exc}")
            return 2
    config = config_from_args(args)
    try:
        config.check()
    except ValueError as exc:
        print(f"agentrl serve: {exc}")
        return 2
    if args.ray:
        from agentrl.server.cluster.ray_pool import run_ray

        holders = args.processes or 1
        print(f"agentrl cluster of {holders} Ray actors at http://{config.host}:{config.port} "
              "(holders at /v1/cluster)", flush=True)
        run_ray(config, holders, args.ray_address, args.ray_cpus, log_level=args.log_level,
                sandboxes=args.ray_sandboxes)
        return 0
    if args.processes is not None:
        from agentrl.server.cluster.processes import processes_app
        from agentrl.serving.runner import run_server

        print(f"agentrl cluster of {args.processes} processes at http://{config.host}:{config.port} "
              "(holders at /v1/cluster)", flush=True)
        run_server(processes_app(config, args.processes, args.log_level), host=config.host, port=config.port,
                   log_level=args.log_level)
        return 0
    page = ", page at /ui" if config.ui else ""
    print(f"agentrl serving on http://{config.host}:{config.port} (docs at /docs{page})", flush=True)
    run(config, log_level=args.log_level)
    return 0
