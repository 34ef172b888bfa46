"""memoryd's client hooks, one row per event: the CLI's verbs, `memoryd init`'s Claude Code and Codex settings,
the plugin's hooks.json and the hook processes' budgets (why these: docs/architecture.md, "Hook processes") are
made from it. Import contract: stdlib only (it is on every hook process's import path)."""

from __future__ import annotations

from typing import NamedTuple

_NONE: dict[str, str] = {}


class HookEvent(NamedTuple):  # not a dataclass: importing dataclasses costs a hook ~12 ms
    verb: str                   # `memoryd hook VERB`
    module: str                 # memoryd.hooks.<module> answers it (`run`)
    clients: dict[str, str]     # client -> its name for the event in the client's hook settings
    timeout_s: int              # the client's timeout for the command
    spawn_s: float              # it may start a daemon that is down within this long
    call_s: float               # each request to the daemon waits at most this long
    matchers: dict[str, str] = _NONE  # client -> the tools it fires for (never changed in place)
    injects: bool = False       # prints context for the agent (and sends a receipt of it)
    dry_run_answers: bool = False  # `--dry-run` prints what would be injected (else `{}`)


SESSION_START = HookEvent("session-start", "start", {"claude-code": "SessionStart", "codex": "SessionStart"},
                          timeout_s=10, spawn_s=3.0, call_s=2.0, injects=True)
PROMPT = HookEvent("prompt", "prompt", {"claude-code": "UserPromptSubmit", "codex": "UserPromptSubmit"},
                   timeout_s=5, spawn_s=2.0, call_s=1.5, injects=True, dry_run_answers=True)
PRE_TOOL = HookEvent("pre-tool", "pretool", {"claude-code": "PreToolUse", "codex": "PreToolUse"},
                     timeout_s=3, spawn_s=0.0, call_s=0.5, injects=True, dry_run_answers=True,
                     matchers={"claude-code": "Read|Edit|Write|MultiEdit|Bash", "codex": "Bash|apply_patch"})
STOP = HookEvent("stop", "stop", {"claude-code": "Stop", "codex": "Stop"}, timeout_s=5, spawn_s=2.0, call_s=1.0)
SESSION_END = HookEvent("session-end", "stop", {"claude-code": "SessionEnd"}, timeout_s=2, spawn_s=0.0, call_s=0.8)
HOOKS = (SESSION_START, PROMPT, PRE_TOOL, STOP, SESSION_END)
BY_VERB = {hook.verb: hook for hook in HOOKS}
EVENTS = tuple(BY_VERB)
CLIENTS = ("claude-code", "codex")


def client_hooks(client: str) -> list[HookEvent]:
    return [hook for hook in HOOKS if client in hook.clients]
