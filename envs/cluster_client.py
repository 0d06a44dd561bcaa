"""The clients' routing over a cluster of servers: episodes by id, and replay of a lost holder's episodes.

A client given a cluster's discovery URL (`http://host:port/v1/cluster`, served by
`agentrl serve --processes N` and `agentrl serve --ray`) instead of one server's URL keeps a map of
the cluster's holders and a client per holder. It creates each episode on the holder with the
fewest of its episodes, and sends every call naming an episode straight to the holder that holds
it, over that holder's own connections: no process in between. The map is read again when a holder
is lost, when an episode id names a holder it does not know, and every `REFRESH_S` on a create (so
new holders take new episodes and draining ones take none).

A lost holder loses no episode. For every live episode the client keeps its recipe: env id,
seed, copies of the options and env kwargs, and each reset and action it sent with a digest of what
came back (observation, info, reward, end flags). When the episode's holder is gone (its connection
refused, timed out, or the episode answered as unknown), the client creates the episode again on
another holder with the same recipe, replays every action, checks that each replayed answer equals
the one received before, and then sends the call that failed; the caller keeps the episode id it
had and sees a slower call. Where the replay differs (a Bash-v0 or Code-v0 step whose output
depends on the container, as listed in a fork's `fork_divergence`), the new episode is closed and
the call raises `EpisodeLostError` naming the step, never carrying on in a different state. An
episode its holder answers as closed or expired (`EpisodeEndedError`) is raised, never replayed: a
closed episode does not come back. A create without a seed is given one drawn here, so that every
episode can be replayed.

The discovery URL serves only the map, so a client that has read it once carries on while the URL
does not answer: it keeps the map it has (a holder gone meanwhile shows itself by its own calls) and
reads it again at the next `REFRESH_S`. A client that has never read it tries again for
`DISCOVERY_WAIT_S`, then raises `ClusterUnreachableError` naming the URL and its last error.

The routing is written once, as a generator (`Router.route`) that yields each request it needs
(a holder's URL or None for the discovery URL, and the `Call`, or a `Pause`) and is sent its outcome;
the sync and async clients drive it with their own per-holder clients (`agentrl.cluster_routes`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrl.client_wire import Call, _Wire
from agentrl.protocol import (
    API_PREFIX,
    CLUSTER_PATH,
    SEED_MAX,
    ClusterMap,
    EpisodeCreated,
    EpisodeEndedError,
    EpisodeStatus,
    ServerError,
    ShuttingDownError,
    UnknownEpisodeError,
)

REFRESH_S = 5.0  # how old the holder map may be when an episode is created
MIN_REFRESH_S = 0.2  # reads of the map at most this often, however many calls find a holder gone
LOST_GRACE_S = 2.0  # a holder this client lost takes no new episode for this long, whatever the map says
MAX_REPLAY_TRIES = 3  # holders tried in turn to replay one episode
DISCOVERY_WAIT_S = 10.0  # a client with no map yet tries the discovery URL again for this long
_EPISODE_PATH = re.compile(rf"{API_PREFIX}/episodes/([^/]+)(/.*)?")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pause:
    """A request to wait before the next one (the sync driver sleeps, the async one awaits)."""

    seconds: float


CallOutcome = Any  # a call's parsed answer, or the ServerError / httpx.TransportError it raised
Request = tuple[str | None, "Call[Any] | Pause"]  # (a holder's URL, or None for discovery; the call)
_MAP_CALL = Call("GET", CLUSTER_PATH, ClusterMap.model_validate)


class EpisodeLostError(UnknownEpisodeError):
    """An episode's holder was lost and the episode could not be replayed exactly elsewhere.

    `episode_id` is the id the caller knew; `reason` says why (a replayed answer that differs,
    no holder left). It is also an `UnknownEpisodeError`: the episode is gone, as after an expiry.
    """

    def __init__(self, episode_id: str, reason: str) -> None:
        super().__init__(404, "episode_lost", f"episode {episode_id!r} was lost with its server: {reason}")
        self.episode_id = episode_id
        self.reason = reason


class ClusterUnreachableError(ServerError):
    """The discovery URL did not answer a client that has no map of the cluster yet, through
    `DISCOVERY_WAIT_S` of tries; `__cause__` is the last transport error."""

    def __init__(self, discovery_url: str, tries: int, seconds: float, last: BaseException) -> None:
        super().__init__(503, "cluster_unreachable", f"the cluster's discovery URL {discovery_url} did not "
                         f"answer in {tries} tries over {seconds:.1f} s: {type(last).__name__}: {last}")
        self.discovery_url = discovery_url


def _hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _digest(observation: str, info: dict[str, Any], reward: float = 0.0, terminated: bool = False,
            truncated: bool = False) -> tuple[Any, ...]:
    """What a replayed answer must equal, field by field (`DIGEST_FIELDS`): the observation and the
    info hashed (memory stays flat however long the episode), the reward and the end flags. An env's
    info is a function of its seed and actions as its observations are (the task id, the state hash,
    the calls' outcomes...), so a replay that answers another info is another episode."""
    return (_hash(observation), _hash(json.dumps(info, sort_keys=True, default=str)), float(reward),
            bool(terminated), bool(truncated))


DIGEST_FIELDS = ("observation", "info", "reward", "terminated", "truncated")


@dataclass
class Recipe:
    """What re-creates one live episode: how it was made, and each reset and step since, with a
    digest of what each answered (`ops`: ("reset", seed, options, digest) or ("step", action, digest))."""

    env_id: str
    seed: int
    options: dict[str, Any] | None
    env_kwargs: dict[str, Any] | None
    first: tuple[Any, ...]
    holder: str
    server_id: str
    ops: list[tuple[Any, ...]] = field(default_factory=list)

    def steps(self) -> int:
        return sum(op[0] == "step" for op in self.ops)


@dataclass
class ReplayStats:
    """What replays cost this client: episodes replayed, steps replayed, time spent replaying."""

    episodes: int = 0
    steps: int = 0
    seconds: float = 0.0
    lost: int = 0  # episodes that could not be replayed (`EpisodeLostError`)
    map_misses: int = 0  # reads of the map that failed while the map already known was kept


class Router:
    """A cluster client's state and its routing, no I/O: see the module docstring."""

    def __init__(self, discovery_url: str) -> None:
        self.discovery_url = discovery_url.rstrip("/")
        self.map: dict[str, Any] = {}  # holder name -> HolderInfo, as last read
        self.read_at = -1e9
        self.own: dict[str, int] = {}  # holder name -> live episodes of this client on it
        self.lost_at: dict[str, float] = {}  # holder name -> when this client lost it
        self.recipes: dict[str, Recipe] = {}  # the caller's episode id -> its recipe
        self.map_error: BaseException | None = None  # why the last read of the map failed, if it did
        self.stats = ReplayStats()

    # --- the holder map ----------------------------------------------------------------------
    def _refresh(self, force: bool = False) -> Generator[Request, CallOutcome, None]:
        now = time.monotonic()
        if not force and now - self.read_at < REFRESH_S:
            return
        if now - self.read_at < MIN_REFRESH_S and self.map:
            return
        self.read_at = now
        got = yield None, _MAP_CALL
        if isinstance(got, httpx.TransportError) and not self.map:
            got = yield from self._first_map(got)
        if isinstance(got, httpx.TransportError):  # a map is known: carry on with it
            if self.map_error is None:
                log.warning("the cluster's discovery URL %s did not answer (%s: %s); going on with "
                            "the map read before", self.discovery_url, type(got).__name__, got)
            self.map_error = got
            self.stats.map_misses += 1
            return
        if isinstance(got, BaseException):
            raise got
        self.map = {h.holder: h for h in got.holders}
        self.map_error = None

    def _first_map(self, got: CallOutcome) -> Generator[Request, CallOutcome, CallOutcome]:
        """The map, tried again for `DISCOVERY_WAIT_S` after `got` (a transport error), waits
        doubling from 0.1 s; raises `ClusterUnreachableError` past that."""
        started = time.monotonic()
        tries, wait = 1, 0.1
        while isinstance(got, httpx.TransportError):
            if time.monotonic() + wait - started > DISCOVERY_WAIT_S:
                raise ClusterUnreachableError(self.discovery_url, tries, time.monotonic() - started,
                                              got) from got
            yield None, Pause(wait)
            got = yield None, _MAP_CALL
            tries, wait = tries + 1, min(wait * 2, 2.0)
        return got

    def _usable(self, name: str) -> bool:
        info = self.map.get(name)
        lost = self.lost_at.get(name)
        return (info is not None and info.state == "up"
                and (lost is None or time.monotonic() - lost > LOST_GRACE_S))

    def _pick(self, tried: frozenset[str] = frozenset()) -> Generator[Request, CallOutcome, str]:
        """The usable holder with the fewest of this client's live episodes; where every holder was
        lost lately, one the map calls up, not one of `tried` (this call's failed tries) if it can."""
        yield from self._refresh()
        choices = [name for name in self.map if self._usable(name)]
        if not choices:
            yield from self._refresh(force=True)
            choices = [name for name in self.map if self._usable(name)]
        if not choices:  # every holder was lost lately: the one lost longest ago that the map calls up
            up = [name for name, info in self.map.items() if info.state == "up"]
            up = [name for name in up if name not in tried] or up
            choices = [min(up, key=lambda n: self.lost_at.get(n, 0.0))] if up else []
        if not choices:
            states = ", ".join(f"{h.holder}: {h.state}" for h in self.map.values()) or "none"
            raise ShuttingDownError(503, "no_holder", f"no holder of {self.discovery_url} takes new "
                                    f"episodes (holders: {states}){self._stale()}")
        return min(choices, key=lambda n: (self.own.get(n, 0), self.map[n].live_episodes))

    def _lose(self, name: str) -> None:
        """`name` failed a call: it takes nothing for `LOST_GRACE_S`, and the map is read again at the
        next pick that `MIN_REFRESH_S` allows (the holder may be down for good, or others added)."""
        now = time.monotonic()
        self.lost_at[name] = now
        self.read_at = min(self.read_at, now - REFRESH_S + MIN_REFRESH_S)

    def _stale(self) -> str:
        """What an error about the map adds where the map is an old one, its URL not answering."""
        if self.map_error is None:
            return ""
        return f"; the map is an old one: its URL did not answer ({type(self.map_error).__name__})"

    def _url(self, name: str) -> str:
        return self.map[name].url

    # --- routing -----------------------------------------------------------------------------
    def route(self, call: Call[Any]) -> Generator[Request, CallOutcome, Any]:
        """Run `call` on the cluster: yields requests, is sent their outcomes, returns the answer."""
        op = call.body.get("op") if call.step and call.body else None
        if op == "create" or (call.method == "POST" and call.path == f"{API_PREFIX}/episodes"):
            return (yield from self._create(call))
        if call.path == f"{API_PREFIX}/step":
            return (yield from self._step_batch(call))
        episode_id = call.body.get("episode_id") if call.step and call.body else None
        # the channel's lifecycle items, named as their HTTP routes
        verb = _VERB_OF_OP.get(op, "step") if op is not None else "step"
        if episode_id is None:
            match = _EPISODE_PATH.fullmatch(call.path)
            if match is None:  # about the envs, not an episode: any holder answers alike
                name = yield from self._pick()
                return (yield from self._plain(name, call))
            episode_id, verb = match.group(1), (match.group(2) or "").lstrip("/") or call.method
        recipe = self.recipes.get(episode_id)
        if recipe is None:
            return (yield from self._unrecorded(episode_id, call))
        return (yield from self._on_episode(episode_id, recipe, verb, call))

    def _plain(self, name: str, call: Call[Any]) -> Generator[Request, CallOutcome, Any]:
        got = yield self._url(name), call
        if isinstance(got, BaseException):
            raise got
        return got

    def _unrecorded(self, episode_id: str, call: Call[Any]) -> Generator[Request, CallOutcome, Any]:
        """An episode this client did not make: sent to the holder its id names, if there is one."""
        holder = episode_id.partition(".")[0]
        if holder not in self.map:
            yield from self._refresh(force=True)
        if holder not in self.map:
            raise UnknownEpisodeError(404, "unknown_episode", f"episode {episode_id!r} names holder "
                                      f"{holder!r}, which {self.discovery_url} does not list "
                                      f"(holders: {', '.join(self.map) or 'none'}){self._stale()}")
        return (yield from self._plain(holder, call))

    def _create(self, call: Call[Any]) -> Generator[Request, CallOutcome, EpisodeCreated]:
        body = dict(call.body or {})
        if body.get("seed") is None:  # a seed drawn here makes the episode replayable
            body["seed"] = secrets.randbelow(SEED_MAX)
        call = dataclasses.replace(call, body=body)
        lost: BaseException = RuntimeError("no holder was tried")  # replaced: MAX_REPLAY_TRIES >= 1
        tried: frozenset[str] = frozenset()
        for _ in range(MAX_REPLAY_TRIES):
            name = yield from self._pick(tried)
            tried |= {name}
            self.own[name] = self.own.get(name, 0) + 1  # counted now: creates in flight spread too
            got = yield self._url(name), call
            if isinstance(got, BaseException):
                self.own[name] -= 1
                if isinstance(got, (httpx.TransportError, ShuttingDownError)):
                    self._lose(name)
                    lost = got
                    continue
                raise got
            created: EpisodeCreated = got
            # copies: a caller that reuses and changes its dicts after the create changes no replay
            self.recipes[created.episode_id] = Recipe(
                body["env_id"], body["seed"], copy.deepcopy(body.get("options")),
                copy.deepcopy(body.get("env_kwargs")), _digest(created.observation, created.info),
                name, created.episode_id)
            return created
        raise lost

    def _on_episode(self, episode_id: str, recipe: Recipe, verb: str,
                    call: Call[Any]) -> Generator[Request, CallOutcome, Any]:
        for attempt in range(MAX_REPLAY_TRIES + 1):
            if recipe.holder in self.map:
                got = yield self._url(recipe.holder), _retarget(call, episode_id, recipe.server_id)
            else:  # the cluster no longer lists its holder
                got = UnknownEpisodeError(404, "unknown_episode", f"holder {recipe.holder!r} is gone")
            if isinstance(got, EpisodeEndedError):  # closed or expired: gone for good, not replayed
                self._forget(episode_id)
                raise got
            if not _is_loss(got):
                break
            self._lose(recipe.holder)
            if verb == "DELETE":  # closing an episode whose holder is gone: it is gone
                self._forget(episode_id)
                return True
            if attempt == MAX_REPLAY_TRIES:
                self.stats.lost += 1
                self._forget(episode_id)
                raise EpisodeLostError(episode_id, f"lost its server {MAX_REPLAY_TRIES + 1} times in a row")
            yield from self._replay(episode_id, recipe)
        if isinstance(got, BaseException):
            raise got
        return self._record(episode_id, recipe, verb, call, got)

    def _record(self, episode_id: str, recipe: Recipe, verb: str, call: Call[Any], got: Any) -> Any:
        if verb == "step":
            recipe.ops.append(("step", call.body["action"],  # type: ignore[index]  # a step call has a body
                               _digest(got.observation, got.info, got.reward, got.terminated, got.truncated)))
        elif verb == "reset":
            body = call.body or {}
            recipe.ops.append(("reset", body.get("seed"), copy.deepcopy(body.get("options")),
                               _digest(got.observation, got.info)))
            got = got.model_copy(update={"episode_id": episode_id})
        elif verb == "DELETE":
            self._forget(episode_id)
        elif verb == "fork":
            for child in got:
                self.recipes[child.episode_id] = dataclasses.replace(
                    recipe, server_id=child.episode_id, ops=list(recipe.ops))
                self.own[recipe.holder] = self.own.get(recipe.holder, 0) + 1
        elif isinstance(got, EpisodeStatus):
            got = got.model_copy(update={"episode_id": episode_id})
        return got

    def _forget(self, episode_id: str) -> None:
        recipe = self.recipes.pop(episode_id, None)
        if recipe is not None:
            self.own[recipe.holder] = max(0, self.own.get(recipe.holder, 0) - 1)

    def _step_batch(self, call: Call[Any]) -> Generator[Request, CallOutcome, list[Any]]:
        """A batch over a cluster: each item stepped on its holder in turn, each outcome kept apart."""
        out: list[Any] = []
        for item in (call.body or {})["steps"]:
            try:
                out.append((yield from self.route(_Wire.step(item["episode_id"], item["action"], None))))
            except ServerError as exc:
                out.append(exc)
        return out

    # --- replay ------------------------------------------------------------------------------
    def _replay(self, episode_id: str, recipe: Recipe) -> Generator[Request, CallOutcome, None]:
        """Re-create the episode on a usable holder from its recipe, checking every answer."""
        started = time.perf_counter()
        old_holder = recipe.holder
        tried: frozenset[str] = frozenset({old_holder})
        for _ in range(MAX_REPLAY_TRIES):
            name = yield from self._pick(tried)
            tried |= {name}
            self.own[name] = self.own.get(name, 0) + 1
            try:
                replayed = yield from self._replay_on(name, episode_id, recipe)
            finally:
                self.own[name] -= 1
            if replayed is not None:
                self.own[old_holder] = max(0, self.own.get(old_holder, 0) - 1)
                self.own[name] += 1
                recipe.holder, recipe.server_id = name, replayed
                self.stats.episodes += 1
                self.stats.steps += recipe.steps()
                self.stats.seconds += time.perf_counter() - started
                return
            self._lose(name)
        self.stats.lost += 1
        self._forget(episode_id)
        raise EpisodeLostError(episode_id, f"no holder could take its replay in {MAX_REPLAY_TRIES} tries")

    def _replay_on(self, name: str, episode_id: str,
                   recipe: Recipe) -> Generator[Request, CallOutcome, str | None]:
        """The new episode's id on `name`, or None if `name` was lost meanwhile; raises
        `EpisodeLostError` where an answer differs from the one the caller received."""
        url = self._url(name)
        create = _Wire.create(recipe.env_id, recipe.seed, recipe.options, recipe.env_kwargs)
        create = dataclasses.replace(create, body={**create.body, "replay_of": recipe.server_id})  # type: ignore[dict-item]  # has a body
        got = yield url, create
        if _is_loss(got):
            return None
        if isinstance(got, BaseException):
            raise got
        new_id = got.episode_id
        if (digest := _digest(got.observation, got.info)) != recipe.first:
            yield from self._differs(url, episode_id, new_id, recipe, "its first answer", digest,
                                     recipe.first)
        step = 0
        for op in recipe.ops:
            if op[0] == "step":
                step += 1
                got = yield url, _Wire.step(new_id, op[1], None)
            else:
                got = yield url, _Wire.reset(new_id, op[1], op[2])
            if _is_loss(got):
                return None
            if isinstance(got, BaseException):
                raise got
            digest = _digest(got.observation, got.info, got.reward, got.terminated, got.truncated) \
                if op[0] == "step" else _digest(got.observation, got.info)
            if digest != op[-1]:
                what = f"step {step} ({op[1][:60]!r})" if op[0] == "step" else f"the reset after step {step}"
                yield from self._differs(url, episode_id, new_id, recipe, what, digest, op[-1])
        return new_id

    def _differs(self, url: str, episode_id: str, new_id: str, recipe: Recipe, what: str,
                 got: tuple[Any, ...], want: tuple[Any, ...]) -> Generator[Request, CallOutcome, None]:
        yield url, _Wire.close(new_id)  # whatever it answers, the replay is over
        self.stats.lost += 1
        self._forget(episode_id)
        fields = ", ".join(name for name, a, b in zip(DIGEST_FIELDS, got, want, strict=True) if a != b)
        raise EpisodeLostError(episode_id, f"replayed on another server, {what} of {recipe.env_id} answered "
                               f"differently ({fields}; its world is not deterministic: see fork_divergence)")


# A `/v1/ws` frame item's `op` (none for a step), as `route` names the call it stands for.
_VERB_OF_OP = {"reset": "reset", "close": "DELETE", "fork": "fork"}


def _is_loss(got: CallOutcome) -> bool:
    """Whether an outcome says the episode's holder, or the episode with it, is gone."""
    if isinstance(got, httpx.TransportError | ShuttingDownError):
        return True
    return isinstance(got, UnknownEpisodeError) and got.code == "unknown_episode"


def _retarget(call: Call[Any], episode_id: str, server_id: str) -> Call[Any]:
    """`call` naming the episode's id on its current holder instead of the caller's id."""
    if server_id == episode_id:
        return call
    body = call.body
    if body is not None and body.get("episode_id") == episode_id:
        body = {**body, "episode_id": server_id}
    return dataclasses.replace(call, path=call.path.replace(episode_id, server_id), body=body)
