"""`agentrl cluster roll`: restart every holder of a running cluster, one at a time, while it serves.

For each holder listed when the roll begins: a new holder is added and waited for until it is `up`
(so the cluster never has fewer holders taking new episodes than it had), then the old one is
drained with a bound: it takes no new episodes and stops once its last one is closed, or once the
bound is past, when the clients of what it still holds replay those episodes on the other holders
(`agentrl.client.cluster`). The old holder stays in the map, `down`: an id naming it is then
replayed, where an id naming a holder the map does not list would be an unknown episode. New
holders run the code and settings the cluster's address starts holders with now, so a roll after
an upgrade of the installed package moves every holder to it. Only the cluster's address is
talked to (`POST /v1/cluster/holders`, `POST /v1/cluster/holders/{name}/drain`); a cluster whose
holders are run by something else (`agentrl cluster serve`) refuses the add, and the roll stops
there, having changed nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from agentrl.protocol import CLUSTER_PATH

ROLLING = ("starting", "up", "unresponsive")  # the states of a holder the roll restarts
POLL_S = 0.2
STOP_MARGIN_S = 60.0  # past the drain's bound, for the holder to close what it holds and exit


class RollError(Exception):
    """The roll could not go on; what it did so far stays done."""


def roll(http: httpx.Client, base: str, within_s: float, start_timeout_s: float = 180.0,
         say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Restart every holder of the cluster at `base`, one at a time; returns the map at the end."""
    targets = [h["holder"] for h in _holders(http, base) if h["state"] in ROLLING]
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
        live = r.json()["live_episodes"]
        _wait(http, base, old, "down", within_s + STOP_MARGIN_S)
        say(f"{old} -> {new}: {live} live episodes at the drain, {time.monotonic() - began:.1f} s")
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
