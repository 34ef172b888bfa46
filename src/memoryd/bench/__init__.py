"""`memoryd bench`: real bridges over stdio MCP against a throwaway daemon (docs/benchmark.md)."""
