"""The store's files and the event log, below the tiers: group commit (`store`), record files
(`frontmatter`, `nofollow`, `prefetch`), the hash-chained log (`eventlog`, `logcheck`, `events`) and
the one time format (`clock`). Design: docs/storage.md."""
