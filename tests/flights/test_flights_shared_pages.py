"""Live episodes of one world share its database pages (`pages.py`), and nothing else changes.

Memory is read from SQLite's own heap counter and from the kernel's page counts of each episode's
mapping (/proc/self/smaps), not from wall time or RSS: a copy of the image per episode (~380 KB)
fails both bounds. Equality is against episodes whose database is a plain copy of the image.
"""

from __future__ import annotations

import ctypes
import gc
import sqlite3
from pathlib import Path

import gymnasium as gym
import pytest
from support import unavailable
from test_flights_fork import oracle_run

from agentrl.flights import pages
from agentrl.flights.generation import generate_world
from agentrl.flights.templates import WORLDS, build_template, fingerprint, new_engine

EPISODES = 24
MEMFD = "/memfd:agentrl-flights-world"


@pytest.fixture(autouse=True)
def sharing() -> None:
    if not pages.SHARING:
        unavailable("copy-on-write world pages (Linux memfd, CPython's sqlite3 handle)")


def sqlite_heap() -> int:
    used = pages._SQLITE.sqlite3_memory_used
    used.restype = ctypes.c_int64
    return int(used())


def world_mappings() -> dict[str, int]:
    """KiB the process's mappings of world pages hold privately (copied on write), by address."""
    private, current = {}, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            current = fields[0] if MEMFD in line else None
            if current:
                private[current] = 0
        elif current and fields[0] == "Private_Dirty:":
            private[current] = int(fields[1])
    return private


def test_live_episodes_of_one_world_share_its_pages(make_flights):
    before_maps, heap = world_mappings(), sqlite_heap()
    envs = [make_flights() for _ in range(EPISODES)]
    for env in envs:
        oracle_run(env, 12, "cheapest")  # a whole episode: a booking made, pages written
    per_episode_heap = (sqlite_heap() - heap) / EPISODES
    size = WORLDS.get(*envs[0].world.key).pages.size
    assert size > 300_000  # what a copy per episode would add
    # SQLite's own heap: the schema and a page cache (and the image, were it copied)
    assert per_episode_heap < 0.75 * size, per_episode_heap  # ~235 KB; a copy: ~670 KB
    mine = {a: kib for a, kib in world_mappings().items() if a not in before_maps}
    assert len(mine) == EPISODES
    # what the kernel copied for each episode: the pages its booking wrote (28 KiB typically; one
    # episode of 24 once copied 44 KiB in CI), against ~430 KiB for a copy of the image
    copied = sorted(mine.values())
    assert copied[EPISODES // 2] * 1024 < size / 10, mine
    assert copied[-1] * 1024 < size / 4, mine
    assert all(env._raw.mapped for env in envs)


def test_shared_episodes_see_what_a_copy_sees(make_flights, monkeypatch):
    """Observations, rewards, state hashes and final databases equal those of episodes whose
    database is a plain copy, in a static and in a moving world; and a world's episodes do not see
    each other's writes."""
    runs = {}
    for mode in ("shared", "copied"):
        if mode == "copied":
            copy = lambda self, conn: conn.deserialize(self.image())  # noqa: E731
            monkeypatch.setattr(pages.WorldPages, "load_into", copy)
        for stochastic in (False, True):
            env = make_flights(stochastic=stochastic)
            for seed, family in ((3, "cheapest"), (5, "budget"), (3, "change_earlier")):
                _actions, results = oracle_run(env, seed, family)
                assert env._raw.mapped == (mode == "shared")
                runs[mode, stochastic, seed, family] = (
                    [(r[0], r[1], r[2], r[3], r[4]["state_hash"]) for r in results], env.fingerprint())
    for (mode, *key), run in runs.items():
        if mode == "shared":
            assert run == runs[("copied", *key)], key
    assert runs["shared", False, 3, "cheapest"][1] != runs["shared", False, 3, "change_earlier"][1]


def test_a_fresh_episode_is_the_world_as_built_whatever_its_siblings_wrote(make_flights):
    first, second = make_flights(), make_flights()
    oracle_run(first, 12, "cheapest")  # books: writes to its own copies of the pages
    second.reset(seed=12, options={"family": "cheapest"})
    assert first.world.key == second.world.key == ("train", 12, 1, 0)
    template = build_template(generate_world("train", 12, 1))  # built anew, shared with nothing
    engine = new_engine()
    engine.raw_connection().driver_connection.deserialize(template.serialize())
    with engine.connect() as conn:
        built = fingerprint(conn)
    assert second.fingerprint() == built != first.fingerprint()


def test_an_episode_that_fills_its_room_moves_to_a_copy(make_flights, monkeypatch):
    monkeypatch.setattr(pages, "SPARE", 64 * 4096)
    env = make_flights()
    env.reset(seed=3, options={"family": "cheapest"})
    raw = env._raw
    size = env.world.pages.size
    assert raw.mapped and raw.size() == size
    insert, filler = "INSERT INTO agentrl_changes (tbl, op, old) VALUES ('x', 'insert', ?)", "x" * 3000
    for _ in range(50):  # about 150 KB of rows: past half of the 256 KiB room
        raw.execute(insert, (filler,))
    raw.commit()
    before = env.fingerprint()
    raw.keep_room()
    assert not raw.mapped and env.fingerprint() == before
    for _ in range(200):  # far past the mapping's end: a copy grows
        raw.execute(insert, (filler,))
    raw.commit()
    assert raw.size() > 64 * 4096 + size


def test_a_mapping_full_of_rows_fails_loudly(monkeypatch):
    """Without `keep_room` a mapping cannot grow past its room: SQLite says the database is full
    (which `keep_room` keeps an episode from reaching), it never writes past the mapping."""
    monkeypatch.setattr(pages, "SPARE", 8 * 4096)
    conn = sqlite3.connect(":memory:", factory=pages.EpisodeConnection)
    WORLDS.get("train", 3, 1).pages.load_into(conn)
    insert = "INSERT INTO agentrl_changes (tbl, op, old) VALUES ('x', 'insert', ?)"
    with pytest.raises(sqlite3.OperationalError, match="full"):
        for _ in range(40):
            conn.execute(insert, ("x" * 3000,))
            conn.commit()  # into the database itself, past the page cache
    conn.close()


def test_mappings_end_with_their_episodes():
    gc.collect()
    before = len(world_mappings())
    envs = [gym.make("agentrl/Flights-v0").unwrapped for _ in range(4)]
    for env in envs:
        env.reset(seed=3)
    assert len(world_mappings()) == before + 4
    envs[0].reset(seed=4)  # another world: the first world's mapping goes
    assert len(world_mappings()) == before + 4
    envs[0].close()
    assert len(world_mappings()) == before + 3
    del env, envs[1:]  # collected unclosed: the connection closes, then unmaps
    gc.collect()
    assert len(world_mappings()) == before
