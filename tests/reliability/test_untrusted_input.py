"""What a hook is handed and what an import reads are never trusted.

Each test plays the attack through the real CLI (`memoryd hook …`, `memoryd import …`), against a
real daemon where a flaw would show: crafted hook stdin (secrets in the last words, a
transcript path naming a FIFO or an endless device) and crafted import files (YAML alias bombs,
deep nesting, secrets, links out of the folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import Env

HANG_GUARD_S = 20  # a subprocess timeout that only catches a hang; nothing here times anything
SECRET36 = "Qx7pL2mV9sK4tR8wZ3nB6yH1cF5gJ0dA2eUo"  # 36 chars: with ghp_ a GitHub token's shape
AWS_KEY = "AKIA" + "Q7RZ2MXK4TPW9BNL"
PASSWORD = "Tr0ub4dor-and-3-more"


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True, timeout=30)
    return path


def hook(env: Env, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "memoryd", "hook", event], input=json.dumps(payload),
                          env=env.environ(), capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def shown_at_next_start(env: Env, cwd: Path, **stop_fields: Any) -> str:
    """One client session whose stop hook gets `stop_fields` and that ends without a handoff;
    what the next session's start hook shows."""
    base = {"session_id": "s1", "cwd": str(cwd)}
    hook(env, "session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"})
    hook(env, "stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False, **stop_fields})
    hook(env, "session-end", {**base, "hook_event_name": "SessionEnd", "reason": "other"})
    proc = hook(env, "session-start", {"session_id": "s2", "cwd": str(cwd), "hook_event_name": "SessionStart",
                                       "source": "startup"})
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout.strip() else ""


def stored_bytes(env: Env) -> bytes:
    """Every file of the store, concatenated: a secret must not be in any of them."""
    return b"".join(p.read_bytes() for p in sorted(env.home.rglob("*")) if p.is_file())


def hook_handoffs(env: Env) -> list[dict[str, Any]]:
    """Sessions the session-end hook closed with captured last words (a session note)."""
    return [e for e in env.events() if e["kind"] == "session_end" and e.get("note_sha")]


def private_key(end: bool) -> str:
    body = "\n".join(f"MIIEow{i:02d}IBAAKCAQEA7bq{SECRET36}{i:02d}w" for i in range(12))
    return ("-----BEGIN RSA PRIVATE KEY-----\n" + body
            + ("\n-----END RSA PRIVATE KEY-----" if end else ""))


# -- 3: secrets in the captured last words ------------------------------------------------------------

@pytest.mark.parametrize("end", [True, False], ids=["with-end-line", "end-line-missing"])
def test_a_private_key_in_the_last_words_is_withheld_whole_never_stored_or_shown(served: Env, end: bool) -> None:
    a = git_repo(served.base / "a")
    message = f"Generated the deploy key:\n{private_key(end)}\nNext: install it on the runner."
    shown = shown_at_next_start(served, a, last_assistant_message=message)
    stored = stored_bytes(served)
    assert b"Generated the deploy key" in stored and b"[withheld" in stored  # kept, less the key
    assert (b"Next: install it on the runner." in stored) is end  # without END the rest may be key
    for piece in ("-----END", "MIIEow", SECRET36):
        assert piece not in shown and piece.encode() not in stored


def test_a_token_cut_in_two_by_the_4000_char_window_is_not_stored_as_its_tail(served: Env) -> None:
    a = git_repo(served.base / "a")
    tail = "p_" + SECRET36 + "\n" + "Next: rotate the token and rerun the release job. " * 90
    tail = tail[:4000]
    message = "Pushed with gh" + tail  # the old cut kept exactly `tail`: the token less its `gh`
    shown = shown_at_next_start(served, a, last_assistant_message=message)
    assert b"Next: rotate the token" in stored_bytes(served)
    assert SECRET36 not in shown and SECRET36.encode() not in stored_bytes(served)


# -- 10: the stop hook's transcript read ----------------------------------------------------------------

def _fifo(env: Env) -> str:
    path = env.base / "transcript.fifo"
    os.mkfifo(path)
    return str(path)


def _link_to_zero(env: Env) -> str:
    path = env.base / "transcript.jsonl"
    path.symlink_to("/dev/zero")
    return str(path)


@pytest.mark.parametrize("transcript", [_fifo, lambda env: "/dev/zero", lambda env: "/dev/urandom", _link_to_zero],
                         ids=["fifo", "dev-zero", "dev-urandom", "symlink-to-dev-zero"])
def test_a_transcript_path_naming_a_fifo_or_device_returns_at_once_and_stores_nothing(served: Env,
                                                                                      transcript: Any) -> None:
    a = git_repo(served.base / "a")
    shown = shown_at_next_start(served, a, transcript_path=transcript(served))
    assert "captured by" not in shown and hook_handoffs(served) == []  # no last words were kept


def test_a_symlink_to_a_real_transcript_is_still_read(served: Env) -> None:
    a = git_repo(served.base / "a")
    real = served.base / "real.jsonl"
    real.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": "Done: the "
                                "flaky test was a timezone bug."}}) + "\n")
    (served.base / "link.jsonl").symlink_to(real)
    assert "timezone bug" in shown_at_next_start(served, a, transcript_path=str(served.base / "link.jsonl"))
    assert len(hook_handoffs(served)) == 1  # the check the refusals above rely on does see a kept note


# -- 11: import bombs ---------------------------------------------------------------------------------

BOMB = """---
id: 01HZBOMB000000000000000000
created: 2024-01-01T00:00:00Z
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
scopes: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
category: *h
removed_reason: *h
---
A body.
"""


def refused_import(env: Env, fmt: str, path: Path, line: int) -> str:
    """`memoryd import FMT <PATH or its folder> --dry-run` exits 2 naming the file and line; its stderr."""
    proc = env.memoryd("import", fmt, str(path.parent if fmt == "bettermemory" else path), "--dry-run",
                       timeout=HANG_GUARD_S)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"{path}:{line}:" in proc.stderr
    return proc.stderr


def bettermemory_file(env: Env, frontmatter: str) -> Path:
    store = env.base / "bm"
    store.mkdir(exist_ok=True)
    path = store / "2024-01-01-note-01hzbomb000000000000000000.md"
    path.write_text(frontmatter)
    return path


def test_a_yaml_alias_bomb_in_a_bettermemory_file_is_refused_at_its_first_anchor(env: Env) -> None:
    path = bettermemory_file(env, BOMB)
    assert "anchors and aliases" in refused_import(env, "bettermemory", path, 4)


@pytest.mark.parametrize("depth", [100, 5000])
def test_deeply_nested_yaml_frontmatter_is_refused_not_a_recursion_error(env: Env, depth: int) -> None:
    path = bettermemory_file(env, f"---\nid: X\nscopes: {'[' * depth}{']' * depth}\n---\nA body.\n")
    assert "nest" in refused_import(env, "bettermemory", path, 3)  # ours past 64, libyaml's past 1000


@pytest.mark.parametrize("shape", ["jsonl", "read_graph"])
def test_deeply_nested_server_memory_json_is_refused_not_a_recursion_error(env: Env, shape: str) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    path = env.base / "memory.json"
    path.write_text(f'{{"entities": {deep}}}' if shape == "read_graph"
                    else f'{{"type":"entity","name":"x","observations":{deep}}}\n')
    assert "nested too deeply" in refused_import(env, "server-memory", path, 1)


def test_a_fifo_in_a_bettermemory_store_does_not_hang_the_import(env: Env) -> None:
    store = bettermemory_file(env, "---\nid: 01HZ\ncreated: 2024-01-01T00:00:00Z\n---\nA body.\n").parent
    os.mkfifo(store / ".quarantine.json")
    os.mkfifo(store / "2024-01-02-pipe-01hzpipe000000000000000000.md")
    proc = env.memoryd("import", "bettermemory", str(store), "--dry-run", "--json", timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total"] == 1


# -- 12: the import report never prints a refused secret -----------------------------------------------

def test_refused_secrets_are_reported_by_origin_and_masked_never_printed(served: Env) -> None:
    notes = served.base / "notes"
    notes.mkdir()
    (notes / "ops.md").write_text(f"# Ops\n\n- The uploader signs with {AWS_KEY} for the reports bucket\n"
                                  f"- password = {PASSWORD}\n- Deploys go through the staging cluster first\n")
    outputs = [served.memoryd("import", "markdown", str(notes), "--dry-run", *extra, "--scope", "projects:ops",
                              timeout=HANG_GUARD_S) for extra in ([], ["--json"])]
    outputs += [served.memoryd("import", "markdown", str(notes), *extra, "--scope", "projects:ops",
                               timeout=HANG_GUARD_S) for extra in ([], ["--json"])]
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr
        assert AWS_KEY not in proc.stdout + proc.stderr and PASSWORD not in proc.stdout + proc.stderr
        assert AWS_KEY[4:10] not in proc.stdout and PASSWORD[:8] not in proc.stdout
    assert "refused: credential_warning (2)" in outputs[2].stdout
    assert "ops.md:3" in outputs[2].stdout and "AKIA…[REDACTED]" in outputs[2].stdout
    summary = json.loads(outputs[3].stdout)  # the re-run: the secrets are refused again, not stored
    [refused] = [r for r in summary["reasons"] if r["reason"] == "credential_warning"]
    assert sorted(i["origin"] for i in refused["items"]) == ["ops.md:3", "ops.md:4"]
    assert AWS_KEY.encode() not in stored_bytes(served) and PASSWORD.encode() not in stored_bytes(served)


# -- 13: the markdown importer and links out of the folder ----------------------------------------------

def test_markdown_import_skips_linked_files_and_folders_at_any_depth_and_says_so(served: Env) -> None:
    outside = served.base / "outside"
    outside.mkdir()
    (outside / "private.md").write_text("- The vault unseal phrase is kept in the blue binder\n")
    notes = served.base / "notes"
    (notes / "a" / "b").mkdir(parents=True)
    (notes / "real.md").write_text("- Releases are cut on Tuesdays after the freeze\n")
    (notes / "a" / "passwd.md").symlink_to("/etc/passwd")
    (notes / "a" / "b" / "deep.md").symlink_to(outside / "private.md")
    (notes / "a" / "linked").symlink_to(outside, target_is_directory=True)

    plan = json.loads(served.memoryd("import", "markdown", str(notes), "--dry-run", "--json").stdout)
    assert plan["total"] == 1
    summary = json.loads(served.memoryd("import", "markdown", str(notes), "--json", "--scope", "projects:ops",
                                        timeout=HANG_GUARD_S).stdout)
    assert summary["counts"]["committed"] == 1
    for report in (plan, summary):
        assert sorted(s["path"] for s in report["skipped"]) == sorted(
            str(notes / p) for p in ("a/passwd.md", "a/b/deep.md", "a/linked"))
    text = served.memoryd("import", "markdown", str(notes), "--dry-run").stdout
    assert f"skipped: {notes / 'a' / 'passwd.md'}: a symbolic link (not followed)" in text
    stored = stored_bytes(served)
    assert b"unseal phrase" not in stored and b"root:x:0" not in stored and b"Releases are cut" in stored
