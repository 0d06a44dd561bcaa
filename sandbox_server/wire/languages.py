"""The languages `run_code` and `/run_code` know: a script suffix, an optional compile step, a run step.

`{script}` becomes the script's path and `{binary}` a per-call path for a compiled program; both run
from the working directory. C++ and Node.js come from the sandbox image's Debian packages.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.sandbox_server.wire.errors import InvalidRequest


@dataclass(frozen=True)
class Language:
    suffix: str
    run: str
    compile: str | None = None


PYTHON = Language(".py", "python3 {script}")
BASH = Language(".sh", "bash {script}")
CPP = Language(".cpp", "{binary}", "g++ -std=c++17 -O2 -pipe -o {binary} {script}")
NODE = Language(".js", "node {script}")
LANGUAGES: dict[str, Language] = {
    "python": PYTHON,
    "python3": PYTHON,
    "bash": BASH,
    "sh": Language(".sh", "sh {script}"),
    "cpp": CPP,
    "c++": CPP,
    "nodejs": NODE,
    "javascript": NODE,
    "js": NODE,
}


def language(name: str) -> Language:
    try:
        return LANGUAGES[name.lower()]
    except KeyError:
        raise InvalidRequest(f"unsupported language {name!r}; supported: {', '.join(LANGUAGES)}") from None


def script_command(name: str, binary: str = "/tmp/.agentrl-program") -> tuple[str, str]:
    """(suffix, one command that compiles if needed, then runs) for `Sandbox.run_code`."""
    lang = language(name)
    run = lang.run.replace("{binary}", binary)
    if lang.compile is None:
        return lang.suffix, run
    return lang.suffix, lang.compile.replace("{binary}", binary) + " && " + run
