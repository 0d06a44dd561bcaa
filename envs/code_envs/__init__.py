"""Bash-v0 and Code-v0: a shell and an interpreter in a container per episode."""
