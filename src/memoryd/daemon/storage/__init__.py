"""The store's files and the event log, below the tiers: staged atomic files made durable in one
group commit (`store`), records rendered and parsed (`frontmatter`), read without following links
(`nofollow`), parsed by forked helpers during a start without `state/` (`prefetch`); the hash-chained
log (`eventlog`), its line rules, verify and repair (`logcheck`), every event kind declared once
(`events`); the one time format (`clock`). Design: docs/storage.md."""
