"""The tools of Bash-v0 and Code-v0, written once.

Each tool is a mixin holding one `@tool` method, so an env picks its tool set by inheritance
(Bash-v0: bash, read, write, finish; Code-v0: python, bash, write, finish) without copies.
Everything here goes through `self.sandbox` (see `sandbox.Sandbox`).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from agentrl.code_envs import repl
from agentrl.code_envs.sandbox import SandboxCrashed
from agentrl.core import ToolError, tool
from agentrl.sandbox_server import SandboxError
from agentrl.sandbox_server.wire.models import WORKDIR

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox


class BashArgs(BaseModel):
    command: str = Field(description="A bash command line, run in the workspace directory.")


class ReadFileArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace (/workspace/... also works).")


class WriteFileArgs(BaseModel):
    path: str = Field(description="File path, relative to the workspace (/workspace/... also works).")
    content: str = Field(description="The whole new content of the file.")


class PythonArgs(BaseModel):
    code: str = Field(description="Python code; variables and imports persist between calls.")


class FinishArgs(BaseModel):
    answer: str = Field(default="", description="Your final answer, when the task asks for one.")


def clip_bytes(text: str, limit: int) -> tuple[str, bool]:
    """Head and tail of `text` within `limit` bytes, with the byte count of what was cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    half = limit // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half :].decode("utf-8", "ignore")
    return f"{head}\n...[{len(data) - 2 * half} of {len(data)} bytes truncated]...\n{tail}", True


def render_exec(out: ExecResult, limit: int, timeout_s: float) -> str:
    """An exec result as the agent sees it: status line, then stdout and stderr, each clipped."""
    stdout, cut_out = clip_bytes(out.stdout, limit)
    stderr, cut_err = clip_bytes(out.stderr, limit)
    if out.status == "timeout":
        head = f"[timed out after {timeout_s:g}s; output so far below]"
    elif out.status == "oom":
        head = "[killed: out of memory]"
    elif out.status == "killed":
        head = "[killed]"
    else:
        head = f"[exit code {out.exit_code}]"
    lines = [head]
    if out.truncated or cut_out or cut_err:
        lines.append(
            f"[output truncated: stdout {out.stdout_bytes} bytes, stderr {out.stderr_bytes} bytes in total]"
        )
    if stdout:
        lines.append(stdout.rstrip("\n"))
    if stderr:
        lines.append("[stderr]\n" + stderr.rstrip("\n"))
    return "\n".join(lines)


class _UsesSandbox:
    sandbox: Sandbox
    max_output_bytes: int
    command_timeout_s: float

    def _guard(self, exc: Exception, what: str) -> Exception:
        """A sandbox error on one call is the agent's problem (a ToolError) if the sandbox still
        answers, and the end of the episode (SandboxCrashed) if it does not."""
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
            return ToolError(f"{what}: {exc}")
        try:
            alive = self.sandbox.exec("true", timeout_s=10, mode="oneshot").status == "ok"
        except Exception:
            alive = False
        if alive:
            return ToolError(f"{what}: {exc}")
        return SandboxCrashed(f"{type(exc).__name__}: {exc}")

    def _path(self, path: str) -> str:
        # The sandbox takes paths relative to its workspace only; the prompt names the workspace, so
        # a model that writes /workspace/x means x. Any other absolute path is the sandbox's refusal.
        if not path.strip():
            raise ToolError("path is empty")
        path = posixpath.normpath(path)
        if path == WORKDIR or path.startswith(WORKDIR + "/"):
            return posixpath.relpath(path, WORKDIR)
        return path


class ExecuteBashTool(_UsesSandbox):
    @tool("Run a bash command in the workspace; the shell keeps its cwd and variables between calls.")
    def execute_bash(self, args: BashArgs) -> str:
        try:
            out = self.sandbox.exec(
                args.command, timeout_s=self.command_timeout_s, max_output_bytes=self.max_output_bytes
            )
        except (SandboxError, OSError) as exc:
            raise self._guard(exc, "command failed") from None
        return render_exec(out, self.max_output_bytes, self.command_timeout_s)


class ReadFileTool(_UsesSandbox):
    @tool("Read a text file.")
    def read_file(self, args: ReadFileArgs) -> str:
        try:
            data = self.sandbox.read_file(self._path(args.path))
        except FileNotFoundError:
            raise ToolError(f"no such file: {args.path}") from None
        except (SandboxError, OSError) as exc:
            raise self._guard(exc, f"cannot read {args.path}") from None
        text, _ = clip_bytes(data.decode("utf-8", "replace"), self.max_output_bytes)
        return text


class WriteFileTool(_UsesSandbox):
    @tool("Create or overwrite a file with the given content (parent directories are created).")
    def write_file(self, args: WriteFileArgs) -> str:
        data = args.content.encode()
        try:
            self.sandbox.write_file(self._path(args.path), data)
        except (SandboxError, OSError) as exc:
            raise self._guard(exc, f"cannot write {args.path}") from None
        return f"wrote {len(data)} bytes to {args.path}"


class RunPythonTool(_UsesSandbox):
    _repl_sandbox: object = None
    _repl_history: list[str]

    @tool(
        "Run Python code in a persistent interpreter (like a notebook cell); prints and the value "
        "of a final expression are shown."
    )
    def run_python(self, args: PythonArgs) -> str:
        if self._repl_sandbox is not self.sandbox:  # a new episode: a new interpreter
            self._repl_sandbox, self._repl_history = self.sandbox, []
        try:
            out = repl.run_cell(
                self.sandbox,
                args.code,
                self._repl_history,
                timeout_s=self.command_timeout_s,
                max_output_bytes=self.max_output_bytes,
            )
        except (SandboxError, OSError) as exc:
            raise self._guard(exc, "the interpreter failed") from None
        if out.status not in ("ok", "error"):  # timed out or killed: the cell may still be running
            repl.stop(self.sandbox)
            return render_exec(out, self.max_output_bytes, self.command_timeout_s) + (
                "\n[the cell was interrupted; variables from earlier cells are kept]"
            )
        if out.status == "ok":
            self._repl_history.append(args.code)
        return render_exec(out, self.max_output_bytes, self.command_timeout_s)


class FinishTool:
    answer: str | None

    @tool("End the episode; give the final answer if the task asks for one.", ends_episode=True)
    def finish(self, args: FinishArgs) -> str:
        self.answer = args.answer
        return "episode finished; grading"
