"""The one credential detector (`detector`), with the vendors' token formats (`vendor_tokens`) and
the lazily compiled patterns it and the write gates share (`patterns`). Design: docs/security.md."""
