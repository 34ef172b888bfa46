"""The real Claude Code CLI driven by a scripted model (/work/shared/notes/clients.md, "Claude Code
with a scripted model").

`FakeAnthropic` is a Messages API on 127.0.0.1 (stdlib `http.server`, a thread, a random port). It
records every request body and answers:

- the agent's own turns (requests that carry `tools`) from a script: each step is
  `("tool", name, input)` (a `tool_use` block, `stop_reason: tool_use`), `("text", "...")`
  (`stop_reason: end_turn`), or a callable `step(request, requests) -> one of those`, called when
  its turn comes, that may read what the model was given so far (e.g. the memoryd session id);
- side calls (a session title, summaries: no `tools`) and a script that ran out with a short text;
- `count_tokens` with a token count.

`run_claude` runs `claude -p PROMPT --output-format json` against it with a temp HOME and returns
the process result and the requests of that run. `given_text`, `hook_context` and `tools_share`
read a recorded request: what the model was given, and how much of its tools array is memoryd's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

Request = dict[str, Any]
Reply = tuple[Any, ...]  # ("tool", name, input) | ("text", str)
Step = Reply | Callable[[Request, list[Request]], Reply]

ALLOWED_TOOLS = "mcp__memoryd__memory_write,mcp__memoryd__memory_session_finish,Read,Edit,Bash"
SIDE_ANSWER = "Scripted side answer."
END_ANSWER = "Scripted model: the script is done."


# -- the fake Messages API ---------------------------------------------------------------------------

class FakeAnthropic:
    """A scripted Anthropic Messages API; use as a context manager (it serves while inside)."""

    def __init__(self, script: Sequence[Step] = ()) -> None:
        self.requests: list[Request] = []  # every POST body, in arrival order (side calls too)
        self.script: list[Step] = list(script)
        self.lock = threading.Lock()
        self.errors: list[str] = []  # a step that raised: the test reads these, the client gets a text
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest's output quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    request = json.loads(body or b"{}")
                except ValueError:
                    request = {"unparsed": body.decode(errors="replace")}
                if "count_tokens" in self.path:
                    return self._send(200, "application/json", json.dumps({"input_tokens": 100}).encode())
                reply = fake._answer(request)
                if request.get("stream"):
                    self._send(200, "text/event-stream", sse(reply, request.get("model", "scripted")))
                else:
                    body = json.dumps(message(reply, request.get("model", "scripted"))).encode()
                    self._send(200, "application/json", body)

            def do_GET(self) -> None:
                self._send(404, "application/json", b'{"type": "error"}')

            def _send(self, code: int, kind: str, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, request: Request) -> Reply:
        with self.lock:  # one step per agent turn, even if the client sends two requests at once
            self.requests.append(request)
            if not request.get("tools"):
                return ("text", SIDE_ANSWER)
            if not self.script:
                return ("text", END_ANSWER)
            step = self.script.pop(0)
            if callable(step):
                try:
                    step = step(request, list(self.requests))
                except Exception as exc:  # noqa: BLE001 - shown to the test, not lost in a thread
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    return ("text", END_ANSWER)
            return step


def _events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Messages streaming events of one reply, in the API's order."""
    msg_id = f"msg_{uuid.uuid4().hex[:20]}"
    usage = {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield "message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}}
    if reply[0] == "tool":
        _, name, tool_input = reply
        block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
        stop = "tool_use"
    else:
        block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": str(reply[1])}, "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 10}}
    yield "message_stop", {"type": "message_stop"}


def sse(reply: Reply, model: str) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in _events(reply, model)).encode()


def message(reply: Reply, model: str) -> dict[str, Any]:
    """The same reply as one non-streaming message (should a client not stream)."""
    content: list[dict[str, Any]] = []
    stop = None
    for name, data in _events(reply, model):
        if name == "message_start":
            msg = data["message"]
        elif name == "content_block_start":
            content.append(dict(data["content_block"]))
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                content[-1]["text"] += delta["text"]
            else:
                content[-1]["input"] = json.loads(delta["partial_json"])
        elif name == "message_delta":
            stop = data["delta"]["stop_reason"]
    return {**msg, "content": content, "stop_reason": stop}


# -- reading a recorded request ----------------------------------------------------------------------

