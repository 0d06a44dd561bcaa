"""The contract's checks: each promise played on real envs, in-process and over loopback HTTP.

Every check plays the env by its `Play` once per seed (the reference episodes), then plays the same
actions again another way (a second env, the same env reset, a fork, a served env) and compares
every step whole: observation, reward, flags and info (as JSON, which is what a client sees). A
broken promise is reported with the first step that differs; all promises are checked, and one
`ContractBroken` names every one that broke.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from agentrl.core.trajectory import TRAJECTORY_FORMAT, transcript
from agentrl.testing.junk import junk_actions
from agentrl.testing.plays import PLAYS, Actions, Play, Routes

PROMISES: dict[str, str] = {
    "check_env": "Gymnasium's check_env passes without a warning",
    "same_seed": "the same seed gives the same observations, in a second env and in the same env reset",
    "fork": "a fork continues exactly as the original with the same actions",
    "http": "served by `agentrl serve` on loopback, the env answers exactly as in-process",
    "junk": "junk actions (bytes, huge strings, malformed tool calls) are observations, never exceptions",
    "record": "the trajectory record round-trips through JSON and rebuilds the transcript",
    "state_hash": "info['state_hash'] is equal for equal states and different for different states",
}
PLAYING = "its Play plays an episode"  # not a promise: what every check starts from
# (observation, reward, terminated, truncated, info as JSON); a reset is (observation, 0, False, False, info)
Step = tuple[str, float, bool, bool, Any]
PREVIEW = 160
GYMNASIUM = Path(gym.__file__).parent  # characters of a differing value shown in a report


class ContractBroken(AssertionError):
    """An env broke one or more of the contract's promises; `broken` maps each to what went wrong."""

    def __init__(self, env_id: str, broken: dict[str, str]) -> None:
        self.env_id, self.broken = env_id, broken
        lines = [f"- {name} ({PROMISES.get(name, PLAYING)}): {detail}" for name, detail in broken.items()]
        super().__init__(f"{env_id} broke {len(broken)} of the env contract's promises:\n" + "\n".join(lines))


class ContractUnavailable(RuntimeError):
    """The env cannot be built here (no Docker engine, no data): its play's `requires` says why."""


class Broken(Exception):
    """One promise broken, with what showed it."""


@dataclass
class PlayedEpisode:
    """One played episode: the actions taken and every step seen (the reset first)."""

    seed: int
    actions: list[Any]
    steps: list[Step]
    record: dict[str, Any]
    messages: list[dict[str, Any]]


@dataclass
class Report:
    """What a passed contract played: the reference episodes, and the seconds each promise took."""

    env_id: str
    episodes: list[PlayedEpisode]
    seconds: dict[str, float] = field(default_factory=dict)


