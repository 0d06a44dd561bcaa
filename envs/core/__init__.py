"""The env core every agentrl environment is built from.

Text spaces, tool specs, tool-call parsing and step results live here once, so that each env,
the server and the clients agree on one shape of each.
"""

from agentrl.core.base import EpisodeOverError, TextEnv, ToolEnv
from agentrl.core.parsing import ParsedCall, ParseFailure, parse_tool_calls, tool_call
from agentrl.core.results import StepResult
from agentrl.core.spaces import TextSpace
from agentrl.core.tools import Tool, ToolError, tool, tool_response

__all__ = [
    "EpisodeOverError",
    "ParseFailure",
    "ParsedCall",
    "StepResult",
    "TextEnv",
    "TextSpace",
    "Tool",
    "ToolEnv",
    "ToolError",
    "parse_tool_calls",
    "tool",
    "tool_call",
    "tool_response",
]
