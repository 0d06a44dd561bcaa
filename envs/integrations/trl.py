"""agentrl envs for TRL's `GRPOTrainer(environment_factory=...)`.

TRL drives an env object through `reset(**row)`, one public method per tool (it renders their
schemas into the chat template from type hints and Google docstrings, parses the model's tool calls
and masks the results) and `get_reward()`. `environment_factory` builds such a class from the env's
`info["tools"]`: each tool becomes a real method whose signature and docstring come from its JSON
schema, and a call becomes one `<tool_call>` action on the agentrl env.

    trainer = GRPOTrainer(model, args=config, train_dataset=dataset(range(64)),
                          environment_factory=environment_factory("agentrl/Flights-v0",
                                                                  base_url="http://127.0.0.1:8000"))

TRL pools env instances and never closes them, so `get_reward` (called once per finished rollout)
also deletes the server-side episode; the next `reset` opens a new one.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Union

import httpx

from agentrl.client import ServerError
from agentrl.core import EpisodeOverError
from agentrl.integrations.episode import EnvSource, RowEpisode, task_text, tool_result

_RESERVED = {"reset", "get_reward"}
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "object": dict, "null": type(None)}


class AgentrlToolEnv:
    """Base of the generated classes; every public method of a subclass is a tool for TRL.

    Only `reset` and `get_reward` are public here: TRL takes any other public method for a tool.
    """

    _source: EnvSource

    def __init__(self) -> None:
        self._episode = RowEpisode(self._source)
        self._failure: BaseException | None = None

    def reset(self, **row: Any) -> str:
        """Start the row's episode (`seed`, `split`, `options`); the task text joins the user prompt."""
        self._episode.release()  # a rollout abandoned before get_reward
        self._failure = None
        return task_text(self._episode.start(row))

    def get_reward(self) -> float:
        """The env's reward for this rollout; also ends the server-side episode."""
        try:
            if self._failure is not None:
                raise RuntimeError(f"a tool call failed outside the env: {self._failure}") from self._failure
            return self._episode.reward
        finally:
            self._episode.release()

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        action = "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) \
            + "</tool_call>"
        try:
            result = self._episode.step(action)
        except EpisodeOverError:
            raise
        except (ServerError, httpx.HTTPError, OSError) as exc:
            # TRL turns a tool's exception into a message for the model; get_reward re-raises it
            self._failure = exc
            raise
        return tool_result(result.observation)


def _annotation(schema: Mapping[str, Any]) -> Any:
    """The Python type TRL (transformers' get_json_schema) turns back into this JSON schema."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            members = [_annotation(s) for s in schema[key]]
            return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
    kind = schema.get("type")
    if isinstance(kind, list):
        members = [_annotation({**schema, "type": k}) for k in kind]
        return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(items)] if isinstance(items, Mapping) else list
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _describe(name: str, schema: Mapping[str, Any]) -> str:
    text = " ".join(str(schema.get("description") or schema.get("title") or name.replace("_", " ")).split())
    if "enum" in schema:
        text += " (choices: " + json.dumps(schema["enum"]) + ")"
    return text


def _identifier(name: str, what: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or name in _RESERVED:
        raise ValueError(f"{what} {name!r} cannot be a Python method argument or TRL tool name")
    return name


def tool_method(spec: Mapping[str, Any]) -> Callable[..., str]:
    """A method for one OpenAI function spec: keyword arguments as in its schema, a Google docstring.

    Optional arguments default to None and are left out of the call, so the env's defaults apply.
    """
    function = spec["function"]
    name = _identifier(function["name"], "tool")
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    # required arguments first: a Python signature cannot put a defaulted argument before one without
    for arg, schema in sorted(properties.items(), key=lambda item: item[0] not in required):
        annotation = _annotation(schema)
        if arg not in required:
            annotation = annotation | None if annotation is not Any else Any
        annotations[_identifier(arg, f"argument of {name}")] = annotation
        default = inspect.Parameter.empty if arg in required else None
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
        lines.append(f"    {arg}: {_describe(arg, schema)}")

    def method(self: AgentrlToolEnv, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None or k in required}
        return self._call(name, given)

    description = " ".join(str(function.get("description") or name).split())
    method.__name__ = method.__qualname__ = name
    method.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + \
        "\n\nReturns:\n    The tool's result as JSON, or an error the env explains."
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]  # inspect reads it
    method.__annotations__ = {**annotations, "return": str}
    return method


def tool_env_class(source: EnvSource, tools: Iterable[Mapping[str, Any]]) -> type[AgentrlToolEnv]:
    """A subclass of `AgentrlToolEnv` with one method per tool spec."""
    methods = {}
    for spec in tools:
        method = tool_method(spec)
        if method.__name__ in methods:
            raise ValueError(f"two tools are named {method.__name__!r}")
        methods[method.__name__] = method
    class_name = "".join(c for c in source.env_id.rsplit("/", 1)[-1] if c.isalnum()) or "Agentrl"
    return type(class_name, (AgentrlToolEnv,), {"_source": source, **methods,
                                                 "__doc__": f"{source.env_id} as a TRL environment."})


def environment_factory(env_id: str, *, base_url: str | None = None, token: str | None = None,
                        env_kwargs: Mapping[str, Any] | None = None) -> Callable[[], AgentrlToolEnv]:
    """The factory to pass as `GRPOTrainer(environment_factory=...)` for `env_id`.

    In-process when `base_url` is None, else the env served by `agentrl serve` at `base_url`. The
    tools come from one reset's `info["tools"]`, exactly what the model would be shown.
    """
    source = EnvSource(env_id, base_url, token, dict(env_kwargs or {}))
    probe = RowEpisode(source)
    try:
        probe.start({})
        tools = probe.info.get("tools")
    finally:
        probe.close()
    if not tools:
        raise ValueError(f"{env_id} lists no tools in info['tools']; TRL's environments act through tools")
    return tool_env_class(source, tools)


def dataset_rows(seeds: Iterable[int], *, split: str = "train",
                 options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows for `datasets.Dataset.from_list`: an empty user prompt (the env's task text fills it at
    reset) and the episode's `seed`, `split` and reset `options`."""
    extra = {"options": dict(options)} if options else {}  # Arrow cannot store an empty struct
    return [{"prompt": [{"role": "user", "content": ""}], "seed": int(seed), "split": split, **extra}
            for seed in seeds]
