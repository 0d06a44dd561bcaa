"""Tools as typed methods: one pydantic model is both a tool's JSON schema and its validator."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, get_type_hints

from pydantic import AliasChoices, BaseModel, ValidationError

F = TypeVar("F", bound=Callable[..., Any])


class ToolError(Exception):
    """A tool refused the call (no seats left, unknown booking, service busy...).

    Raised inside a tool, it becomes an error result the model sees; it never ends the episode.
    """


class NoArguments(BaseModel):
    """Argument model of tools that take none."""


@dataclass(frozen=True)
class Tool:
    """A tool an agent can call: its name, what it is for, and the model of its arguments."""

    name: str
    description: str
    arguments: type[BaseModel]
    method: str
    takes_arguments: bool = True
    ends_episode: bool = False

    def spec(self) -> dict[str, Any]:
        """The OpenAI function-tool schema, as chat templates and tool-calling APIs expect it."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        schema.setdefault("properties", {})
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    @cached_property
    def accepted(self) -> frozenset[str] | None:
        """Every argument name the model reads (field names and their aliases); None: it takes any."""
        if self.arguments.model_config.get("extra") == "allow":
            return None
        names: set[str] = set()
        for name, info in self.arguments.model_fields.items():
            names.add(name)
            for alias in (info.alias, info.validation_alias):
                if isinstance(alias, str):
                    names.add(alias)
                elif isinstance(alias, AliasChoices):
                    names.update(c for c in alias.choices if isinstance(c, str))
        return frozenset(names)

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Parse arguments; raises `ToolError` with a message that names every wrong field.

        An argument the tool does not take is an error too: dropped in silence, the model would
        believe it had been applied (a filter, a passenger) when it had not."""
        problems = []
        accepted = self.accepted
        if accepted is not None and not accepted.issuperset(arguments):
            unknown = [key for key in arguments if key not in accepted]
            problems += [f"{key[:64]}: not an argument of '{self.name}'" for key in unknown]
        try:
            parsed = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                where = ".".join(str(p)[:64] for p in err["loc"]) or "arguments"
                problems.append(f"{where}: {err['msg']}")
        if problems:
            takes = ", ".join(sorted(self.accepted or ())) or "none"
            raise ToolError(
                f"invalid arguments for '{self.name}': " + "; ".join(problems) + f" (it takes: {takes})"
            )
        return parsed


def tool(description: str, *, ends_episode: bool = False) -> Callable[[F], F]:
    """Mark an env method as a tool.

    The method takes one argument annotated with a pydantic model (or none) and returns any
    JSON-serialisable value; the model becomes the tool's schema.
    """

    def mark(fn: F) -> F:
        params = list(inspect.signature(fn).parameters)[1:]
        if len(params) > 1:
            raise TypeError(f"tool {fn.__name__} must take at most one argument model")
        model: type[BaseModel] = NoArguments
        if params:
            model = get_type_hints(fn)[params[0]]
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise TypeError(f"tool {fn.__name__}'s argument must be a pydantic model")
        fn.__agentrl_tool__ = Tool(  # type: ignore[attr-defined]  # read back when the class is built
            name=fn.__name__,
            description=description,
            arguments=model,
            method=fn.__name__,
            takes_arguments=bool(params),
            ends_episode=ends_episode,
        )
        return fn

    return mark


def collect_tools(cls: type) -> dict[str, Tool]:
    """The tools a class defines or inherits, in definition order."""
    found: dict[str, Tool] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            spec = getattr(value, "__agentrl_tool__", None)
            if isinstance(spec, Tool):
                found[spec.name] = spec
    return found


_RESPONSE_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # json.dumps's, made once
_JSON_TEXT = json.encoder.encode_basestring  # the string writer of that encoder (C)
# what reads a `tool_response` back out of an observation: its JSON body, one group per response
TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


def tool_response(name: str, content: Any, *, error: bool = False) -> str:
    """One tool result as the model sees it, wrapped like Qwen/Hermes chat templates do.

    Text content (most tools answer text) is written by the encoder's own string writer, without
    building a dict for it: the same characters as `_RESPONSE_JSON.encode` gives, at a third of
    the cost, on every step of every episode."""
    key = "error" if error else "content"
    if type(content) is str and type(name) is str:
        body = '{"name": ' + _JSON_TEXT(name) + ', "' + key + '": ' + _JSON_TEXT(content) + "}"
    else:
        body = _RESPONSE_JSON.encode({"name": name, key: content})
    return "<tool_response>\n" + body + "\n</tool_response>"
