"""Typed shapes of the sandbox API: shared by the server, both clients and the in-process backends."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from agentrl.sandbox_server.wire.errors import InvalidRequest
from agentrl.sandbox_server.wire.languages import LANGUAGES
from agentrl.serving.openapi import WholeNumber

DEFAULT_IMAGE = "agentrl-sandbox:latest"
WORKDIR = "/workspace"

ExecStatus = Literal["ok", "error", "timeout", "oom", "killed"]
ExecMode = Literal["session", "oneshot"]
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Request models are strict (a lax float takes "1.5", a lax bool "yes"), their integers `WholeNumber`s,
# and the JSON Schema patterns below say what the validators check: the OpenAPI document is the truth.

# a file path as `paths.check_path` takes it: relative, no NUL, no `..` component (its byte lengths are
# checked there: JSON Schema counts characters)
_PART = r"(?:[^/\u0000.][^/\u0000]*|\.|\.[^/\u0000.][^/\u0000]*|\.\.[^/\u0000]+)"
PATH_PATTERN = rf"^{_PART}(?:/{_PART}?)*$"
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def decode_base64(text: str) -> bytes:
    """Standard base64 with its canonical padding, exactly what `BASE64_PATTERN` admits; ValueError,
    with the reason, otherwise. Checked by decoding, in one pass at C speed and no memory beyond the
    bytes: the pattern itself, run by Python's `re`, holds state for every group it repeats (hundreds
    of MB for a 15 MB text). Python's strict decoder alone also takes surplus padding ("AAAA=",
    "AAAA===="), which the length and the end rule out."""
    if not isinstance(text, str):
        raise ValueError("not valid base64: not a string")
    if len(text) % 4 or text.endswith("==="):
        raise ValueError("not valid base64: its length is not a multiple of 4 with at most 2 '='")
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: a character beyond ASCII
        reason = str(exc)
    # raised outside the handler: raised in it, the error would hold this frame (and the text) in a
    # reference cycle, kept until the garbage collector ran, many MB per refused request
    raise ValueError(f"not valid base64: {reason}")


# a known language's name in any letter case, as `known_language` takes it
LANGUAGE_PATTERN = "^(?:" + "|".join(
    "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in name) for name in LANGUAGES
) + ")$"
# the pattern only in the schema: `known_language` refuses with a message that names the known ones
Language = Annotated[
    str, Field(description=f"one of {', '.join(LANGUAGES)}", json_schema_extra={"pattern": LANGUAGE_PATTERN})
]


def known_language(name: str) -> str:
    """Refuse an unknown language with the request (HTTP 422), naming the known ones."""
    if name.lower() not in LANGUAGES:
        raise ValueError(f"unsupported language {name!r}; supported: {', '.join(LANGUAGES)}")
    return name


def _env_schema(schema: dict[str, Any]) -> None:
    """`env`'s names and values as `SandboxSpec._env` checks them (but the 1 MiB in all)."""
    schema["properties"]["env"].update(
        maxProperties=1024,
        propertyNames={"pattern": f"^{ENV_NAME.pattern}$", "maxLength": 256},
        additionalProperties={"type": "string", "pattern": "^[^\\u0000]*$"},
    )


