"""`memoryd hook stop` keeps the agent's latest message as the session's last words; `session-end`
closes the session. Neither injects anything. Import contract: as hooks/common.py."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from memoryd.hooks.common import Daemon, identity_for

TRANSCRIPT_TAIL_BYTES = 256 * 1024


def run(event: str, client: str, data: dict[str, Any], dry_run: bool = False) -> str | None:
    identity = identity_for(data, client)
    if event == "stop":
        stop(lambda: Daemon(identity, event), data)
    else:
        with Daemon(identity, event) as daemon:
            daemon.hook("end", reason=str(data.get("reason") or "other"))
    return None


def assistant_text(entry: Any) -> str | None:
    """The text of a transcript line when it is an assistant message (Claude Code or Codex shape)."""
    if not isinstance(entry, dict):
        return None
    for message in (entry.get("message"), entry.get("payload"), entry):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.strip() or None
        if isinstance(content, list):
            parts = [str(b["text"]) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
            return "\n".join(parts).strip() or None
    return None


def transcript_tail(path: str) -> list[bytes] | None:
    """The lines in the last TRANSCRIPT_TAIL_BYTES of the regular file at `path`; None for anything else.
    The path comes from stdin, so a FIFO or device is refused before the open and on the descriptor (a
    swap in between), opened non-blocking; a symlink is followed (stdin could name its target as well)."""
    path = os.path.expanduser(path)
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - TRANSCRIPT_TAIL_BYTES)
        lines = os.pread(fd, TRANSCRIPT_TAIL_BYTES, start).splitlines()
        return lines[1:] if start and len(lines) > 1 else lines  # a tail's first line is cut
    finally:
        os.close(fd)


def last_from_transcript(path: Any) -> str | None:
    """The last assistant text in a JSONL transcript, reading only its tail."""
    try:
        lines = transcript_tail(path) if isinstance(path, str) and path else None
    except (OSError, ValueError):  # ValueError: a NUL in the path
        lines = None
    for line in reversed(lines or []):
        try:
            found = assistant_text(json.loads(line))
        except ValueError:
            continue
        if found:
            return found
    return None


def stop(daemon_factory: Any, data: dict[str, Any]) -> None:
    if data.get("hook_event_name") == "SubagentStop":
        return  # a sub-agent's report is not the session's last words
    text = data.get("last_assistant_message")
    if not isinstance(text, str) or not text.strip():
        text = last_from_transcript(data.get("transcript_path"))
    if text:
        with daemon_factory() as daemon:
            daemon.hook("last_words", text=text)
