"""The daemon: the only writer of the store and the event log. Each layer imports only the ones below it
(tests/unit/test_layout.py); the layers and the one exception are in docs/architecture.md."""
