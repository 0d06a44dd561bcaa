"""`agentrl cluster`: look at a running cluster and change it (scale up, drain a holder).

    agentrl cluster show  --url http://127.0.0.1:8000
    agentrl cluster add   --url http://127.0.0.1:8000 -n 2
    agentrl cluster drain --url http://127.0.0.1:8000 HOLDER

The same commands for a cluster of processes (`agentrl serve --processes N`) and of Ray actors
(`agentrl serve --ray`): each talks to the cluster's address.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from agentrl.server.config import TOKEN_ENV_VAR


def add_cli(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="show, scale up or drain a running agentrl cluster")
    actions = p.add_subparsers(dest="cluster_command", required=True)
    for name, text in (("show", "list the holders, their URLs, states and live episodes"),
                       ("add", "start new holders, which take new episodes"),
                       ("drain", "a holder takes no new episodes and stops once its live ones are done")):
        q = actions.add_parser(name, help=text)
        q.add_argument("--url", default="http://127.0.0.1:8000", help="the cluster's address")
        q.add_argument("--token", help=f"bearer token (default: ${TOKEN_ENV_VAR})")
        if name == "add":
            q.add_argument("-n", type=int, default=1, help="how many holders to add")
        if name == "drain":
            q.add_argument("holder", help="the holder's name, as `show` lists it")
        q.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import httpx

    from agentrl.server.wire import CLUSTER_PATH

    token = args.token or os.environ.get(TOKEN_ENV_VAR)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = args.url.rstrip("/")
    with httpx.Client(headers=headers, timeout=120.0) as http:
        if args.cluster_command == "show":
            r = http.get(base + CLUSTER_PATH)
        elif args.cluster_command == "add":
            r = http.post(f"{base}{CLUSTER_PATH}/holders", json={"n": args.n})
        else:
            r = http.post(f"{base}{CLUSTER_PATH}/holders/{args.holder}/drain")
    body = r.json()
    print(json.dumps(body, indent=2))
    return 0 if r.is_success else 1
