"""`memoryd bench`: real bridges over stdio MCP against a throwaway daemon (docs/benchmark.md).

`kit` holds the throwaway store, the bridge driver and the loaders; `run` the episode benches and
the table; `memory` the durable-tier benches.
"""
