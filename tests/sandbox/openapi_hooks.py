"""The failures schemathesis may report against the sandbox server that its schema cannot rule out.

Loaded by schemathesis itself (`SCHEMATHESIS_HOOKS`, see tests/openapi_conformance.py). Each rule
drops one named kind of failure and says why no schema could prevent it; everything else fails.
What the schema can say, it says (models.py: strict types, the patterns of a path, a variable
name, base64 and a language, exactly one of `command` and `code`).
"""

from __future__ import annotations

import re
from typing import Any

import schemathesis
from schemathesis.core.failures import ServerError
from schemathesis.openapi.checks import EnsureResourceAvailability, RejectedPositiveData


def _error(response: Any) -> tuple[str, str]:
    try:
        body = response.json()
        return str(body.get("kind", "")), str(body.get("detail", ""))
    except Exception:  # not a JSON object: no rule here applies
        return "", ""


# OSError subclasses the sandbox's agent reports as they happened, wrapped in `invalid`
_FILE_SYSTEM = re.compile(
    r"\b(PermissionError|IsADirectoryError|NotADirectoryError|FileExistsError)\b"
    r"|is not a regular file|symbolic link"
)


def the_file_system_said_no(response: Any) -> bool:
    """A schema-valid path the sandbox's files make unusable now: a directory (`.` too) read as a
    file, a file under a file, one written earlier without the mode to read or write it again
    (stateful runs chain these). The schema describes a path, not the state of a file system."""
    kind, detail = _error(response)
    return response.status_code == 400 and kind == "invalid" and bool(_FILE_SYSTEM.search(detail))


def a_path_too_long_in_bytes(response: Any) -> bool:
    """Paths are bounded in UTF-8 bytes (the kernel's limits: 1024 in all, 255 a name, 64 levels),
    JSON Schema's `maxLength` counts characters, and no pattern bounds the depth."""
    kind, detail = _error(response)
    return (
        response.status_code == 400
        and kind == "invalid"
        and detail.startswith(("path too long", "a path component is over"))
    )


def an_upload_that_is_no_tar(response: Any, case: Any) -> bool:
    """`archive=true` unpacks the upload, which must then be a tar archive whose members stay in the
    workspace; the schema says only "bytes"."""
    kind, detail = _error(response)
    unpacked = (case.query or {}).get("archive") in (True, "true")
    return (
        response.status_code == 400
        and kind == "invalid"
        and unpacked
        and detail.startswith(("not a tar archive", "tar member"))
    )


def past_the_hosts_limits(response: Any) -> bool:
    """Limits the server's operator or its Docker engine sets, the same schema for every server:
    `--max-output-mb` and `--max-json-mb` (413), the CPUs of the engine's host (Docker refuses
    `cpus` above them)."""
    kind, detail = _error(response)
    return (response.status_code == 413 and kind == "too_large") or (
        response.status_code == 400 and detail.startswith("Docker refused the sandbox")
    )


def full(response: Any) -> bool:
    """The server holds its `--max-sandboxes` (503 `capacity`, declared): a stateful run creates
    sandboxes faster than their TTLs end them."""
    return response.status_code == 503 and _error(response)[0] == "capacity"


def gone_by_its_own_ttl(response: Any) -> bool:
    """A sandbox created with a TTL shorter than the time to the next call (`idle_ttl_s` of 5e-324 s
    is in the schema) is reaped before that call: a stateful run's GET after the create finds it
    expired, by its own request's terms."""
    kind, detail = _error(response)
    return response.status_code == 404 and kind == "sandbox_not_found" and ": expired (" in detail


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    if isinstance(failure, ServerError):
        return not full(response)
    if isinstance(failure, EnsureResourceAvailability):
        return not gone_by_its_own_ttl(response)
    if isinstance(failure, RejectedPositiveData):
        return not (
            the_file_system_said_no(response)
            or a_path_too_long_in_bytes(response)
            or an_upload_that_is_no_tar(response, case)
            or past_the_hosts_limits(response)
        )
    return True
