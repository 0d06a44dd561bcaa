"""The env contract: the promises every agentrl env keeps, checked on any registered env id.

`check_contract(env_id)` plays the env by its `Play` (its oracle where it has one, else a few
scripted actions) and checks that it keeps the suite's promises: Gymnasium's own `check_env`; the
same seed gives the same observations; a fork continues exactly as the original; the env served
over HTTP answers as it does in-process; junk actions are observations, never exceptions; the
trajectory record round-trips through JSON; `info["state_hash"]` is equal for equal states and
different for different ones. A new env gets all of it from one line:

    register("me/Toy-v0", Play(actions=[...]), env=ToyEnv)

This package is for tests: `import agentrl` never imports it (it pulls in the server and httpx).
"""

from agentrl.testing.contract import PROMISES, ContractBroken, ContractUnavailable, Report, check_contract
from agentrl.testing.plays import PLAYS, Play, register

__all__ = ["PLAYS", "PROMISES", "ContractBroken", "ContractUnavailable", "Play", "Report", "check_contract",
           "register"]
