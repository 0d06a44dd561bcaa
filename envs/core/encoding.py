"""Text that can leave the process: every observation must encode as UTF-8.

A Python `str` may hold lone UTF-16 surrogates (a JSON escape such as `"\\ud800"`, or bytes decoded
with `surrogateescape`); `str.encode("utf-8")` then raises, in the server's JSON writer or in a
tokenizer, far from the step that let them in. The env core checks model text for them once and
scrubs everything it sends back.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point, which no UTF encoding accepts."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def utf8_safe(text: str) -> str:
    """`text` with every surrogate replaced by U+FFFD, one for one, so offsets into it still hold."""
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)
