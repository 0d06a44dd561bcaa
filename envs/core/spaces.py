"""A text space that accepts what a language model actually writes."""

from __future__ import annotations

import functools
import string
from typing import Any

from gymnasium import spaces

# Sampling draws from printable ASCII (tags, braces and quotes included) so that random actions
# exercise the parser with realistic garbage; `contains` accepts any characters at all.
SAMPLE_CHARSET = string.printable


class TextSpace(spaces.Text):
    """`gymnasium.spaces.Text` whose membership checks type and length only.

    Gymnasium's `Text` rejects any character outside its charset (default `[a-zA-Z0-9]`), which
    would make every real model output "outside the space".
    """

    def __init__(self, max_length: int = 65_536, *, min_length: int = 0, seed: int | None = None):
        # Gymnasium's `Text` indexes its charset on every construction (~0.6 ms, two per env, so
        # most of a light env's creation); every `TextSpace` shares one charset, indexed once
        # (read-only: gymnasium never changes it) and validated with the lengths by `Text` itself.
        self.__dict__.update(_charset_space(int(max_length), int(min_length)).__dict__)
        self.max_length = int(max_length)
        if seed is not None:
            self.seed(seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, TextSpace)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


@functools.lru_cache(maxsize=64)
def _charset_space(max_length: int, min_length: int) -> spaces.Text:
    """A `Text` over `SAMPLE_CHARSET` with these lengths, built (and its arguments checked) once."""
    return spaces.Text(max_length, min_length=min_length, charset=SAMPLE_CHARSET)
