"""What keeps a FastAPI app's OpenAPI document true where FastAPI and pydantic alone would not.

Two gaps, shared by every server (the episode server's protocol and the sandbox server's wire models
use `WholeNumber`, both apps `allowed_methods`). The module imports no web framework when it is
imported, since the protocol, which clients import too, imports it:

- JSON Schema's `integer` admits `3` and `3.0` and nothing else, while pydantic's lax `int` also
  takes `true` and `"3"` and its strict one refuses `3.0`. `WholeNumber` makes a strict int take
  exactly what the schema says: `Annotated[int, Strict(), Field(ge=..., le=...), WholeNumber]`
  (the bounds before it, or pydantic cannot write them into the schema). Likewise a JSON `number`
  or `boolean` field is strict: lax ones take `"1.5"`, `1` or `"yes"`.
- Starlette's 405 names in `Allow` the methods of the one route it happened to try;
  `allowed_methods` names those of every route on the path, as RFC 9110 asks and the schema says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BeforeValidator

__all__ = ["HTTP_METHODS", "WholeNumber", "allowed_methods"]


def _whole_float_as_int(value: Any) -> Any:
    """`3.0` becomes `3` (JSON Schema counts it an integer); anything else goes on to a strict int."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# after `int, Strict()`: an integer as JSON Schema has it, `3` or `3.0`, never `true`, `"3"` or `3.5`
WholeNumber = BeforeValidator(_whole_float_as_int)

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")


def allowed_methods(routes: Iterable[Any], scope: Mapping[str, Any]) -> str:
    """The `Allow` header of a 405: every method some route (an included router's too) takes on the
    request's path, asked of the routes themselves, as the router would match them."""
    from starlette.routing import Match  # here: the protocol imports this module and no web framework

    allowed = [method for method in HTTP_METHODS
               if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in routes)]
    return ", ".join(allowed)
