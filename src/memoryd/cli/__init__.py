"""The `memoryd` command: `main` builds the one argparse tree and imports each verb's module only
when it runs, so every command (the bridge above all) starts fast.

One module per verb family: `clients` (init), `services` (install-service), `doctor`, `episodes`,
`export`, `demo`, `hooks` (the client hook commands).
"""
