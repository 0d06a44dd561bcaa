"""MCP-v0: a Gymnasium text env over any MCP server (`agentrl/MCP-v0`).

Importing this package loads no MCP SDK: the client imports it when the first server starts, so that
`import agentrl` and the episode server stay light.
"""

from agentrl.mcp.client import ServerFailure
from agentrl.mcp.tasks import FinalState, Task, TaskError, load_tasks

__all__ = ["FinalState", "ServerFailure", "Task", "TaskError", "load_tasks"]
