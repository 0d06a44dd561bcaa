"""MCP-v0's time tasks over the real `mcp-server-time`: convert a clock time between two time zones.

The server converts a time of today's date, so only zones without daylight saving time are used: the
expected answer, computed here from each zone's fixed UTC offset, holds on every day the task runs.
The splits use disjoint zones, and no task converts between zones of one offset (where the answer
would be the prompt's own time). The oracle (`solve`) asks the server and reads its answer.

    python -m agentrl.mcp.time_tasks --out tasks.jsonl [--count 6 --seed 0]
"""

from __future__ import annotations

import json
import random
from typing import Any

from agentrl.mcp.families import CallTool, prompt_values, write_cli

SERVER = ["mcp-server-time", "--local-timezone", "UTC"]
FAMILY = "convert"
# zone -> its UTC offset in minutes, all year round
ZONES = {
    "train": {"Asia/Tokyo": 540, "Asia/Kolkata": 330, "Africa/Nairobi": 180, "America/Bogota": -300,
              "Asia/Dubai": 240, "Pacific/Honolulu": -600, "Asia/Jakarta": 420, "Australia/Brisbane": 600,
              "Asia/Karachi": 300, "Africa/Lagos": 60},
    "test": {"Asia/Kathmandu": 345, "Asia/Shanghai": 480, "Asia/Yangon": 390, "Asia/Kabul": 270,
             "America/Lima": -300, "Asia/Dhaka": 360, "Africa/Johannesburg": 120, "America/Phoenix": -420,
             "Australia/Darwin": 570, "Asia/Riyadh": 180},
}
PROMPT = ("When it is `{}` in the time zone `{}`, what time is it in `{}`? Answer with the time there as "
          "HH:MM (24-hour clock).")


def make_task(split: str, seed: int, index: int) -> dict[str, Any]:
    rng = random.Random(f"time-task:{split}:{seed}:{index}")
    zones = ZONES[split]
    while True:
        source, target = rng.sample(sorted(zones), 2)
        if zones[source] != zones[target]:
            break
    minutes = rng.randrange(24 * 60)
    there = (minutes - zones[source] + zones[target]) % (24 * 60)
    return {
        "id": f"time-{FAMILY}-{split}-{index:04d}",
        "family": FAMILY,
        "split": split,
        "prompt": PROMPT.format(f"{minutes // 60:02d}:{minutes % 60:02d}", source, target),
        "checks": {"answer": f"{there // 60:02d}:{there % 60:02d}"},
    }


def make_tasks(count: int = 6, seed: int = 0) -> list[dict[str, Any]]:
    """`count` tasks per split."""
    return [make_task(split, seed, i) for split in ("train", "test") for i in range(count)]


def solve(task: dict[str, Any], call: CallTool) -> str:
    """Ask the server for the conversion; its target time, as HH:MM."""
    time, source, target = prompt_values(task["prompt"])
    arguments = {"source_timezone": source, "time": time, "target_timezone": target}
    result = json.loads(call("convert_time", arguments))
    return result["target"]["datetime"][11:16]


def main(argv: list[str] | None = None) -> None:
    write_cli(argv, "agentrl.mcp.time_tasks", make_tasks, 6)


if __name__ == "__main__":
    main()
