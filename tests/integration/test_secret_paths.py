"""No credential becomes a memory, an episode, a handoff, last words, an import or a synced record.

Every path that stores outside text asks the one detector (`daemon/credentials/detector.py`); these tests
drive each path for real — the official MCP client through a real bridge, real hook processes,
`memoryd import` and a local bare git remote — with secrets drawn from the shared corpus
(`tests/secret_corpus.py`, seeded, so a failure reproduces from its seed), and then look for the
secret in every file the store holds and in every context a hook prints.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_hooks import WAIT_S, context, git_repo, hook
from test_live_awareness import ask, begin, news_of

from harness import Env, call
from secret_corpus import POSITIVE_FORMS, positives
from synckit import set_up, synced, tool

SEED = 38
WORKTREE = {"MEMORYD_WORKTREE": "/w/shop"}


def store_text(env: Env) -> str:
    """Every byte the store holds under its home, as text (records, state, log, sync clone)."""
    parts = []
    for path in env.home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            parts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


def leaked(secrets: list[str], text: str) -> list[str]:
    return [s for s in secrets if s in text]


def reported_ten(rng: random.Random) -> list[tuple[str, str]]:
    """The ten forms the hostile probe got stored, with fresh random bodies: (text, secret)."""
    def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    stripe = "sk_" + "live_" + rand(24)
    pw = rand(14) + "!"
    basic = __import__("base64").b64encode(f"admin:{pw}".encode()).decode()
    account_key = __import__("base64").b64encode(rng.randbytes(64)).decode()
    sendgrid = "SG." + rand(22, string.ascii_letters + string.digits + "_-") + "." + rand(43)
    return [
        (f"Payments use {stripe} in production.", stripe),
        (f"STRIPE_KEY={stripe}", stripe),
        (f"Publish with the npm token {(npm := 'npm_' + rand(36))}.", npm),
        (f"The model hub token is {(hf := 'hf_' + rand(34, string.ascii_letters))}.", hf),
        (f"Mail goes out through SendGrid key {sendgrid}.", sendgrid),
        (f"Connect with PGPASSWORD={pw} psql -h db.internal -U app shop", pw),
        (f"Restore the dump: mysql -u root -p{pw} shop < dump.sql", pw),
        (f"The admin API wants Authorization: Basic {basic}", basic),
        (f"Smoke test: curl -u admin:{pw} https://admin.internal/health", pw),
        ("Storage: DefaultEndpointsProtocol=https;AccountName=shopdata;"
         f"AccountKey={account_key};EndpointSuffix=core.windows.net", account_key),
    ]


def bridge_calls(env: Env, steps: list[tuple[str, dict[str, Any]]], **extra: str) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        with anyio.fail_after(WAIT_S * 3):
            async with env.session(**{**WORKTREE, **extra}) as bridge:
                return [await call(bridge, name, **args) for name, args in steps]
    return anyio.run(main)


# -- memory_write and memory_update -----------------------------------------------------------------

def test_the_ten_reported_secrets_are_refused_through_a_real_bridge(daemon: Env) -> None:
    forms = reported_ten(random.Random(SEED))
    results = bridge_calls(daemon, [("memory_write", {"content": text, "scopes": ["projects:shop"]})
                                    for text, _ in forms])
    assert [r["status"] for r in results] == ["credential_warning"] * len(forms), results
    secrets = [secret for _, secret in forms]
    assert leaked(secrets, json.dumps(results)) == []  # the warning's markers are redacted too
    assert not list((daemon.home / "memories").glob("*.md"))
    assert leaked(secrets, store_text(daemon)) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_every_corpus_form_is_refused_by_memory_write_and_update(daemon: Env, seed: int) -> None:
    made = positives(seed)
    assert len(POSITIVE_FORMS) >= 80 and len({form.family for form, _, _ in made}) >= 8
    steps: list[tuple[str, dict[str, Any]]] = [
        ("memory_write", {"content": "The billing service retries webhooks three times.", "scopes": ["projects:shop"]})]
    steps += [("memory_write", {"content": text, "scopes": ["projects:shop"]}) for _, text, _ in made]
    results = bridge_calls(daemon, steps)
    kept = results[0]["id"]
    refused = {form.name: r["status"] for (form, _, _), r in zip(made, results[1:])}
    assert {name for name, status in refused.items() if status != "credential_warning"} == set(), f"seed {seed}"
    updates = bridge_calls(daemon, [("memory_update", {"id": kept, "content": text}) for _, text, _ in made])
    assert {form.name for (form, _, _), r in zip(made, updates) if r["status"] != "credential_warning"} == set()
    assert leaked([secret for _, _, secret in made], store_text(daemon)) == []


# -- episodes: masked before they are stored, so never broadcast ------------------------------------

def test_an_episode_takeaway_secret_is_masked_and_never_reaches_news_handoff_or_start(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop")
    made = {form.name: (text, secret) for form, text, secret in positives(SEED)}
    takeaway, token = made["github_classic_token"] if "github_classic_token" in made else next(
        (t, s) for name, (t, s) in made.items() if name.startswith("github"))
    body, body_secret = next((t, s) for name, (t, s) in made.items() if name.startswith("npm"))
    begin(env, "listener", repo)
    assert news_of(ask(env, "listener", repo)) == ""  # the listener's hook is at work before the write

    async def writer() -> dict[str, Any]:
        with anyio.fail_after(WAIT_S):
            async with env.session(cwd=str(repo), CLAUDE_CODE_SESSION_ID="writer") as bridge:
                result = await call(bridge, "episode_write", body=f"Tried the deploy.\n{body}",
                                    takeaway=f"Deploy works once {takeaway}")
                found = await call(bridge, "episode_search", session_id=result["session_id"], include_bodies=True)
                return {"write": result, "search": found}
    seen = anyio.run(writer)
    assert seen["write"]["status"] == "committed"
    assert {m["field"] for m in seen["write"]["masked"]} == {"body", "takeaway"}
    news = news_of(ask(env, "listener", repo))
    assert "Deploy works once" in news  # the takeaway was news, with its secret masked
    end_payload = {"session_id": "writer", "cwd": str(repo), "hook_event_name": "SessionEnd", "reason": "other"}
    hook(env, "session-end", end_payload)
    start = context(hook(env, "session-start", {"session_id": "next", "transcript_path": "", "cwd": str(repo),
                                                "hook_event_name": "SessionStart", "source": "startup"}),
                    "SessionStart") or ""
    shown = json.dumps(seen) + news + start
    assert leaked([token, body_secret], shown) == []
    assert leaked([token, body_secret], store_text(env)) == []


# -- last words (stop and session-end hooks) --------------------------------------------------------

def test_last_words_holding_every_family_show_none_of_their_secrets_at_the_next_start(served: Env) -> None:
    env = served
    repo = git_repo(env.base / "shop")
    made = positives(SEED)
    picked = [next(m for m in made if m[0].family == family) for family in sorted({m[0].family for m in made})]
    picked += random.Random(SEED).sample(made, 25)
    message = "\n".join(["Done for today: the billing retry fix is merged."]
                        + [text for _, text, _ in picked] + ["Next: finish the refund report."])
    begin(env, "s1", repo)
    hook(env, "stop", {"session_id": "s1", "cwd": str(repo), "hook_event_name": "Stop",
                       "stop_hook_active": False, "transcript_path": "", "last_assistant_message": message})
    hook(env, "session-end", {"session_id": "s1", "cwd": str(repo), "hook_event_name": "SessionEnd",
                              "reason": "other"})
    start = context(hook(env, "session-start", {"session_id": "s2", "transcript_path": "", "cwd": str(repo),
                                                "hook_event_name": "SessionStart", "source": "startup"}),
                    "SessionStart") or ""
    assert "billing retry fix is merged" in start  # the last words were kept, less their secrets
    secrets = [secret for _, _, secret in picked]
    assert leaked(secrets, start) == []
    assert leaked(secrets, store_text(env)) == []


# -- importers and sync admission ------------------------------------------------------------------

def test_markdown_import_refuses_every_family_and_its_report_shows_no_secret(daemon: Env) -> None:
    made = positives(SEED + 1)
    picked = [next(m for m in made if m[0].family == family) for family in sorted({m[0].family for m in made})]
    notes = daemon.base / "notes"
    notes.mkdir()
    for i, (_, text, _) in enumerate(picked):
        (notes / f"note{i}.md").write_text(f"# Ops note {i}\n\nHow we reach the service: {text}\n")
    result = daemon.memoryd("import", "markdown", str(notes), "--scope", "projects:shop", "--json")
    report = json.loads(result.stdout)
    assert report["counts"]["refused"] == len(picked) and report["counts"]["committed"] == 0, report
    assert {r["reason"] for r in report["reasons"]} == {"credential_warning"}, report
    secrets = [secret for _, _, secret in picked]
    assert leaked(secrets, result.stdout + result.stderr) == []
    assert leaked(secrets, store_text(daemon)) == []


def test_sync_admission_refuses_a_pulled_record_holding_any_family(env: Env, remote: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))  # the hostile remote's helpers
    from test_sync_merge_hostile import attacker_clone, attacker_push, reasons, with_body

    set_up(env, remote)
    made = positives(SEED + 2)
    picked = [next(m for m in made if m[0].family == family) for family in sorted({m[0].family for m in made})]
    topics = ["billing", "search", "checkout", "inventory", "shipping", "refunds", "reports", "emails", "auth",
              "catalog"]
    ids = []
    for topic in topics[: len(picked)]:
        result = tool(env, "memory_write", content=f"The {topic} service is deployed by the {topic} team's pipeline.",
                      scopes=["projects:shop"])
        ids.append(result["id"])
    synced(env)
    work = attacker_clone(remote)
    for memory_id, (_, text, _) in zip(ids, picked):
        record = work / "memories" / f"{memory_id}.md"
        record.write_bytes(with_body(record.read_bytes(), f"Reach it with {text}"))
    attacker_push(work)
    found = reasons(synced(env))
    assert sorted(found) == sorted(f"memories/{i}.md" for i in ids), found
    assert all(reason.startswith("holds a credential") for reason in found.values()), found
    memories = "".join(p.read_text() for p in (env.home / "memories").glob("*.md"))  # the quarantine keeps them out
    assert leaked([secret for _, _, secret in picked], memories) == []
