"""The clients' routing over a cluster of servers: episodes by id, and replay of a lost holder's episodes.

A client given a cluster's discovery URL (`http://host:port/v1/cluster`, served by
`agentrl serve --processes N` and `agentrl serve --ray`) instead of one server's URL keeps a map of
the cluster's holders and a client per holder. It creates each episode on the holder with the
fewest of its episodes, and sends every call naming an episode straight to the holder that holds
it, over that holder's own connections: no process in between. The map is read again when a holder
is lost, when an episode id names a holder it does not know, and every `REFRESH_S` on a create (so
new holders take new episodes and draining ones take none); one call at a time reads it, the
others wait for that read (`ClientMap.read_once`).

A lost holder loses no episode. For every live episode the client keeps its recipe: env id,
seed, copies of the options and env kwargs, and each reset and action it sent with a digest of what
came back (observation, info, reward, end flags). When the episode's holder is gone (its connection
refused, timed out, or the episode answered as unknown), the client creates the episode again on
another holder with the same recipe, replays every action (the steps between resets in batches,
a request each), checks that each replayed answer equals the one received before, and then sends
the call that failed; the caller keeps the episode id it had and sees a slower call. Where the
replay differs (a Bash-v0 or Code-v0 step whose output depends on the container, as listed in a
fork's `fork_divergence`), the new episode is closed and the call raises `EpisodeLostError` naming
the step, never carrying on in a different state. An episode its holder answers as closed or
expired (`EpisodeEndedError`) is raised, never replayed: a closed episode does not come back. Nor is
one that may have ended, whatever its holder still remembers (a holder restarted, or one that forgot
it): every create answers the server's idle TTL and max age, and the recipe keeps two clocks, from
when the create and the last step, reset or fork were sent; an episode lost once it has idled past
the TTL, or lived past the max age, by those clocks (never shorter than the server's) raises
`EpisodeEndedError` (`episode_expired`) instead of being replayed. A create without a seed is given
one drawn here, so that every episode can be replayed.

The discovery URL serves only the map, so a client that has read it once carries on while the URL
does not answer: it keeps the map it has (a holder gone meanwhile shows itself by its own calls) and
reads it again at the next `REFRESH_S`. A client that has never read it tries again for
`DISCOVERY_WAIT_S`, then raises `ClusterUnreachableError` naming the URL and its last error.

The routing is written once, as a generator (`Router.route`) that yields each request it needs
(a holder's URL or None for the discovery URL, and the `Call`, or a `Pause`) and is sent its outcome;
the sync and async clients drive it with their own per-holder clients (`agentrl.client.cluster_routes`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import secrets
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import httpx

from agentrl.client.recipe import DIGEST_FIELDS, Recipe, ReplayStats, answer_digest, op_name, replay_batches
from agentrl.client.wire import Call, _Wire
from agentrl.protocol import (
    CLUSTER_PATH,
    SEED_MAX,
    ClusterMap,
    EpisodeCreated,
    EpisodeEndedError,
    EpisodeStatus,
    ErrorCode,
    HolderInfo,
    ServerError,
    ShuttingDownError,
    UnknownEpisodeError,
)
from agentrl.serving.flows import LOST_GRACE_S as LOST_GRACE_S  # the grace is the kit's, named here too
from agentrl.serving.flows import READ_POLL_S, ClientMap

REFRESH_S = 5.0  # how old the holder map may be when an episode is created
MIN_REFRESH_S = 0.2  # reads of the map at most this often, however many calls find a holder gone
MAX_REPLAY_TRIES = 3  # holders tried in turn to replay one episode
RETRY_WAIT_S = 30.0  # a create or replay that met holders gone tries again for this long (a restart)
DISCOVERY_WAIT_S = 10.0  # a client with no map yet tries the discovery URL again for this long

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


class Router(ClientMap[HolderInfo]):
    """A cluster client's state and its routing, no I/O: see the module docstring. The map, this
    client's live episodes per holder (`own`) and its losses are the serving kit's `ClientMap`."""

    def __init__(self, discovery_url: str) -> None:
        super().__init__()
        self.discovery_url = discovery_url.rstrip("/")
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
        yield from self.read_once(self._read_map(), (None, Pause(READ_POLL_S)), DISCOVERY_WAIT_S)

    def _read_map(self) -> Generator[Request, CallOutcome, None]:
        """One read of the map (tried again for `DISCOVERY_WAIT_S` while none is known)."""
        self.read_at = time.monotonic()
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

    def _pick(self, tried: frozenset[str] = frozenset()) -> Generator[Request, CallOutcome, str]:
        """The usable holder with the fewest of this client's live episodes; where every holder was
        lost lately, one the map calls up, not one of `tried` (this call's failed tries) if it can."""
        yield from self._refresh()
        choices = [name for name in self.map if self.usable(name)]
        if not choices:
            yield from self._refresh(force=True)
            choices = [name for name in self.map if self.usable(name)]
        if not choices:  # every holder was lost lately: the one lost longest ago that the map calls up
            up = [name for name, info in self.map.items() if info.state == "up"]
            up = [name for name in up if name not in tried] or up
            choices = [min(up, key=lambda n: self.lost_at.get(n, 0.0))] if up else []
        if not choices:
            raise ShuttingDownError(503, "no_holder", f"no holder of {self.discovery_url} takes new "
                                    f"episodes (holders: {self.states()}){self._stale()}")
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
        if call.op == "create":
            return (yield from self._create(call))
        if call.op == "step_batch":
            return (yield from self._step_batch(call))
        if call.episode_id is None:  # about the envs, not an episode: any holder answers alike
            name = yield from self._pick()
            return (yield from self._plain(name, call))
        recipe = self.recipes.get(call.episode_id)
        if recipe is None:
            return (yield from self._unrecorded(call.episode_id, call))
        return (yield from self._on_episode(call.episode_id, recipe, call.op, call))

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
        lost: BaseException = RuntimeError("no holder was tried")  # replaced: the first try is made
        tried: frozenset[str] = frozenset()
        began, failures = time.monotonic(), 0
        while (name := (yield from self._next_holder(tried, failures, began))) is not None:
            tried |= {name}
            self.took(name)  # counted now: creates in flight spread too
            sent = time.monotonic()
            got = yield self._url(name), call
            if isinstance(got, BaseException):
                self.drop(name)
                if isinstance(got, (httpx.TransportError, ShuttingDownError)):  # not made: safe to retry
                    self._lose(name)
                    lost, failures = got, failures + 1
                    continue
                raise got
            created: EpisodeCreated = got
            # copies: a caller that reuses and changes its dicts after the create changes no replay
            self.recipes[created.episode_id] = Recipe(
                body["env_id"], body["seed"], copy.deepcopy(body.get("options")),
                copy.deepcopy(body.get("env_kwargs")), answer_digest(created),
                name, created.episode_id)
            self.recipes[created.episode_id].start_clocks(sent, created)
            return created
        raise lost

    def _on_episode(self, episode_id: str, recipe: Recipe, op: str | None,
                    call: Call[Any]) -> Generator[Request, CallOutcome, Any]:
        for attempt in range(MAX_REPLAY_TRIES + 1):
            sent = time.monotonic()
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
            if op == "close":  # closing an episode whose holder is gone: it is gone
                self._forget(episode_id)
                return True
            if (why := recipe.may_have_ended(time.monotonic())) is not None:  # ended stays ended
                self.stats.ended += 1
                self._forget(episode_id)
                raise EpisodeEndedError(404, ErrorCode.EPISODE_EXPIRED, f"episode {episode_id!r} is not "
                                        f"answered by its server ({_loss_name(got)}) and may have expired: "
                                        f"{why}; it is not replayed")
            if attempt == MAX_REPLAY_TRIES:
                self.stats.lost += 1
                self._forget(episode_id)
                raise EpisodeLostError(episode_id, f"lost its server {MAX_REPLAY_TRIES + 1} times in a row")
            yield from self._replay(episode_id, recipe)
        if isinstance(got, BaseException):
            raise got
        return self._record(episode_id, recipe, op, call, got, sent)

    def _record(self, episode_id: str, recipe: Recipe, op: str | None, call: Call[Any], got: Any,
                sent: float) -> Any:
        """Note a call's answer in the episode's recipe (a step with the seconds it took since it
        was `sent`, `time.monotonic()`), and a use in its clocks."""
        if op in ("step", "reset", "fork"):  # what the server counts as a use of the episode
            recipe.used_at = sent
        if op == "step":
            recipe.ops.append(("step", call.body["action"], time.monotonic() - sent,  # type: ignore[index]  # a step call has a body
                               answer_digest(got)))
        elif op == "reset":
            body = call.body or {}
            recipe.ops.append(("reset", body.get("seed"), copy.deepcopy(body.get("options")),
                               answer_digest(got)))
            got = got.model_copy(update={"episode_id": episode_id})
        elif op == "close":
            self._forget(episode_id)
        elif op == "fork":
            for child in got:
                made = self.recipes[child.episode_id] = dataclasses.replace(
                    recipe, server_id=child.episode_id, ops=list(recipe.ops))
                made.start_clocks(sent, child)  # a fork's clocks start at its fork
                self.took(recipe.holder)
        elif isinstance(got, EpisodeStatus):
            got = got.model_copy(update={"episode_id": episode_id})
        return got

    def _forget(self, episode_id: str) -> None:
        recipe = self.recipes.pop(episode_id, None)
        if recipe is not None:
            self.drop(recipe.holder)

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
        creates: list[float] = []  # each try's create, in seconds
        began, failures = time.monotonic(), 0
        # the call that met its holder gone counts as the first failure: a restart is waited out
        while (name := (yield from self._next_holder(tried, failures + 1, began))) is not None:
            tried |= {name}
            self.took(name)
            sent = time.monotonic()
            try:
                replayed = yield from self._replay_on(name, episode_id, recipe, creates)
            finally:
                self.drop(name)
            if replayed is not None:
                self.drop(old_holder)
                self.took(name)
                recipe.holder, recipe.server_id = name, replayed.episode_id
                recipe.start_clocks(sent, replayed)  # its new holder's clocks, and TTLs
                self.stats.episodes += 1
                self.stats.steps += recipe.steps()
                self.stats.seconds += time.perf_counter() - started
                self.stats.create_seconds += sum(creates)
                return
            self._lose(name)
            failures += 1
        self.stats.lost += 1
        self._forget(episode_id)
        raise EpisodeLostError(episode_id, f"no holder could take its replay in {failures} tries over "
                               f"{time.monotonic() - began:.1f} s")

    def _next_holder(self, tried: frozenset[str], failures: int,
                     began: float) -> Generator[Request, CallOutcome, str | None]:
        """The holder for the next try of a create or replay whose `failures` tries so far met their
        holder gone, or None once `MAX_REPLAY_TRIES` failed and `RETRY_WAIT_S` passed since `began`.

        A create is not acknowledged before it answers, so trying it elsewhere is safe. The second
        try is made at once; from the third on, each waits (doubling from `MIN_REFRESH_S` to 2 s)
        and reads the map again, and a map with no holder up but one starting (a restart) is waited
        out: tries spent in a few milliseconds, on a map read before a holder died or while its
        restart was not listening yet, lost creates that a second's wait would have made."""
        while True:
            if failures >= MAX_REPLAY_TRIES and time.monotonic() - began > RETRY_WAIT_S:
                return None
            if failures > 1:
                yield None, Pause(min(MIN_REFRESH_S * 2 ** (failures - 2), 2.0))
                yield from self._refresh(force=True)
            try:
                return (yield from self._pick(tried))
            except ShuttingDownError:  # none up: wait for one starting, if any is and a try failed
                if not failures or not any(h.state == "starting" for h in self.map.values()):
                    raise
                failures += 1

    def _replay_on(self, name: str, episode_id: str, recipe: Recipe,
                   creates: list[float]) -> Generator[Request, CallOutcome, EpisodeCreated | None]:
        """The new episode's create answer on `name`, or None if `name` was lost meanwhile; raises
        `EpisodeLostError` where an answer differs from the one the caller received. The seconds
        its create took are appended to `creates`.

        The steps between resets go in batches (`replay_batches`), each one frame of the step
        channel, whose items of one episode run in their order: a round trip per batch instead of
        one per step, so that a replayed step costs about what the env's step costs, not a wait in
        the holder's queue behind every other episode's step (`bench/replay.py` measures it)."""
        url = self._url(name)
        create = _Wire.create(recipe.env_id, recipe.seed, recipe.options, recipe.env_kwargs)
        create = dataclasses.replace(create, body={**create.body, "replay_of": recipe.server_id})  # type: ignore[dict-item]  # has a body
        began = time.perf_counter()
        got = yield url, create
        creates.append(time.perf_counter() - began)
        if _is_loss(got):
            return None
        if isinstance(got, BaseException):
            raise got
        made: EpisodeCreated = got
        new_id = made.episode_id
        if (digest := answer_digest(got)) != recipe.first:
            yield from self._differs(url, episode_id, new_id, recipe, "its first answer", digest,
                                     recipe.first)
        step = 0
        for ops in replay_batches(recipe.ops):
            if ops[0][0] == "reset":
                answers = [(yield url, _Wire.reset(new_id, ops[0][1], ops[0][2]))]
            else:
                got = yield url, _Wire.step_frame(new_id, [op[1] for op in ops])
                answers = [got] * len(ops) if isinstance(got, BaseException) else got
            for op, got in zip(ops, answers, strict=True):
                if _is_loss(got):
                    return None
                if isinstance(got, BaseException):
                    raise got
                step += op[0] == "step"
                if (digest := answer_digest(got)) != op[-1]:
                    what = op_name(op, step)
                    yield from self._differs(url, episode_id, new_id, recipe, what, digest, op[-1])
        return made

    def _differs(self, url: str, episode_id: str, new_id: str, recipe: Recipe, what: str,
                 got: tuple[Any, ...], want: tuple[Any, ...]) -> Generator[Request, CallOutcome, None]:
        yield url, _Wire.close(new_id)  # whatever it answers, the replay is over
        self.stats.lost += 1
        self._forget(episode_id)
        fields = ", ".join(name for name, a, b in zip(DIGEST_FIELDS, got, want, strict=True) if a != b)
        raise EpisodeLostError(episode_id, f"replayed on another server, {what} of {recipe.env_id} answered "
                               f"differently ({fields}; its world is not deterministic: see fork_divergence)")


def _is_loss(got: CallOutcome) -> bool:
    """Whether an outcome says the episode's holder, or the episode with it, is gone."""
    if isinstance(got, httpx.TransportError | ShuttingDownError):
        return True
    return isinstance(got, UnknownEpisodeError) and got.code == "unknown_episode"


def _loss_name(got: CallOutcome) -> str:
    """A loss (`_is_loss`) as an error names it."""
    if isinstance(got, ServerError):
        return got.code
    return type(got).__name__


def _retarget(call: Call[Any], episode_id: str, server_id: str) -> Call[Any]:
    """`call` naming the episode's id on its current holder instead of the caller's id."""
    if server_id == episode_id:
        return call
    body = call.body
    if body is not None and body.get("episode_id") == episode_id:
        body = {**body, "episode_id": server_id}
    return dataclasses.replace(call, path=call.path.replace(episode_id, server_id), body=body,
                               episode_id=server_id)
