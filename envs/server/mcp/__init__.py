"""agentrl envs spoken over the Model Context Protocol: `agentrl mcp serve ENV_ID` makes one episode
of any agentrl env an MCP server (`agentrl.server.mcp.serve`), through the official `mcp` SDK (the
`[mcp]` extra). A room of the server: nothing below the server imports it.
"""
