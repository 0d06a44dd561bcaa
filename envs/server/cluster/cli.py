"""`agentrl cluster`: look at a running cluster and change it (scale up, drain a holder, restart all).

    agentrl cluster show  --url http://127.0.0.1:8000
    agentrl cluster add   --url http://127.0.0.1:8000 -n 2
    agentrl cluster drain --url http://127.0.0.1:8000 HOLDER [--within 60]
    agentrl cluster roll  --url http://127.0.0.1:8000 --within 60
    agentrl cluster serve --port 8000 --holder agentrl-0=http://agentrl-0.agentrl:8000 ...

The same commands for a cluster of processes (`agentrl serve --processes N`) and of Ray actors
(`agentrl serve --ray`): each talks to the cluster's address. `serve` is that address for servers
run by something else (a Kubernetes StatefulSet's pods, each `agentrl serve --holder <pod name>`).
"""

from __future__ import annotations

import argparse
from typing import Any

from agentrl.server.config import OPERATOR_TOKEN_ENV_VAR, TOKEN_ENV_VAR
from agentrl.serving.commands import add_commands


def add_cli(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="show, scale up or drain a running agentrl cluster")
    actions = p.add_subparsers(dest="cluster_command", required=True)
    add_commands(actions, held="episodes", load_field="live_episodes", default_url="http://127.0.0.1:8000",
                 token_env_var=TOKEN_ENV_VAR, prog="agentrl cluster")
    q = actions.add_parser("serve", help="serve GET /v1/cluster for servers run by something else")
    q.add_argument("--host", default="127.0.0.1", help="bind address (non-loopback requires a token)")
    q.add_argument("--port", type=int, default=8000)
    q.add_argument("--holder", action="append", required=True, metavar="NAME=URL", type=_holder,
                   help="a server: its holder name (`agentrl serve --holder NAME`) and URL (repeatable)")
    q.add_argument("--token", help=f"bearer token clients and servers use (default: ${TOKEN_ENV_VAR})")
    q.add_argument("--operator-token", help="the servers' operator token, taken here too "
                   f"(default: ${OPERATOR_TOKEN_ENV_VAR})")
    q.add_argument("--log-level", default="warning")
    q.set_defaults(handler=serve_static)


def _holder(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError("expected NAME=http://host:port")
    return name, url


def serve_static(args: argparse.Namespace) -> int:
    from agentrl.server.cluster.pool import StaticPool, cluster_app
    from agentrl.server.config import ServerConfig
    from agentrl.serving.runner import run_server

    config = ServerConfig(host=args.host, port=args.port, token=args.token,
                          operator_token=args.operator_token)
    try:
        config.check()
    except ValueError as exc:
        print(f"agentrl cluster serve: {exc}")
        return 2
    token = config.resolved_token()
    app = cluster_app(StaticPool(dict(args.holder), token), len(args.holder), token,
                      config.resolved_operator_token())
    print(f"agentrl cluster of {len(args.holder)} servers at http://{args.host}:{args.port}", flush=True)
    run_server(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
