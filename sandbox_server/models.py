"""Typed shapes of the sandbox API: shared by the server, both clients and the in-process backends."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentrl.sandbox_server.languages import LANGUAGES

DEFAULT_IMAGE = "agentrl-sandbox:latest"
WORKDIR = "/workspace"

ExecStatus = Literal["ok", "error", "timeout", "oom", "killed"]
ExecMode = Literal["session", "oneshot"]
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def known_language(name: str) -> str:
    """Refuse an unknown language with the request (HTTP 422), naming the known ones."""
    if name.lower() not in LANGUAGES:
        raise ValueError(f"unsupported language {name!r}; supported: {', '.join(LANGUAGES)}")
    return name


class SandboxSpec(BaseModel):
    """Resources and lifetime of one sandbox; every field has a safe default."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(None, description="Docker image; default: the agentrl sandbox image")
    cpus: float = Field(1.0, ge=0.01, le=1024)
    memory_mb: int = Field(1024, ge=32, le=262144, description="RAM limit; no swap")
    pids: int = Field(256, ge=16, le=65536, description="most processes at once (fork bombs stop here)")
    disk_mb: int = Field(1024, ge=1, le=262144, description="size of the writable /workspace (tmpfs, in RAM)")
    ttl_s: float = Field(3600.0, gt=0, le=7 * 86400, description="hard lifetime")
    idle_ttl_s: float = Field(600.0, gt=0, le=7 * 86400, description="lifetime without a call")
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


class CreateSandboxRequest(SandboxSpec):
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


class ExecRequest(BaseModel):
    """Either `command` (bash) or `code` + `language`."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = Field(None, max_length=1 << 20)
    code: str | None = Field(None, max_length=16 << 20)
    language: str = "python"
    stdin: str | None = Field(None, max_length=64 << 20)
    timeout_s: float = Field(30.0, gt=0, le=86400)
    idle_timeout_s: float | None = Field(
        None, gt=0, le=86400, description="stop after this long without output"
    )
    mode: ExecMode = Field(
        "session", description="session: the sandbox's persistent shell; oneshot: a fresh one"
    )
    max_output_bytes: int = Field(65536, ge=2, le=64 << 20, description="head + tail kept per stream")
    keep_alive: bool = Field(
        False, description="processes the command leaves running survive it (default: all are killed)"
    )

    _language = field_validator("language")(known_language)

    @model_validator(mode="after")
    def _one_of(self) -> ExecRequest:
        if (self.command is None) == (self.code is None):
            raise ValueError("give exactly one of `command` or `code`")
        return self


class ExecResult(BaseModel):
    """What a command did. Output is head + tail when `truncated`; the byte counts are always whole."""

    status: ExecStatus
    exit_code: int | None = Field(description="128+N when ended by signal N; null on time-out")
    signal: int | None = Field(None, description="the signal that ended a one-shot command, if one did")
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    duration_ms: float
    session_reset: bool = Field(False, description="the persistent shell had to be restarted (state lost)")


class ErrorResponse(BaseModel):
    detail: str
    kind: str


# --- SandboxFusion's /run_code ----------------------------------------------------------------------


class RunCodeRequest(BaseModel):
    """SandboxFusion's request; unknown fields are ignored so newer clients keep working."""

    model_config = ConfigDict(extra="ignore")

    code: str = Field(max_length=16 << 20)
    language: str = "python"
    compile_timeout: float = Field(10, ge=0, le=86400)
    run_timeout: float = Field(10, ge=0, le=86400)
    memory_limit_MB: int = Field(-1, ge=-1, le=262144, description="-1 or under 32: the default")
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)
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
