"""The `memoryd` command: `main` builds the argparse tree and imports a verb's module only when it runs."""
