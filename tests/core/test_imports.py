"""The package's import rules (`[tool.importlinter]` in pyproject.toml), checked by `lint-imports`.

The rules: no import loop at any level (sibling modules and packages import each other one way),
the env core below each env below the server, the serving kit (`agentrl.serving`: what every
server runs on) importing no server and no env, nothing else of agentrl, the sandbox server and the
retrievers standalone but for that kit,
agent_train reaching the envs only through Gymnasium and the clients, the clients apart from the
server, the env contract (`agentrl.testing`) above the server and loaded by neither `import agentrl`
nor the command line, the server's page and OpenEnv's protocol mounted by its app alone, and the
in-container agent read only by the sandbox backends that start it. `lint-imports` reads a package
from its folder, so the test lays the package out as the wheel installs it (`package_layout.py`)
and checks that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from package_layout import PYPROJECT, lay_out
from support import unavailable


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("lint-imports")
    if not command.exists():
        unavailable("import-linter is not installed (the [dev] extra)")
    # the laid-out copy, not the editable install, is the `agentrl` the linter finds
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([str(command), str(PYPROJECT), "--no-cache"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_package_keeps_its_import_rules(tmp_path):
    done = lint_imports(lay_out(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "Analyzed" in done.stdout


@pytest.mark.parametrize(
    ("added", "broken"),
    [
        # a loop between two new modules
        ({"core/loop_a.py": "import agentrl.core.loop_b", "core/loop_b.py": "import agentrl.core.loop_a"},
         "No import loop"),
        # a loop made by a lazy import, as when the default Flights class chose the level's class
        ({"flights/env.py": "def level():\n    import agentrl.flights.granularity"}, "No import loop"),
        ({"core/spaces.py": "import agentrl.server.config"}, "Dependencies flow one way"),
        ({"flights/tasks.py": "import agentrl.search.env"}, "Dependencies flow one way"),
        ({"sandbox_server/api/limits.py": "import agentrl.core"}, "sandbox server and the retrievers"),
        ({"retrievers/base.py": "import agentrl.registration"}, "sandbox server and the retrievers"),
        # the sandbox server's Ray deployment is its own: it imports nothing of the env server
        ({"sandbox_server/cluster/ray_nodes.py": "import agentrl.server.config"},
         "sandbox server and the retrievers"),
        # the serving kit serves every server: it imports none of them, no env, nothing else of agentrl
        ({"serving/holders.py": "import agentrl.protocol"}, "The serving kit"),
        ({"serving/names.py": "import agentrl.sandbox_server.wire.errors"}, "The serving kit"),
        ({"serving/ray_actor.py": "import agentrl.server.config"}, "The serving kit"),
        ({"serving/runner.py": "def secret():\n    import agentrl.flights.task_ids"}, "The serving kit"),
        ({"serving/supervisor.py": "import agentrl.retrievers.base"}, "The serving kit"),
        ({"agent_train/grpo.py": "import agentrl.flights.tasks"}, "agent_train reaches the envs"),
        ({"client/steps.py": "import agentrl.server.config"}, "clients import nothing from the server"),
        ({"server/app.py": "import agentrl.testing"}, "Dependencies flow one way"),
        ({"registration.py": "def contract():\n    import agentrl.testing"}, "The env contract"),
        ({"cli.py": "import agentrl.testing.contract"}, "The env contract"),
        ({"server/episodes.py": "import agentrl.server.ui.render"}, "mounted by the app alone"),
        ({"server/step_socket.py": "import agentrl.server.openenv.session"}, "mounted by the app alone"),
        ({"sandbox_server/api/routes.py": "import agentrl.sandbox_server.agent"},
         "read only by the backends"),
    ],
)
def test_a_new_import_against_the_rules_fails(tmp_path, added, broken):
    where = lay_out(tmp_path) / "agentrl"
    for module, source in added.items():
        path = where / module
        path.write_text((path.read_text() if path.exists() else "") + f"\n{source}\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # the report lists each rule's name, then KEPT or BROKEN (a new import may break more than one)
    report = " ".join(done.stdout.split())
    verdict = report[report.index(broken):].replace("BROKEN", "KEPT").index("KEPT")
    assert report[report.index(broken) + verdict:].startswith("BROKEN"), done.stdout
