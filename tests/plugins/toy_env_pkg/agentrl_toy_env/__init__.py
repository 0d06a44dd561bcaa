"""Toy agentrl envs from another package (their ids are the entry points in pyproject.toml)."""
