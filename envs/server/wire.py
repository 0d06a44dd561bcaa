"""The wire format under its former name: everything here is `agentrl.protocol`'s, the one module
both the server and the clients import (new code imports that); kept so that code importing
`agentrl.server.wire` runs unchanged."""

from agentrl.protocol import *  # noqa: F403