def as_json(value: Any) -> Any:
    """`value` as a client over HTTP gets it (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, default=str))


def step_view(observation: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> Step:
    return (observation, float(reward), bool(terminated), bool(truncated), as_json(info))


def preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= PREVIEW else text[:PREVIEW] + f"... ({len(text)} characters)"


def difference(expected: Step, got: Step) -> str:
    """What differs between two steps, field by field (for an info, key by key)."""
    names = ("observation", "reward", "terminated", "truncated", "info")
    for name, want, have in zip(names, expected, got, strict=True):
        if want == have:
            continue
        if isinstance(want, dict) and isinstance(have, dict):
            keys = sorted(k for k in want.keys() | have.keys() if want.get(k, ...) != have.get(k, ...))
            return "; ".join(f"info[{k!r}] was {preview(want.get(k, '(absent)'))}, "
                             f"now {preview(have.get(k, '(absent)'))}" for k in keys[:3])
        return f"{name} was {preview(want)}, now {preview(have)}"
    return "equal"


def compare(expected: Sequence[Step], got: Sequence[Step], how: str, first: int = 0) -> None:
    """Raise `Broken` at the first step of `got` that differs from `expected` (step numbers from `first`)."""
    for index, (want, have) in enumerate(zip(expected, got, strict=False), start=first):
        if want != have:
            where = "the reset" if index == 0 else f"step {index}"
            raise Broken(f"{how}: {where} differs: {difference(want, have)}")
    if len(expected) != len(got):
        raise Broken(f"{how}: {len(got) - 1} steps, not {len(expected) - 1}")


def play(env: Any, seed: int, actions: Actions | Sequence[Any], max_steps: int) -> PlayedEpisode:
    """Reset with `seed`, then take the actions (at most `max_steps`) until the episode ends; they
    may be junk (not text) when a check means them to be."""
    observation, info = env.reset(seed=seed)
    steps, taken = [step_view(observation, 0.0, False, False, info)], []
    source = actions(env) if callable(actions) else actions
    for action in itertools.islice(source, max_steps):  # a generator reads the env after each step
        taken.append(action)
        result = env.step(action)
        steps.append(step_view(*result))
        if result[2] or result[3]:
            break
    messages = env.messages if hasattr(env, "messages") else []
    return PlayedEpisode(seed, taken, steps, env.trajectory(), messages)


def take(env: Any, actions: Sequence[Any]) -> list[Step]:
    return [step_view(*env.step(action)) for action in actions]


class Contract:
    """The contract of one env id: builds its envs (and closes every one at the end)."""

    def __init__(self, env_id: str, play: Play, env_kwargs: Mapping[str, Any]) -> None:
        self.env_id, self.play = env_id, play
        self.env_kwargs = dict(env_kwargs)
        self.envs = contextlib.ExitStack()
        self.reference: list[PlayedEpisode] = []
        self.first_env: Any = None  # the env that played the reference episodes

    def make(self) -> Any:
        env = gym.make(self.env_id, **self.env_kwargs).unwrapped
        self.envs.callback(env.close)
        return env

    def play_references(self) -> None:
        env = self.make()
        for seed in self.play.seeds:
            episode = play(env, seed, self.play.actions, self.play.max_steps)
            if not episode.actions:
                raise Broken(f"its Play took no action from reset(seed={seed}): nothing to check")
            self.reference.append(episode)
        self.first_env = env

    # --- the promises ------------------------------------------------------------------------
    def check_env(self) -> None:
        env = self.make()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        # Gymnasium's own warnings: a library's (an unclosed socket collected meanwhile) are not the env's
        gymnasium_warnings = [w for w in caught if Path(w.filename).is_relative_to(GYMNASIUM)]
        if gymnasium_warnings:
            raise Broken("check_env warned: " + " | ".join(str(w.message) for w in gymnasium_warnings))

    def same_seed(self) -> None:
        second = self.make()
        for episode in reversed(self.reference):  # another order: nothing may carry over from one episode
            again = play(second, episode.seed, episode.actions, len(episode.actions))
            compare(episode.steps, again.steps, f"a second env, seed {episode.seed}")
            if again.record != episode.record:
                raise Broken(f"a second env, seed {episode.seed}: the trajectory record differs")
        for episode in self.reference:
            again = play(self.first_env, episode.seed, episode.actions, len(episode.actions))
            compare(episode.steps, again.steps, f"the same env reset again, seed {episode.seed}")

    def fork(self) -> None:
        episode = self.reference[0]
        ended = episode.steps[-1][2] or episode.steps[-1][3]
        last = len(episode.actions) - 1 if ended else len(episode.actions)
        for at in sorted({0, last // 2, last}):
            env = self.make()
            prefix = play(env, episode.seed, episode.actions[:at], at)
            compare(episode.steps[: at + 1], prefix.steps, f"replaying {at} steps before the fork")
            forks = env.fork(2)
            for child in forks:
                self.envs.callback(child.close)
            for index, action in enumerate(episode.actions[at:], start=at + 1):
                for name, one in [("the original", env), ("fork 1", forks[0]), ("fork 2", forks[1])]:
                    # in turn, step by step: a fork that shared state with another would drift
                    compare([episode.steps[index]], take(one, [action]), f"{name} forked at step {at}", index)
            for name, child in [("fork 1", forks[0]), ("fork 2", forks[1])]:
                if child.trajectory()["steps"] != episode.record["steps"]:
                    raise Broken(f"{name} forked at step {at}: its record's steps differ from the original's")
            if len(env.trajectory()["forks"]) != 2:
                raise Broken(f"forked at step {at}: the original's record lists "
                             f"{len(env.trajectory()['forks'])} forks, not 2")

    def http(self) -> None:
        from agentrl.client import RemoteEnv
        from agentrl.server.config import ServerConfig
        from agentrl.server.local import serve_in_thread

        config = ServerConfig(env_ids=(self.env_id,), env_kwargs={self.env_id: self.env_kwargs},
                              max_episodes=16)
        with serve_in_thread(config) as url, contextlib.ExitStack() as remotes:
            remote = RemoteEnv(self.env_id, base_url=url)
            remotes.callback(remote.close)
            for episode in self.reference:
                again = play(remote, episode.seed, episode.actions, len(episode.actions))
                compare(episode.steps, again.steps, f"over HTTP, seed {episode.seed}")
                if again.record != episode.record:
                    raise Broken(f"over HTTP, seed {episode.seed}: the trajectory record differs from "
                                 "the in-process one")
            episode = self.reference[0]
            at = len(episode.actions) // 2  # before the last action: the episode is still under way
            play(remote, episode.seed, episode.actions[:at], at)
            (child,) = remote.fork(1)
            remotes.callback(child.close)
            for index, action in enumerate(episode.actions[at:], start=at + 1):
                for name, one in [("the original", remote), ("its fork", child)]:
                    how = f"over HTTP, {name} at step {at}"
                    compare([episode.steps[index]], take(one, [action]), how, index)

    def junk(self) -> None:
        env = self.make()
        env.reset(seed=self.play.seeds[0])
        problems = []
        for name, action, explained in junk_actions(env):
            try:
                observation, reward, terminated, truncated, info = env.step(action)
            except Exception as exc:
                problems.append(f"{name} raised {type(exc).__name__}: {str(exc)[:PREVIEW]}")
                env.reset(seed=self.play.seeds[0])
                continue
            if problem := junk_problem(observation, reward, info, explained):
                problems.append(f"{name}: {problem}")
            if terminated or truncated:
                env.reset(seed=self.play.seeds[0])
        if problems:
            raise Broken("; ".join(problems))

    def record(self) -> None:
        env = self.make()
        episode = self.reference[0]
        junk = play(env, episode.seed, [b"\xff\xfe", "lone \ud800 surrogate", None, *episode.actions[:1]], 4)
        for what, one in [("the reference episode", episode), ("an episode of junk", junk)]:
            try:
                text = json.dumps(one.record, ensure_ascii=False, allow_nan=False)
                text.encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise Broken(f"{what}: the record is not JSON: {type(exc).__name__}: {exc}") from exc
            loaded = json.loads(text)
            if loaded != one.record:
                raise Broken(f"{what}: the record read back from JSON differs from the record")
            if loaded.get("format") != TRAJECTORY_FORMAT or loaded.get("env_id") != self.env_id:
                raise Broken(f"{what}: the record's format or env_id is {loaded.get('format')!r}, "
                             f"{loaded.get('env_id')!r}")
            if loaded.get("seed") != one.seed or len(loaded["steps"]) != len(one.actions):
                raise Broken(f"{what}: the record has seed {loaded.get('seed')} and {len(loaded['steps'])} "
                             f"steps, not seed {one.seed} and {len(one.actions)} steps")
            if transcript(loaded) != one.messages:
                raise Broken(f"{what}: the transcript rebuilt from the record differs from env.messages")

    def state_hash(self) -> None:
        hashes: dict[str, str] = {}  # first observation -> its state hash
        for episode in self.reference:
            for index, step in enumerate(episode.steps):
                value = step[4].get("state_hash") if isinstance(step[4], dict) else None
                if not isinstance(value, str) or not value:
                    raise Broken(f"seed {episode.seed}, step {index}: info has no state_hash")
            hashes.setdefault(episode.steps[0][0], episode.steps[0][4]["state_hash"])
        if len(set(hashes.values())) != len(hashes):
            raise Broken("two resets with different first observations have one state_hash")
        for routes, equal in [(self.play.same_state, True), (self.play.other_state, False)]:
            if routes is None:
                continue
            first, second = (self.route_hash(route) for route in self.routes(routes))
            if (first == second) != equal:
                raise Broken(f"two routes to {'one state' if equal else 'different states'} end with "
                             f"{'different' if equal else 'equal'} state hashes ({first}, {second})")

    def routes(self, routes: Routes) -> tuple[Sequence[str], Sequence[str]]:
        if not callable(routes):
            return routes
        env = self.make()
        env.reset(seed=self.play.seeds[0])
        return routes(env)

    def route_hash(self, route: Sequence[str]) -> str:
        env = self.make()
        info = env.reset(seed=self.play.seeds[0])[1]
        for index, action in enumerate(route, start=1):
            _, _, terminated, truncated, info = env.step(action)
            if (terminated or truncated) and index < len(route):
                raise Broken(f"a state_hash route ended its episode at step {index} of {len(route)}")
        return info["state_hash"]


def junk_problem(observation: Any, reward: Any, info: Any, explained: bool) -> str | None:
    """What is wrong with the answer to a junk action, if anything."""
    if not isinstance(observation, str) or not observation:
        return f"the observation is {preview(observation)}, not text"
    try:
        observation.encode("utf-8")
        json.dumps(info, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return f"the answer does not encode as UTF-8 JSON: {exc}"
    if not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return f"the reward is {reward!r}"
    if explained and reward > 0:
        return f"it earned reward {reward}"
    if explained and not any(word in observation.lower() for word in EXPLAINING_WORDS):
        return f"the observation does not say what was wrong: {preview(observation)}"
    return None


# an observation that explains a malformed action says one of these (case aside)
EXPLAINING_WORDS = ("invalid", "error", "not ", "no ", "unknown", "exceed", "expected", "malformed", "cannot",
                    "empty", "never")


def check_contract(
    env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, promises: Sequence[str] | None = None
) -> Report:
    """Check that `env_id` keeps the contract's promises (all, or those named), playing it by its
    registered `Play` with `env_kwargs` on top of the play's own. Raises `ContractBroken` naming every
    promise broken, or `ContractUnavailable` when the env cannot be built here."""
    if env_id not in PLAYS:
        raise KeyError(f"{env_id} has no Play: register one (agentrl.testing.register); "
                       f"known: {', '.join(sorted(PLAYS))}")
    play_ = PLAYS[env_id]
    kwargs = {**play_.env_kwargs, **(env_kwargs or {})}
    if play_.requires is not None and (reason := play_.requires(kwargs)) is not None:
        raise ContractUnavailable(f"{env_id}: {reason}")
    names = list(promises or PROMISES)
    if unknown := sorted(set(names) - set(PROMISES)):
        raise ValueError(f"unknown promises {unknown}; the contract's: {', '.join(PROMISES)}")
    contract = Contract(env_id, play_, kwargs)
    broken: dict[str, str] = {}
    seconds: dict[str, float] = {}
    with contract.envs:
        with timed(seconds, "play"):
            try:
                contract.play_references()  # an env that cannot even play raises here, loudly
            except Broken as exc:
                raise ContractBroken(env_id, {"play": str(exc)}) from exc
        for name in names:
            with timed(seconds, name), broken_into(broken, name):
                getattr(contract, name)()
    if broken:
        raise ContractBroken(env_id, broken)
    return Report(env_id, contract.reference, seconds)


@contextlib.contextmanager
def timed(seconds: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = time.perf_counter() - start


@contextlib.contextmanager
def broken_into(broken: dict[str, str], name: str) -> Iterator[None]:
    """Record a promise as broken instead of stopping: the report names every broken promise. An
    exception a check did not expect is a broken promise too, reported with where it was raised."""
    try:
        yield
    except Broken as exc:
        broken[name] = str(exc)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        broken[name] = f"raised {type(exc).__name__}: {str(exc)[:400]} (at {where.filename}:{where.lineno})"
