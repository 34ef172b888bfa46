"""The stdio MCP bridge: JSON-RPC with one agent, tool calls to the daemon; never imports the daemon or the store."""
