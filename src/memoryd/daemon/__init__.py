"""The daemon: the only writer of the store and the event log.

Layers, each importing only the ones below it (tests/unit/test_layout.py holds the rule):

    server, ops, parked,   the process: the ROUTER loop (the only daemon module that imports zmq),
    replies, lifecycle     the ops' handlers, parked calls, the reply cache, start-up, signals,
                           the status file
    catalogue, reaper,     the tool catalogue (joins the tiers' TOOLS), the timed passes, and the
    admin                  operator reads behind the CLI's `memories`/`pending`/`sessions` and the UI
    sync/                  sync through a git remote: a worker thread runs git on a separate clone,
                           the loop admits what it brings (docs/sync.md); tiers reach it only through
                           the optional methods of `core.extensions` (health, digest, provenance)
    sessions/              tier: session brackets, handoff capture, the digest
    memories/              tier: durable memories behind the write gates (reads episodes: promote,
                           prior session)
    episodes/              tier: the journal and its tools
    core, domain, retries, a start (recovery, rebuild, the check after it); the domain state and its
    clock, tool, validate  one change path; resent requests; the time format; what a tool is; checks
    connections, search,   sessions and connections; the BM25 index; the text analyzer; scope rules;
    text, scopes, store,   the record files (staged and published by the store, rendered by
    frontmatter, idents,   frontmatter, named by idents, read without following links by nofollow);
    nofollow, eventlog,    the hash-chained log and its line rules, verify and repair (logcheck);
    logcheck, helper       the forked helpers that parse record files during a start without state/

One exception, on purpose: `domain` holds the episode journal (`episodes.journal` over
`episodes.index`, which import only building blocks and their cache format, `episodes.cache`),
because every tier reads episodes through it.
The design is in docs/architecture.md.
"""
