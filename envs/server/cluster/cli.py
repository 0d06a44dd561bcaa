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
import json
import os
from typing import Any

from agentrl.server.config import OPERATOR_TOKEN_ENV_VAR, TOKEN_ENV_VAR


def add_cli(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="show, scale up or drain a running agentrl cluster")
    actions = p.add_subparsers(dest="cluster_command", required=True)
    for name, text in (("show", "list the holders, their URLs, states and live episodes"),
                       ("add", "start new holders, which take new episodes"),
                       ("drain", "a holder takes no new episodes and stops once its live ones are done"),
                       ("roll", "restart every holder, one at a time: a new one added, the old one drained")):
        q = actions.add_parser(name, help=text)
        q.add_argument("--url", default="http://127.0.0.1:8000", help="the cluster's address")
        q.add_argument("--token", help=f"bearer token (default: ${TOKEN_ENV_VAR})")
        if name == "add":
            q.add_argument("-n", type=int, default=1, help="how many holders to add")
        if name == "drain":
            q.add_argument("holder", help="the holder's name, as `show` lists it")
        if name in ("drain", "roll"):
            q.add_argument("--within", type=float, default=None if name == "drain" else 60.0, metavar="S",
                           help="stop a drained holder after S seconds even if it holds episodes: their "
                           "clients replay them elsewhere" + ("" if name == "drain" else " (default: 60)"))
        q.set_defaults(handler=run)
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
    import uvicorn

    from agentrl.cluster.serving import uvicorn_config
    from agentrl.server.cluster.pool import StaticPool, cluster_app
    from agentrl.server.config import ServerConfig

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
    uvicorn.Server(uvicorn_config(app, host=args.host, port=args.port, log_level=args.log_level)).run()
    return 0


def run(args: argparse.Namespace) -> int:
    import httpx

    from agentrl.protocol import CLUSTER_PATH

    token = args.token or os.environ.get(TOKEN_ENV_VAR)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = args.url.rstrip("/")
    with httpx.Client(headers=headers, timeout=120.0) as http:
        if args.cluster_command == "roll":
            return roll_all(http, base, args.within)
        if args.cluster_command == "show":
            r = http.get(base + CLUSTER_PATH)
        elif args.cluster_command == "add":
            r = http.post(f"{base}{CLUSTER_PATH}/holders", json={"n": args.n})
        else:
            body = None if args.within is None else {"within_s": args.within}
            r = http.post(f"{base}{CLUSTER_PATH}/holders/{args.holder}/drain", json=body)
    print(json.dumps(r.json(), indent=2))
    return 0 if r.is_success else 1


def roll_all(http: Any, base: str, within_s: float) -> int:
    from agentrl.server.cluster.roll import RollError, roll

    try:
        holders = roll(http, base, within_s, say=lambda line: print(line, flush=True))
    except RollError as exc:
        print(f"agentrl cluster roll: {exc}")
        return 1
    print(json.dumps({"holders": holders}, indent=2))
    return 0