class SandboxSpec(BaseModel):
    """Resources and lifetime of one sandbox; every field has a safe default."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_env_schema)

    image: str | None = Field(default=None, description="Docker image; default: the agentrl sandbox image")
    cpus: float = Field(default=1.0, ge=0.01, le=1024)
    memory_mb: Annotated[int, Strict(), Field(ge=32, le=262144), WholeNumber] = Field(
        default=1024, description="RAM limit; no swap"
    )
    pids: Annotated[int, Strict(), Field(ge=16, le=65536), WholeNumber] = Field(
        default=256, description="most processes at once (fork bombs stop here)"
    )
    disk_mb: Annotated[int, Strict(), Field(ge=1, le=262144), WholeNumber] = Field(
        default=1024, description="size of the writable /workspace (tmpfs, in RAM)"
    )
    ttl_s: float = Field(default=3600.0, gt=0, le=7 * 86400, description="hard lifetime")
    idle_ttl_s: float = Field(default=600.0, gt=0, le=7 * 86400, description="lifetime without a call")
    env: dict[str, str] = Field(default_factory=dict, description="environment of every command")

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        """Refused here, not at the first command: a name a shell cannot export, or a NUL in a value."""
        if len(env) > 1024 or sum(len(k) + len(v) for k, v in env.items()) > 1 << 20:
            raise ValueError("env: at most 1024 variables and 1 MiB in all")
        for key, value in env.items():
            if not ENV_NAME.fullmatch(key) or len(key) > 256:
                raise ValueError(f"env: {key[:64]!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if "\0" in value:
                raise ValueError(f"env: the value of {key} contains a NUL character")
        return env


def _create_schema(schema: dict[str, Any]) -> None:
    _env_schema(schema)
    schema["properties"]["files"].update(
        propertyNames={"pattern": PATH_PATTERN},
        additionalProperties={"type": "string", "pattern": BASE64_PATTERN},
    )


class CreateSandboxRequest(SandboxSpec):
    model_config = ConfigDict(json_schema_extra=_create_schema)

    files: dict[str, str] = Field(
        default_factory=dict, description="initial files: path (relative to /workspace) -> base64 content"
    )


class SandboxInfo(BaseModel):
    sandbox_id: str
    image: str
    cpus: float
    memory_mb: int
    pids: int
    disk_mb: int
    created_at: float = Field(description="unix time")
    expires_at: float = Field(description="unix time of the hard TTL")
    last_used_at: float = Field(description="unix time of the last call; idle TTL counts from here")
    idle_ttl_s: float


MAX_STDIN = 64 << 20


def _stdin_b64_schema(schema: dict[str, Any]) -> None:
    """In JSON, `stdin` is text (bytes travel as base64 in `stdin_b64`), never both."""
    schema["properties"]["stdin"] = {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": schema["properties"]["stdin"]["description"],
    }
    schema["properties"]["stdin_b64"] = {
        "anyOf": [{"type": "string", "pattern": BASE64_PATTERN}, {"type": "null"}],
        "description": "stdin as base64 (bytes); not with `stdin`",
    }
    schema["not"] = {"required": ["stdin", "stdin_b64"],
                     "properties": {"stdin": {"type": "string"}, "stdin_b64": {"type": "string"}}}


class ExecOptions(BaseModel):
    """How one command runs: the one declaration of every exec option.

    The same object travels from the caller (`Sandbox.exec`, `run_code`, either HTTP client) as the
    flat fields of the HTTP body, through the server, to the in-sandbox agent, which reads exactly
    these fields. `stdin` is text or bytes: in JSON, text travels as `stdin` and bytes as base64 in
    `stdin_b64`, so every byte sequence reaches the command as it was given, in-process or not.
    """

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_stdin_b64_schema)

    timeout_s: float = Field(
        default=30.0, gt=0, le=86400, description="the command is killed after this long"
    )
    idle_timeout_s: float | None = Field(
        default=None, gt=0, le=86400, description="stop after this long without output"
    )
    stdin: str | bytes | None = Field(
        default=None,
        description="the command's standard input (JSON: text as `stdin`, bytes as base64 `stdin_b64`)",
    )
    mode: ExecMode = Field(
        default="session", description="session: the sandbox's persistent shell; oneshot: a fresh one"
    )
    max_output_bytes: Annotated[int, Strict(), Field(ge=2, le=64 << 20), WholeNumber] = Field(
        default=65536, description="head + tail kept per stream"
    )
    keep_alive: bool = Field(
        default=False, description="processes the command leaves running survive it (default: all are killed)"
    )

    @model_validator(mode="before")
    @classmethod
    def _from_b64(cls, data: Any) -> Any:
        """`stdin_b64` (the JSON form of bytes) becomes `stdin` as bytes."""
        if not isinstance(data, dict) or data.get("stdin_b64") is None:
            if isinstance(data, dict) and "stdin_b64" in data:
                data = {k: v for k, v in data.items() if k != "stdin_b64"}
            return data
        if data.get("stdin") is not None:
            raise ValueError("give `stdin` (text) or `stdin_b64` (bytes as base64), not both")
        try:
            stdin = decode_base64(data["stdin_b64"])
        except ValueError as exc:
            reason = str(exc)
        else:
            return {**{k: v for k, v in data.items() if k != "stdin_b64"}, "stdin": stdin}
        raise ValueError(f"stdin_b64 is {reason}")  # outside the handler, as in `decode_base64`

    @field_validator("stdin")
    @classmethod
    def _stdin_size(cls, stdin: str | bytes | None) -> str | bytes | None:
        if stdin is not None and len(stdin) > MAX_STDIN:
            raise ValueError(f"stdin: at most {MAX_STDIN} characters or bytes")
        return stdin

    @field_serializer("stdin")
    def _stdin_b64(self, stdin: str | bytes | None) -> str | None:
        return base64.b64encode(stdin).decode() if isinstance(stdin, bytes) else stdin

    @model_serializer(mode="wrap")
    def _to_b64(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Bytes of stdin go out as `stdin_b64` (base64), text as `stdin`."""
        data = handler(self)
        if isinstance(self.stdin, bytes) and "stdin" in data:
            data["stdin_b64"] = data.pop("stdin")
        return data


