"""Serving agentrl envs over HTTP with per-episode isolation."""
