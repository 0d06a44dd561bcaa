"""A small MCP server for the env's tests: a key-value notebook kept in a file of its workspace, plus
tools that misbehave on purpose (crash mid-call, hang, junk on stdout, a 10 MB answer, an error).

    python notebook.py --dir WORKSPACE [--tools N] [--junk-at-start] [--http PORT]

`--tools N` lists N extra tools (`extra_0`...), for the bounded listing. The notebook's state is the
file `notebook.json` in WORKSPACE, so a task's setup files seed it and a check reads it back.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import stat
import time
from pathlib import Path

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # the SDK before 2.0 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--tools", type=int, default=0)
parser.add_argument("--junk-at-start", action="store_true")
parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this loopback port")
parser.add_argument("--tag", default="", help="ignored: lets a test find the process")
options = parser.parse_args()
NOTEBOOK = Path(options.dir) / "notebook.json"
server = MCPServer("notebook", log_level="ERROR")


def load() -> dict[str, str]:
    return json.loads(NOTEBOOK.read_text()) if NOTEBOOK.exists() else {}


@server.tool()
def put(key: str, value: str) -> str:
    """Write value under key."""
    notes = load()
    notes[key] = value
    NOTEBOOK.write_text(json.dumps(notes, sort_keys=True))
    return f"stored {key}"


@server.tool()
def get(key: str) -> str:
    """Read the value under key."""
    notes = load()
    if key not in notes:
        raise ValueError(f"no note named {key}")
    return notes[key]


@server.tool()
def keys() -> str:
    """List every key, sorted."""
    return ", ".join(sorted(load())) or "(empty)"


@server.tool()
def count(prefix: str = "") -> dict[str, int]:
    """Count the keys that start with prefix (a structured result)."""
    return {"count": sum(1 for k in load() if k.startswith(prefix))}


@server.tool()
def nonce() -> str:
    """A fresh random token (a server that is not deterministic)."""
    return os.urandom(8).hex()


@server.tool()
def crash() -> str:
    """Exit the server in the middle of the call."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Block the whole server."""
    time.sleep(seconds)
    return "woke up"


def wire() -> int:
    """The descriptor the server answers on: the SDK moved it off fd 1 (which it points at stderr), so
    that a print cannot break the protocol; a server written otherwise has no such guard."""
    stderr = os.fstat(2)
    for fd in range(3, 256):
        try:
            found = os.fstat(fd)
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            continue
        if stat.S_ISFIFO(found.st_mode) and mode == os.O_WRONLY and found.st_ino != stderr.st_ino:
            return fd
    return 1


@server.tool()
def junk() -> str:
    """Write a line that is not JSON-RPC where the answers go, then answer."""
    os.write(wire(), b"this is not json\n")
    return "answered after junk"


@server.tool(structured_output=False)
def huge(megabytes: int = 10) -> str:
    """Answer megabytes of text."""
    return "x" * (megabytes << 20)


def make_extra(number: int) -> None:
    def extra(n: int) -> str:
        return f"extra {number}: {n}"

    extra.__name__ = f"extra_{number}"
    server.tool(name=f"extra_{number}", description=f"Extra tool number {number}.")(extra)


for number in range(options.tools):
    make_extra(number)

if options.junk_at_start:
    print("a banner no MCP client can read", flush=True)
if options.http:
    server.run("streamable-http", host="127.0.0.1", port=options.http)
else:
    server.run("stdio")
