"""Helpers for the search tests: the Java skip-or-fail rule."""

from __future__ import annotations

from support import unavailable


def require_java() -> None:
    """Skip without Java/pyserini, but fail under CI, where a missing runtime is a broken install."""
    from agentrl.retrievers.lucene import java_available

    reason = java_available()
    if reason:
        unavailable(f"Lucene needs Java 21 and pyserini: {reason}")