def agent_turns(requests: list[Request]) -> list[Request]:
    """The agent's own turns (they carry `tools`), without side calls."""
    return [r for r in requests if r.get("tools")]


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                yield block["text"]
            if block.get("type") == "tool_result":
                yield from _texts(block.get("content"))


def given_text(request: Request) -> str:
    """Every text the model was given in one request: `system`, then each message's text blocks and
    tool results (hooks' injected context arrives as such text), joined by newlines."""
    return "\n".join(_all_texts(request))


def hook_context(request: Request, event: str) -> list[str]:
    """The context hooks of `event` ("SessionStart", "UserPromptSubmit", ...) injected, as the model
    saw it. Claude Code writes `<event> hook additional context: <text>` into a text (inside a
    `<system-reminder>` for prompt and tool hooks); each piece runs from there to the reminder's end,
    else to the end of its text — which, for SessionStart, also holds Claude Code's own context
    after the hook's (agent types, MCP server instructions): assert with `in`, not `==`."""
    marker = f"{event} hook additional context: "
    found = []
    for text in _all_texts(request):
        for piece in text.split(marker)[1:]:
            found.append(piece.split("</system-reminder>", 1)[0].strip())
    return found


def _all_texts(request: Request) -> Iterator[str]:
    yield from _texts(request.get("system"))
    for msg in request.get("messages") or []:
        yield from _texts(msg.get("content"))


def tool_results(request: Request) -> list[tuple[str, bool]]:
    """The tool results the request's last user message carries: (text, is_error) each."""
    for msg in reversed(request.get("messages") or []):
        if msg.get("role") == "user" and isinstance(msg.get("content"), list):
            return [("\n".join(_texts(b.get("content"))), bool(b.get("is_error")))
                    for b in msg["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    return []


@dataclass
class ToolsShare:
    memoryd_chars: int  # JSON chars of the tools whose name starts with mcp__memoryd__
    total_chars: int  # JSON chars of the whole tools array
    memoryd_tools: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.memoryd_chars / self.total_chars if self.total_chars else 0.0


def tools_share(request: Request) -> ToolsShare:
    """memoryd's share of the request's `tools` (compact JSON, as a client serializes it)."""
    tools = request.get("tools") or []

    def size(value: Any) -> int:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    ours = [t for t in tools if str(t.get("name", "")).startswith("mcp__memoryd__")]
    return ToolsShare(sum(size(t) for t in ours), size(tools), [t["name"] for t in ours])


# -- running the real CLI ------------------------------------------------------------------------------

@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    requests: list[Request]  # every request this run sent, side calls included
    errors: list[str]  # script steps that raised

    @property
    def turns(self) -> list[Request]:
        return agent_turns(self.requests)


def claude_environ(env: dict[str, str], home: Path, base_url: str) -> dict[str, str]:
    """`env` with a temp HOME, the fake API, and nothing of a surrounding Claude Code session."""
    out = {k: v for k, v in env.items()
           if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDECODE",
                        "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_PROJECT_DIR")}
    out.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "ANTHROPIC_BASE_URL": base_url,
                "ANTHROPIC_API_KEY": "sk-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"})
    return out


def run_claude(prompt: str, cwd: Path, env: dict[str, str], home: Path, script: Sequence[Step], *, claude: Path,
               allowed_tools: str = ALLOWED_TOOLS, timeout: float = 180, extra_args: Sequence[str] = ()) -> Run:
    """One `claude -p PROMPT` session against a fresh scripted model. The CLI runs in its own process
    group; whatever of that group outlives it (an MCP bridge still saying bye, a hook) gets a few
    seconds to finish, then SIGKILL — so nothing this starts survives the call."""
    with FakeAnthropic(script) as fake:
        args = [str(claude), "-p", prompt, "--output-format", "json", "--allowedTools", allowed_tools, *extra_args]
        popen = subprocess.Popen(args, cwd=cwd, env=claude_environ(env, home, fake.url), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(popen.pid, grace=0)
            out, err = popen.communicate()
        finally:
            _kill_group(popen.pid, grace=3)
        proc = subprocess.CompletedProcess(args, popen.returncode, out, err)
        return Run(proc, list(fake.requests), list(fake.errors))


def _kill_group(pgid: int, grace: float) -> None:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass

