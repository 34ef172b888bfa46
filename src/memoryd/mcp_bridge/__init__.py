"""The stdio MCP bridge: speaks JSON-RPC to one agent, forwards tool calls to the daemon.
Import contract: client, identity, protocol, errors only — never the daemon or the store."""
