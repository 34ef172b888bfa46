"""The one credential detector and the patterns it shares with the write gates (docs/security.md)."""
