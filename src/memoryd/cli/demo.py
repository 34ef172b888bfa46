"""`memoryd demo`: a throwaway store, a real daemon, two scripted agents through real bridges: agent 1
journals its run and finishes with a handoff; agent 2, fresh in the same worktree, learns both in one call."""

from __future__ import annotations

import json
import sys
import time

from memoryd import names
from memoryd.bench.kit import Bridge, Throwaway

WORKTREE = "/demo/checkout"


def say(text: str) -> None:
    print(text, flush=True)


def agent_one(box: Throwaway) -> str:
    bridge = Bridge(box.env, worktree=WORKTREE)
    bridge.initialize()
    say("agent 1: journals two iterations with episode_write")
    bridge.call(names.EPISODE_WRITE, body="iteration 1: ran the migration, step 3 failed on a NULL column",
                takeaway="migration fails at step 3: NULL in users.email", scopes=["projects:demo"])
    bridge.call(names.EPISODE_WRITE, body="iteration 2: backfilled emails, migration passes locally",
                takeaway="backfill fixes the migration; CI not yet run", scopes=["projects:demo"])
    session: str = bridge.call(names.EPISODE_SEARCH, max_results=1)["episodes"][0]["session_id"]
    finish = bridge.call(names.MEMORY_SESSION_FINISH, session_id=session, summary="migration unblocked",
                         handoff="Became true: backfill fixes the users.email migration. Open: CI run. "
                                 "Next: push the branch and watch CI.")
    say(f"agent 1: finished {session} with handoff {finish.get('handoff_capsule')}")
    bridge.close()
    return session


def agent_two(box: Throwaway) -> None:
    bridge = Bridge(box.env, worktree=WORKTREE)
    bridge.initialize()
    handoff = bridge.call(names.EPISODE_HANDOFF)
    say(f"agent 2: episode_handoff -> prior session {handoff['prior_session_id']} "
        f"ended '{handoff['prior_session']['ended']}'")
    for episode in handoff["episodes"]:
        say(f"           takeaway [{episode['provenance']}]: {episode['takeaway']}")
    if "handoff" in handoff["prior_session"]:
        say(f"           handoff: {handoff['prior_session']['handoff']['text']}")
    digest = bridge.call(names.MEMORY_DIGEST, headlines=3)
    say(f"agent 2: memory_digest leads with {digest['handoffs_total']} handoff(s): "
        + json.dumps([h["text"][:60] for h in digest["handoffs"]]))
    bridge.close()


def main() -> int:
    began = time.monotonic()
    box = Throwaway()
    try:
        box.start()
        say(f"demo: daemon on a throwaway store at {box.base}")
        agent_one(box)
        agent_two(box)
    except Exception as exc:  # the demo reports, it does not crash with a traceback
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        box.close()
    say(f"demo: done in {time.monotonic() - began:.1f} s")
    return 0
