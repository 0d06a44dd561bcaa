"""A server's tools as agentrl tools: OpenAI function schemas, arguments checked against each tool's
input schema before the call, and results written as the model reads them.

A server tool is a `Tool` whose `validate` checks the arguments with jsonschema (the tool's
`inputSchema`, compiled once per listing) and returns the call to make, so `ToolEnv`'s own step
loop runs server tools and the env's `finish` alike. Validation is linear in the size of the
arguments; a schema jsonschema cannot read makes each call say so instead of calling the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentrl.core import Tool, ToolError
from agentrl.core.base import clip_text
from agentrl.core.tools import NoArguments

MAX_PROBLEMS = 5  # schema violations named in one message
MAX_DESCRIPTION_CHARS = 2_000


@dataclass(frozen=True)
class ServerCall:
    """A call that passed its tool's schema: what `tools/call` sends."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ServerTool(Tool):
    """One tool of the server, as `tools/list` described it."""

    input_schema: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def listed(cls, described: dict[str, Any]) -> ServerTool:
        schema = described.get("inputSchema")
        description = described.get("description") or described.get("title") or ""
        return cls(
            name=described["name"],
            description=clip_text(str(description), MAX_DESCRIPTION_CHARS),
            arguments=NoArguments,
            method="_call_server",
            input_schema=schema if isinstance(schema, dict) else {"type": "object"},
        )

    def spec(self) -> dict[str, Any]:
        parameters = {k: v for k, v in self.input_schema.items() if k not in ("title", "$schema")}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    @cached_property
    def validator(self) -> Any:
        """The compiled schema, or the reason it cannot be compiled (a str)."""
        from jsonschema import SchemaError, validators

        try:
            kind = validators.validator_for(self.input_schema)
            kind.check_schema(self.input_schema)
            return kind(self.input_schema)
        except SchemaError as exc:
            return (
                f"the server's input schema for '{self.name}' is not valid JSON Schema: {exc.message[:200]}"
            )

    def validate(self, arguments: dict[str, Any]) -> ServerCall:  # type: ignore[override]  # a call, not a model
        validator = self.validator
        if isinstance(validator, str):
            raise ToolError(validator)
        problems = []
        for error in validator.iter_errors(arguments):
            where = ".".join(str(p)[:64] for p in error.absolute_path) or "arguments"
            problems.append(f"{where}: {error.message[:200]}")
            if len(problems) == MAX_PROBLEMS:
                break
        if problems:
            raise ToolError(f"invalid arguments for '{self.name}': " + "; ".join(problems))
        return ServerCall(self.name, arguments)
