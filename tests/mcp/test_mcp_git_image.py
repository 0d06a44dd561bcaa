"""The sandbox image's MCP servers in a real sandbox (Docker, with the sandbox server's own container
settings): they run as the sandbox user from the workspace, on a read-only root with no network, the
image's SDK drives them, a git task's setup script makes there the very commits whose hashes the tasks
expect, and MCP-v0 in its default sandbox isolation plays git tasks to their reward."""

from __future__ import annotations

import json

import pytest
from real_servers import play
from support import unavailable

from agentrl.mcp import git_repos
from agentrl.mcp import git_tasks as gt

pytestmark = pytest.mark.docker

# played inside the sandbox by the image's own python3 and SDK
CLIENT = """
import json
import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def session(argv, name, arguments):
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        result = await client.call_tool(name, arguments)
        return {"tools": tools, "text": result.content[0].text, "error": result.is_error}

async def main():
    git = await session(["mcp-server-git", "--repository", "/workspace/repo"], "git_log",
                        {"repo_path": "/workspace/repo", "max_count": 100})
    conversion = {"source_timezone": "Asia/Kathmandu", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    time = await session(["mcp-server-time", "--local-timezone", "UTC"], "convert_time", conversion)
    print(json.dumps({"git": git, "time": time}))

anyio.run(main)
"""


@pytest.fixture(scope="module")
def sandbox():
    from agentrl.sandbox_server import DockerBackend, DockerUnavailable

    try:
        backend = DockerBackend(pool_size=0)
    except DockerUnavailable as exc:
        unavailable(str(exc).splitlines()[0])
    box = backend.create()
    yield box
    box.close()
    backend.close()


def test_the_servers_run_as_the_sandbox_user_and_the_setup_makes_the_expected_commits(sandbox):
    repo = git_repos.build(git_repos.draw_repo("test", "image", pending=2))
    setup = sandbox.exec(git_repos.setup_script(repo), mode="oneshot", timeout_s=60)
    assert (setup.status, setup.exit_code) == ("ok", 0), setup.stderr
    who = sandbox.exec("id -u; touch /usr/local/bin/x 2>&1 || true", mode="oneshot", timeout_s=30)
    assert who.stdout.splitlines()[0] == "1000" and "Read-only file system" in who.stdout

    played = sandbox.exec("python3 -", stdin=CLIENT, mode="oneshot", timeout_s=120)
    assert (played.status, played.exit_code) == ("ok", 0), played.stderr[-2000:]
    seen = json.loads(played.stdout)
    assert "git_log" in seen["git"]["tools"] and "git_commit" in seen["git"]["tools"]
    assert not seen["git"]["error"]
    # the log lists main's commits newest first, each with the hash the generator computed
    logged = [line.split()[1] for line in seen["git"]["text"].splitlines() if line.startswith("Commit: ")]
    assert logged == [c.hash for c in reversed(repo.main)]
    assert seen["time"]["tools"] == ["convert_time", "get_current_time"] and not seen["time"]["error"]
    assert json.loads(seen["time"]["text"])["target"]["datetime"][11:16] == "15:15"


def test_the_oracle_solves_git_tasks_in_sandbox_isolation(sandbox):  # `sandbox`: Docker is there
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)

    tasks = [gt.make_task("blame", "test", 0, 0), gt.make_task("branch_commit", "test", 0, 1)]
    env = gym.make("agentrl/MCP-v0", server=gt.SERVER, tasks=tasks, split="test", pool_size=0,
                   max_turns=40).unwrapped
    try:
        for task in tasks:
            reward, info, seen = play(env, task["id"], gt.solve)
            assert reward == 1.0, info["checks"]
            assert "`/workspace/repo`" in seen
        # the chore, left undone in a fresh sandbox, earns nothing
        assert play(env, tasks[1]["id"], lambda task, call_tool: "")[0] == 0.0
    finally:
        env.close()
