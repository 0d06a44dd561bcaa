"""What MCP-v0's task families over real servers share (agentrl.mcp.git_tasks, agentrl.mcp.time_tasks):
the oracles' view of a server, how they read a prompt, and the command line that writes a task file.

An oracle plays a task as an agent would, from the prompt and the server's answers alone: a family's
prompt puts each value the task is about in backquotes, in the template's order (`prompt_values`).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

CallTool = Callable[[str, dict[str, Any]], str]  # a tool call on the episode's server -> its text result


def prompt_values(prompt: str) -> list[str]:
    """The backquoted values of a prompt's first paragraph (an env's observation may go on with more)."""
    return re.findall(r"`([^`]*)`", prompt.split("\n\n")[0])


def write_cli(argv: list[str] | None, module: str, make: Callable[[int, int], list[dict[str, Any]]],
              default_count: int) -> None:
    """`python -m <module> --out FILE [--count N --seed S]`: write `make(count, seed)` as a task file."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description="Write an MCP-v0 task file.")
    parser.add_argument("--out", required=True, type=Path, help="the JSONL file to write")
    parser.add_argument("--count", type=int, default=default_count, help="tasks per split")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tasks = make(args.count, args.seed)
    args.out.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    print(f"wrote {len(tasks)} tasks to {args.out}")
