"""memoryd: persistent memory for AI coding agents, served over MCP.
Import contract: this module holds the version only, so the bridge can import it for free."""

__version__ = "0.1.0"
PROTOCOL = 1