class ExecArgs(TypedDict, total=False):
    """`ExecOptions` as keyword arguments (`sb.exec("ls", timeout_s=5)`), so editors and type checkers
    know them; the defaults and limits are `ExecOptions`'s (a test keeps the two in step)."""

    timeout_s: float
    idle_timeout_s: float | None
    stdin: str | bytes | None
    mode: ExecMode
    max_output_bytes: int
    keep_alive: bool


DEFAULT_EXEC = ExecOptions()


def exec_options(options: ExecOptions | None, changes: ExecArgs) -> ExecOptions:
    """`options` (default: `ExecOptions()`) with `changes` applied; a bad value is an `InvalidRequest`."""
    return changed(options or DEFAULT_EXEC, dict(changes))


Options = TypeVar("Options", bound=BaseModel)


def changed(options: Options, changes: dict[str, Any]) -> Options:
    """`options` with `changes` applied, checked; a bad value is an `InvalidRequest`."""
    if not changes:
        return options
    try:
        return type(options)(**{**dict(options), **changes})
    except ValidationError as exc:
        raise InvalidRequest(str(exc)) from None


class SpecArgs(TypedDict, total=False):
    """`SandboxSpec` (but its image) as keyword arguments of `create`; None keeps the default."""

    cpus: float | None
    memory_mb: int | None
    pids: int | None
    disk_mb: int | None
    ttl_s: float | None
    idle_ttl_s: float | None
    env: dict[str, str] | None


def spec_changes(image: str | None, changes: SpecArgs) -> dict[str, Any]:
    """The arguments of a `create` that were given (not None): what overrides the defaults."""
    return {k: v for k, v in {"image": image, **changes}.items() if v is not None}


def _exec_schema(schema: dict[str, Any]) -> None:
    _stdin_b64_schema(schema)
    # exactly one of them a string (`_one_of`)
    schema["oneOf"] = [
        {"required": [name], "properties": {name: {"type": "string"}}} for name in ("command", "code")
    ]


class ExecRequest(ExecOptions):
    """The body of POST .../exec: either `command` (bash) or `code` + `language`, and `ExecOptions`."""

    model_config = ConfigDict(json_schema_extra=_exec_schema)

    command: str | None = Field(default=None, max_length=1 << 20)
    code: str | None = Field(default=None, max_length=16 << 20)
    language: Language = "python"

    _language = field_validator("language")(known_language)

    @model_validator(mode="after")
    def _one_of(self) -> ExecRequest:
        if (self.command is None) == (self.code is None):
            raise ValueError("give exactly one of `command` or `code`")
        return self

    def options(self) -> ExecOptions:
        """The request's exec options, as the sandbox takes them (no copy of stdin)."""
        return ExecOptions.model_construct(**{name: getattr(self, name) for name in ExecOptions.model_fields})


