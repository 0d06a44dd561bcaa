"""`info["task_id"]` names a task without telling it: a keyed hash, stable under one key only."""

import hashlib
import os
import subprocess
import sys

import pytest
from flights_hack_policies import TaskIdInverter
from flights_hacks import play

from agentrl.core import cluster_secret
from agentrl.flights import task_ids
from agentrl.flights.tasks import FAMILIES, LEVELS

SEEDS = range(90_000, 90_012)


def ids(env, seeds=SEEDS, family="cheapest"):
    return [
        env.reset(seed=s, options={"family": family, "level": LEVELS[s % 3]})[1]["task_id"] for s in seeds
    ]


def test_ids_are_stable_within_a_process_and_name_tasks_apart(make_flights):
    first = ids(make_flights(split="test"))
    assert ids(make_flights(split="test")) == first  # another env of the same process: the same ids
    assert len(set(first)) == len(first) and all(len(i) == task_ids.ID_LENGTH for i in first)
    assert set(ids(make_flights(split="test"), family="seat")).isdisjoint(first)
    assert set(ids(make_flights(split="test", stochastic=True))).isdisjoint(first)


def test_ids_differ_across_keys_and_follow_the_operators_key(make_flights):
    default = ids(make_flights(split="test"))
    a = ids(make_flights(split="test", task_id_key="operator secret a"))
    b = ids(make_flights(split="test", task_id_key="operator secret b"))
    assert set(a).isdisjoint(b) and set(a).isdisjoint(default)
    assert ids(make_flights(split="test", task_id_key="operator secret a")) == a
    with pytest.raises(ValueError, match="must not be empty"):
        make_flights(task_id_key="")


def test_public_fields_do_not_give_the_id(make_flights):
    """Neither the former plain hash nor any enumeration without the key finds the id."""
    env = make_flights(split="test")
    shown = set(ids(env))
    guesses = set()
    for family in FAMILIES:
        for level in LEVELS:
            for seed in SEEDS:
                for fare_changes in (0, 1):
                    fields = f"test|{family}|{level}|{seed}|1|{fare_changes}"
                    guesses.add(hashlib.sha256(f"flights-v0|{fields}".encode()).hexdigest()[:20])
                    guesses.add(task_ids.keyed_id(b"", *fields.split("|")))
    assert not shown & guesses
    # with the key, the same enumeration finds every id: the guesses are the right fields
    keyed = ids(make_flights(split="test", task_id_key="k"))
    found = {task_ids.keyed_id(b"k", "test", "cheapest", LEVELS[s % 3], s, 1, 0) for s in SEEDS}
    assert set(keyed) == found


def task_id_in_a_process(key: str | None = None, secret: str | None = None) -> str:
    """The id a fresh process names a task with, given the task-id key and the cluster secret."""
    code = (
        "import gymnasium as gym, agentrl\n"
        "env = gym.make('agentrl/Flights-v0', split='test').unwrapped\n"
        "print(env.reset(seed=90000, options={'family': 'cheapest', 'level': 1})[1]['task_id'])\n"
    )
    given = {task_ids.KEY_VARIABLE: key, cluster_secret.VARIABLE: secret}
    environ = {k: v for k, v in os.environ.items() if k not in given}
    environ.update({variable: value for variable, value in given.items() if value is not None})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_environment_variable_sets_the_process_key():
    run = task_id_in_a_process
    assert run("shared") == run("shared") == task_ids.keyed_id(b"shared", "test", "cheapest", 1, 90000, 1, 0)
    assert run(None) != run(None)  # no key set: a fresh random key per process


def test_processes_of_one_cluster_name_a_task_alike():
    """The holders of one cluster share its secret (`AGENTRL_CLUSTER_SECRET`), not a task-id key:
    they name a task alike, with a key derived from the secret (not the secret itself); another
    cluster's secret names it anew, and an operator's task-id key wins over the secret."""
    run = task_id_in_a_process
    shared = run(secret="cluster one")
    assert run(secret="cluster one") == shared != run(secret="cluster two")
    assert shared != task_ids.keyed_id(b"cluster one", "test", "cheapest", 1, 90000, 1, 0)
    assert run(key="operator", secret="cluster one") == run(key="operator")


def test_a_client_cannot_choose_the_key():
    from support import AppServer

    from agentrl.client import EnvClient, InvalidRequestError
    from agentrl.server.app import create_app

    with (
        AppServer(create_app()) as server,
        EnvClient(server.url) as client,
        pytest.raises(InvalidRequestError, match="may not set task_id_key"),
    ):
        client.create_episode("agentrl/Flights-v0", seed=0, env_kwargs={"task_id_key": "mine"})


def test_the_inverter_wins_with_the_key_and_never_without(make_flights):
    """The hack that enumerates public fields: it solves the task when it can invert the id."""
    seeds = list(SEEDS)
    keyed = make_flights(split="test", task_id_key="leaked")
    with_key = [
        play(keyed, lambda e: TaskIdInverter(seeds, key=b"leaked"), s, {"family": "budget"})[0] for s in seeds
    ]
    assert sum(with_key) == len(seeds)
    env = make_flights(split="test")
    without = [play(env, lambda e: TaskIdInverter(seeds), s, {"family": "budget"})[0] for s in seeds]
    assert sum(without) == 0.0
