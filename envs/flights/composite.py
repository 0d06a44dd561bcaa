"""Tools of the coarse and fine Flights-v0 levels built from the default tools' own code.

`offers` fixes a level's tool table; `Composite` lets one agent call run several default tools
with one roll of the busy service and churn. The checks a level makes before it writes are the
default tools' own (`WorldQueries._check_payer`, `DeskTools._change_terms`, ...), so each
level refuses exactly what the default tools refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from agentrl.flights.env import FlightsEnv

E = TypeVar("E", bound=type[FlightsEnv])


def offers(*names: str) -> Callable[[E], E]:
    """Keep only these tools, in this order: a level's table is chosen, not just extended."""

    def keep(cls: E) -> E:
        cls.tools = {name: cls.tools[name] for name in names}
        return cls

    return keep


class Composite(FlightsEnv):
    """Tools made of the default tools' code: one service roll per call the agent makes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inside = False

    def _service(self) -> None:
        if not self._inside:
            super()._service()

    @contextmanager
    def _one_call(self) -> Iterator[None]:
        """Run the busy service and churn once, then the inner tools without them."""
        self._service()
        self._inside = True
        try:
            yield
        finally:
            self._inside = False
