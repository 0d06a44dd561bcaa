"""The failures schemathesis may report against the episode server that its schema cannot rule out.

Loaded by schemathesis itself (`SCHEMATHESIS_HOOKS`, see tests/openapi_conformance.py). Each rule
drops one named kind of failure and says why no schema could prevent it; everything else fails.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData

from agentrl.protocol import SEED_MAX, ErrorCode


def _error_code(response: Any) -> str | None:
    try:
        return response.json().get("error")
    except Exception:  # not a JSON object: no rule here applies
        return None


def env_refused_its_arguments(failure: Any, case: Any, response: Any) -> bool:
    """`env_kwargs` go to the env's constructor and `options` to its `reset`, both free-form JSON
    objects: which keys and values an env takes is its own (and differs by `env_id`), known when the
    env is built, so a schema-valid create or reset may be answered 400 `env_rejected` (declared)."""
    return isinstance(failure, RejectedPositiveData) and response.status_code == 400 \
        and _error_code(response) == ErrorCode.ENV_REJECTED


def seed_past_its_maximum(failure: Any, case: Any, response: Any) -> bool:
    """The schema bounds a seed by 2**63 - 1, which schemathesis reads or writes through a float near
    that bound: it sends 9223372036854775999 or 9223372036854776000 as a valid seed. The server's 422
    is right, the request was not schema-valid."""
    seed = case.body.get("seed") if isinstance(case.body, dict) else None
    return isinstance(failure, RejectedPositiveData) and isinstance(seed, int | float) \
        and not isinstance(seed, bool) and seed > SEED_MAX


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    return not (env_refused_its_arguments(failure, case, response)
                or seed_past_its_maximum(failure, case, response))
