"""The agent that runs inside every sandbox, and the one program the host sends into it.

The modules of this package are not imported by the server: they are program text for the
container (standard library only), read here and run there as `python3 -I -S -c PROGRAM`, where no
agentrl is installed. `PROGRAM` defines the helper modules in the order they import each other,
each under the name the others import it by (`agentrl_agent_lib`, `agentrl_agent_files`,
`agentrl_agent_wipe`, `agentrl_agent_commands`), then runs `main.py`, the agent itself.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
# (name in the sandbox, file): each may import those before it
HELPERS = (
    ("agentrl_agent_lib", "lib.py"),
    ("agentrl_agent_files", "files.py"),
    ("agentrl_agent_wipe", "wipe.py"),
    ("agentrl_agent_commands", "commands.py"),
)


def program() -> str:
    """The program the agent runs (`python3 -c`): its helper modules, then the agent itself."""
    source = "import sys, types\n"
    for module, file in HELPERS:
        text = (HERE / file).read_text()
        source += (
            f"_m = types.ModuleType({module!r})\n"
            f"sys.modules[{module!r}] = _m\n"
            f"exec(compile({text!r}, {('agent/' + file)!r}, 'exec'), _m.__dict__)\n"
        )
    return source + (HERE / "main.py").read_text()


PROGRAM = program()