class ExecResult(BaseModel):
    """What a command did. Output is head + tail when `truncated`; the byte counts are always whole."""

    status: ExecStatus
    exit_code: int | None = Field(description="128+N when ended by signal N; null on time-out")
    signal: int | None = Field(
        default=None, description="the signal that ended a one-shot command, if one did"
    )
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    duration_ms: float
    session_reset: bool = Field(
        default=False, description="the persistent shell had to be restarted (state lost)"
    )


MAX_RELAY_DATA = 16 << 20
RelayStatus = Literal["ok", "refused", "timeout", "reset"]
RelayEnd = Literal["close", "line"]


class RelayOptions(BaseModel):
    """How one relay runs (`Sandbox.relay`): the one declaration of its bounds, as `ExecOptions` is
    an exec's."""

    model_config = ConfigDict(extra="forbid", strict=True)

    timeout_s: float = Field(
        default=30.0, gt=0, le=86400, description="the whole exchange, connect to the answer's end"
    )
    max_output_bytes: Annotated[int, Strict(), Field(ge=1, le=64 << 20), WholeNumber] = Field(
        default=65536, description="the most of the answer kept; past it the connection is closed"
    )
    reply_ends: RelayEnd = Field(
        default="close",
        description="close: the answer is all the port sends until it closes the connection; line: the "
        "answer ends at its first newline and the agent keeps the connection open for the next relay "
        "to the port (a server answering line after line on one connection), so it costs no new connection",
    )


DEFAULT_RELAY = RelayOptions()


class RelayArgs(TypedDict, total=False):
    """`RelayOptions` as keyword arguments (`sb.relay(port, text, timeout_s=5)`), as `ExecArgs`."""

    timeout_s: float
    max_output_bytes: int
    reply_ends: RelayEnd


def relay_options(options: RelayOptions | None, changes: RelayArgs) -> RelayOptions:
    """`options` (default: `RelayOptions()`) with `changes` applied; a bad value is an `InvalidRequest`."""
    return changed(options or DEFAULT_RELAY, dict(changes))


class RelayRequest(RelayOptions):
    """The body of POST .../relay: text for a port on the sandbox's own loopback, and `RelayOptions`."""

    port: Annotated[int, Strict(), Field(ge=1, le=65535), WholeNumber] = Field(
        description="a TCP port on 127.0.0.1 inside the sandbox"
    )
    data: str = Field(max_length=MAX_RELAY_DATA, description="sent as UTF-8 once connected")

    def options(self) -> RelayOptions:
        return RelayOptions.model_construct(
            timeout_s=self.timeout_s, max_output_bytes=self.max_output_bytes, reply_ends=self.reply_ends
        )


class RelayResult(BaseModel):
    """What a port answered: its bytes (as UTF-8 text, as an exec's output) until it closed the
    connection, or why there is no whole answer."""

    status: RelayStatus = Field(
        description="ok: the port answered and closed the connection (with `reply_ends` line: or sent a "
        "newline; or `max_output_bytes` arrived: "
        "`truncated`); refused: no connection could be made (nothing listens on the port); timeout: "
        "no end within `timeout_s`; reset: the connection broke once made"
    )
    data: str = Field(description="what arrived (on a timeout or a reset, what arrived before it)")
    truncated: bool = Field(description="more than `max_output_bytes` came; the rest was not read")
    duration_ms: float


class ErrorResponse(BaseModel):
    detail: str
    kind: str


# --- SandboxFusion's /run_code ----------------------------------------------------------------------


class RunCodeRequest(BaseModel):
    """SandboxFusion's request; unknown fields are ignored so newer clients keep working."""

    model_config = ConfigDict(extra="ignore", strict=True)

    code: str = Field(max_length=16 << 20)
    language: Language = "python"
    compile_timeout: float = Field(default=10, ge=0, le=86400)
    run_timeout: float = Field(default=10, ge=0, le=86400)
    memory_limit_MB: Annotated[int, Strict(), Field(ge=-1, le=262144), WholeNumber] = Field(
        default=-1, description="-1 or under 32: the default"
    )
    stdin: str | None = None
    files: dict[str, str | None] = Field(
        default_factory=dict, description="path -> base64 content (else the answer is a SandboxError)"
    )
    fetch_files: list[str] = Field(default_factory=list)

    _language = field_validator("language")(known_language)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
