"""The daemon: the only writer of the store and the event log.

Layers, each importing only the ones below it (tests/unit/test_layout.py holds the rule):

    server, ops            the process: the ROUTER loop (the only daemon module that imports zmq)
                           and the one dispatch table; the ops' handlers
    catalogue              the one tool catalogue (joins the tiers' TOOLS)
    process/               start-up and signals, parked calls, the reply cache, the operator's reads,
                           the timed passes, the checkpoint of a clean stop
    sync/                  sync through a git remote: a worker thread runs git on a separate clone,
                           the loop admits what it brings (docs/sync.md); tiers reach it only through
                           the optional methods of `core.extensions` (health, digest, provenance)
    sessions/              tier: session brackets, handoff capture, the digest
    memories/              tier: durable memories behind the write gates (reads episodes: promote,
                           prior session)
    episodes/              tier: the journal and its tools
    core, domain, tool     a start (recovery, rebuild, the check after it); the domain state and its
                           one change path; what a tool is
    calls/                 a call's arguments checked, a resent call answered
    identity/              ids, scope rules, the session table
    search/                the text analyzer, BM25 postings and ranking, near-duplicates
    encoder/               the sentence encoder: files, tokenizer, forward pass
    credentials/           the credential detector and the patterns the gates share
    storage/               atomic record files, the event log, event kinds, the time format

One exception, on purpose: `domain` holds the episode journal (`episodes.journal` over
`episodes.index`, which import only building blocks and their cache format, `episodes.cache`),
because every tier reads episodes through it.
The design is in docs/architecture.md.
"""
