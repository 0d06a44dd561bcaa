"""The airline tests' data: an invented domain in τ-bench's exact layout (tasks are not test files)."""

collect_ignore = ["data"]
