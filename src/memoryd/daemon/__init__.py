"""The daemon: the only writer of the store and the event log.

Its layers each import only those below them (drawn in docs/architecture.md, "Layers"; held by
tests/unit/test_layout.py). One exception, on purpose: `domain` holds the episode journal
(`episodes.journal`), because every tier reads episodes through it.
"""
