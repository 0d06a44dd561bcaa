"""MCP-v0's time tasks over the real mcp-server-time: the oracle solves the held-out ones through the
env, their zones keep one offset all year (so an answer does not depend on the day it is checked),
and answering with the prompt's own time pays nothing."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from real_servers import make_env, play

from agentrl.mcp import time_tasks
from agentrl.mcp.families import prompt_values
from agentrl.mcp.tasks import judge, load_tasks


def test_every_zone_keeps_its_offset_all_year_and_the_splits_share_none():
    assert not set(time_tasks.ZONES["train"]) & set(time_tasks.ZONES["test"])
    for zones in time_tasks.ZONES.values():
        for zone, minutes in zones.items():
            for month in (1, 4, 7, 10):
                offset = datetime(2026, month, 15, 12, tzinfo=ZoneInfo(zone)).utcoffset()
                assert offset is not None and offset.total_seconds() == minutes * 60, zone


def test_the_oracle_solves_the_held_out_tasks_and_echoing_the_time_pays_nothing():
    tasks = time_tasks.make_tasks(4, seed=1)
    assert tasks == time_tasks.make_tasks(4, seed=1) and len({t["prompt"] for t in tasks}) == len(tasks)
    for task in load_tasks(tasks):
        assert not judge(task, prompt_values(task.prompt)[0], [], final=lambda: None).solved
    env = make_env(time_tasks.SERVER, tasks)
    try:
        rewards = [play(env, t["id"], time_tasks.solve)[0] for t in tasks if t["split"] == "test"]
    finally:
        env.close()
    assert rewards == [1.0] * 4
