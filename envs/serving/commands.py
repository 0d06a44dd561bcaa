"""An operator's commands on a running cluster, as both servers' command lines offer them.

    show   the holders, their URLs, states and loads
    add    new holders, which take new work
    drain  a holder takes no new work and stops once what it holds is done (or, `--within S`, past S seconds)
    roll   every holder restarted, one at a time (`agentrl.serving.roll`)

`agentrl cluster ...` runs them on an env-server cluster, `agentrl sandbox cluster ...` on a
sandbox-server cluster: the same calls on the address (`GET /v1/cluster`, `POST /v1/cluster/holders`,
`POST /v1/cluster/holders/{name}/drain`), each server's token and word for what a holder holds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
from typing import Any


def add_commands(actions: Any, *, held: str, load_field: str, default_url: str, token_env_var: str,
                 prog: str) -> None:
    """`show`, `add`, `drain` and `roll` as subcommands of `actions` (an argparse subparsers object
    with `dest="cluster_command"`); `held` words what a holder holds in the help, `load_field` names
    its load in the map, `prog` is how an error names the command."""
    run = functools.partial(run_command, token_env_var=token_env_var, load_field=load_field, prog=prog)
    for name, text in (("show", f"list the holders, their URLs, states and live {held}"),
                       ("add", f"start new holders, which take new {held}"),
                       ("drain", f"a holder takes no new {held} and stops once its live ones are done"),
                       ("roll", "restart every holder, one at a time: a new one added, the old one drained")):
        q = actions.add_parser(name, help=text)
        q.add_argument("--url", default=default_url, help="the cluster's address")
        q.add_argument("--token", help=f"bearer token (default: ${token_env_var})")
        if name == "add":
            q.add_argument("-n", type=int, default=1, help="how many holders to add")
        if name == "drain":
            q.add_argument("holder", help="the holder's name, as `show` lists it")
        if name in ("drain", "roll"):
            q.add_argument("--within", type=float, default=None if name == "drain" else 60.0, metavar="S",
                           help=f"stop a drained holder after S seconds even if it holds {held}: their "
                           "clients replay them elsewhere" + ("" if name == "drain" else " (default: 60)"))
        q.set_defaults(handler=run)


def run_command(args: argparse.Namespace, *, token_env_var: str, load_field: str, prog: str) -> int:
    """Carry out `args.cluster_command` on the address `args.url`; prints the answer (JSON)."""
    import httpx

    from agentrl.serving.names import CLUSTER_PATH
    from agentrl.serving.roll import RollError, roll

    token = args.token or os.environ.get(token_env_var)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = args.url.rstrip("/")
    with httpx.Client(headers=headers, timeout=120.0) as http:
        if args.cluster_command == "roll":
            try:
                holders = roll(http, base, args.within, load_field=load_field,
                               say=lambda line: print(line, flush=True))
            except RollError as exc:
                print(f"{prog} roll: {exc}")
                return 1
            print(json.dumps({"holders": holders}, indent=2))
            return 0
        if args.cluster_command == "show":
            r = http.get(base + CLUSTER_PATH)
        elif args.cluster_command == "add":
            r = http.post(f"{base}{CLUSTER_PATH}/holders", json={"n": args.n})
        else:
            body = None if args.within is None else {"within_s": args.within}
            r = http.post(f"{base}{CLUSTER_PATH}/holders/{args.holder}/drain", json=body)
    print(json.dumps(r.json(), indent=2))
    return 0 if r.is_success else 1
