"""A rolling restart: every holder of a running cluster restarted, one at a time, while it serves.

For each holder listed when the roll begins: a new holder is added and waited for until it is `up`
(so the cluster never has fewer holders taking new work than it had), then the old one is drained
with a bound: it takes no new work and stops once what it holds is closed, or once the bound is
past, when the clients of what it still holds replay that on the other holders (episodes for env
servers, sandboxes for sandbox servers: each client's replay of a lost holder's work). The old
holder stays in the map, `down`: an id naming it is then replayed, where an id naming a holder the
map does not list would be unknown. New holders run the code and settings the cluster's address
starts holders with now, so a roll after an upgrade of the installed package moves every holder to
it. Only the cluster's address is talked to (`POST /v1/cluster/holders`,
`POST /v1/cluster/holders/{name}/drain`); an address whose holders are run by something else
refuses the add, and the roll stops there, having changed nothing. Both servers roll with this
(`agentrl cluster roll`, `agentrl sandbox cluster roll`); only the name of a holder's load differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from agentrl.serving.names import CLUSTER_PATH

ROLLING = ("starting", "up", "unresponsive")  # the states of a holder the roll restarts
POLL_S = 0.2
STOP_MARGIN_S = 60.0  # past the drain's bound, for the holder to close what it holds and exit


class RollError(Exception):
    """The roll could not go on; what it did so far stays done."""


def roll(http: httpx.Client, base: str, within_s: float, *, load_field: str, start_timeout_s: float = 180.0,
         say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Restart every holder of the cluster at `base`, one at a time; returns the map at the end.
    `load_field` names a holder's load in the map (`live_episodes`, `live_sandboxes`): each
    holder's load when it is drained is said."""
    holders = _holders(http, base)
    if any(load_field not in h for h in holders):  # the other server's address: refused before any change
        raise RollError(f"the map of {base} gives no {load_field}: not a cluster this command rolls")
    targets = [h["holder"] for h in holders if h["state"] in ROLLING]
    if not targets:
        raise RollError(f"no holder of {base} to restart")
    for old in targets:
        began = time.monotonic()
        r = http.post(f"{base}{CLUSTER_PATH}/holders", json={"n": 1})
        if r.status_code != 201:
            raise RollError(f"adding a holder in place of {old} failed ({r.status_code}): {r.text}")
        new = r.json()["holders"][0]["holder"]
        _wait(http, base, new, "up", start_timeout_s)
        r = http.post(f"{base}{CLUSTER_PATH}/holders/{old}/drain", json={"within_s": within_s})
        if not r.is_success:
            raise RollError(f"draining {old} failed ({r.status_code}): {r.text}")
        live = r.json()[load_field]
        _wait(http, base, old, "down", within_s + STOP_MARGIN_S)
        say(f"{old} -> {new}: {live} {load_field.replace('_', ' ')} at the drain, "
            f"{time.monotonic() - began:.1f} s")
    return _holders(http, base)


def _holders(http: httpx.Client, base: str) -> list[dict[str, Any]]:
    r = http.get(base + CLUSTER_PATH)
    if not r.is_success:
        raise RollError(f"reading the map of {base} failed ({r.status_code}): {r.text}")
    return r.json()["holders"]


def _wait(http: httpx.Client, base: str, name: str, state: str, timeout_s: float) -> None:
    """Until the map lists `name` in `state`; a holder that goes `down` while awaited `up` failed."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = {h["holder"]: h["state"] for h in _holders(http, base)}.get(name)
        if now == state:
            return
        if now == "down":
            raise RollError(f"holder {name} went down before it was up")
        if time.monotonic() > deadline:
            raise RollError(f"holder {name} not {state} after {timeout_s:.0f} s (it is {now})")
        time.sleep(POLL_S)
