"""Anchors: which durable memories a file or a shell command names, by exact keys taken from their
content, for point-of-action recall (docs/search.md, "Anchors").

Import contract: stdlib, gates (cited paths), records.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice, takewhile
from typing import Any

from memoryd.daemon.memories.gates import cited_paths
from memoryd.daemon.memories.records import HANDOFF, Memory

# Kinds of anchor, strongest first.
FILE, COMMAND, DIRECTORY, IDENTIFIER = 3, 3, 2, 1

MAX_COMMAND_CHARS = 8192
MAX_COMMAND_TOKENS = 256
MAX_PHRASE_TOKENS = 6
MAX_PHRASES = 24            # per memory
MAX_DIR_DEPTH = 6           # ancestor directories of a file that are looked up
MAX_MODULE_DEPTH = 4        # dotted module names tried per path (`a.b.c.stem`)
PAIR_WINDOW = 4             # tokens after a program where its phrase's second word may be

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


CODE_EXTENSIONS = _words(
    "py pyi js jsx ts tsx mjs cjs go rs java kt kts scala rb php c h cc cpp hpp cs swift m mm sql sh "
    "bash zsh yaml yml toml json ini cfg conf md rst txt html css scss vue svelte tf proto gradle lock "
    "xml env ipynb dockerfile mk")
# Programs whose plain-text mention starts a command phrase (a `code span` needs no such list).
PROGRAMS = _words(
    "git make alembic npm npx yarn pnpm pip pip3 uv poetry pytest tox docker kubectl helm terraform "
    "cargo go rm mv cp chmod chown sudo gh aws gcloud az psql mysql redis-cli rake bundle rails "
    "django-admin flask celery ansible-playbook systemctl brew apt apt-get dnf yum curl ssh scp rsync "
    "black ruff mypy eslint prettier jest mvn gradle dotnet bazel nix")
# Words that end a plain-text phrase: "never git push --force *without* asking".
STOP_WORDS = _words(
    "a an the and or but nor not no to from for with without unless until before after when while if "
    "then on in at by of as into onto is are was be been it its this that these those here there "
    "only first again instead always never ever just yourself manually directly anymore so also "
    "because since via per any all every each")

# Names made of words or dotted (the lookahead skips plain words at C speed).
_IDENT_RE = re.compile(r"(?<![\w/.])(?=[\w.]*?(?:[a-z0-9][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]|[A-Za-z0-9_]\.[A-Za-z_]))"
                       r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CODE_SPAN_RE = re.compile(r"`([^`\n]{1,200})`")
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]")
_PROGRAM_RE = re.compile(r"^[a-z][a-z0-9._+-]*$")
_ARG_RE = re.compile(r"^(?:--?[A-Za-z0-9][A-Za-z0-9_-]*(?:=\S+)?|[a-z0-9][a-z0-9:._/+-]*)$")
_PLACEHOLDER_RE = re.compile(r"[<>$…{}\[\]]|\.\.\.")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})


def fold(name: str) -> str:
    """An identifier key: case and `_`/`-` dropped, so `stripe_client` meets `StripeClient`."""
    return name.lower().replace("_", "").replace("-", "")


def compound(word: str) -> bool:
    """A name made of words (`stripe_client`, `StripeClient`), not a plain word (`index`)."""
    return "_" in word.strip("_") or bool(_CAMEL_RE.search(word))


def path_key(path: str) -> str:
    """A path as the index keys it: no `./`, no leading or trailing slash, lowercase."""
    path = path.strip().removeprefix("./").strip("/").lower()
    return re.sub(r"/+", "/", path)


def _extension(name: str) -> str:
    return name.rsplit(".", 1)[1].lower() if "." in name else ""


@dataclass(frozen=True)
class Anchors:
    paths: tuple[tuple[str, int], ...]           # (path key, FILE or DIRECTORY)
    identifiers: tuple[str, ...]                 # folded names
    phrases: tuple[tuple[str, ...], ...]         # command token sequences

    def __bool__(self) -> bool:
        return bool(self.paths or self.identifiers or self.phrases)


def extract(content: str) -> Anchors:
    """Every anchor key in a memory's content (pure)."""
    paths: dict[str, int] = {}
    for cited in cited_paths(content):
        key = path_key(cited)
        if key:
            is_file = not cited.endswith("/") and bool(_extension(key.rsplit("/", 1)[-1]))
            paths[key] = FILE if is_file else DIRECTORY
    identifiers: dict[str, None] = {}
    for match in _IDENT_RE.finditer(content):
        token = match.group()
        parts = token.split(".")
        if len(parts) >= 2 and parts[-1].lower() in CODE_EXTENSIONS:
            paths.setdefault(token.lower(), FILE)  # a file named as a word: `settings.py`
            parts = parts[:-1]
        for key in _identifier_keys(parts):
            identifiers[key] = None
    return Anchors(tuple(paths.items()), tuple(identifiers), tuple(command_phrases(content)))


def _identifier_keys(parts: list[str]) -> Iterator[str]:
    if len(parts) >= 2 and all(len(p) >= 2 for p in parts):  # `billing.stripe_client` (not "e.g")
        for end in range(2, len(parts) + 1):
            yield fold(".".join(parts[:end]))
    for part in parts:
        if compound(part):
            yield fold(part)


def command_phrases(content: str) -> list[tuple[str, ...]]:
    """Command token sequences a memory names: each `code span` that reads as a command with an
    argument, and each plain-text run that starts with a known program and has one."""
    spans = [words for words in map(str.split, _CODE_SPAN_RE.findall(content)) if words and _PROGRAM_RE.match(words[0])]
    found = [tuple(takewhile(lambda w: not _PLACEHOLDER_RE.search(w), words[:MAX_PHRASE_TOKENS])) for words in spans]
    words = _CODE_SPAN_RE.sub(" ", content).split()
    found += [_plain_phrase(words[i:]) for i, word in enumerate(words) if word in PROGRAMS]
    return list(dict.fromkeys(phrase for phrase in found if len(phrase) >= 2))[:MAX_PHRASES]


def _plain_phrase(words: list[str]) -> tuple[str, ...]:
    """Program, then arguments until a stop word or punctuation ends the clause."""
    out = [words[0]]
    for raw in words[1:MAX_PHRASE_TOKENS]:
        word = raw.rstrip(",.;:!?)")
        if word.lower() in STOP_WORDS or not _ARG_RE.match(word):
            break
        out.append(word)
        if word != raw:  # "run make lint, then…": the comma ends the phrase
            break
    return tuple(out)


def path_lookups(path: str) -> Iterator[tuple[str, int, int, str]]:
    """(key, kind, specificity, name) to look up for a file the tool touches: each suffix of the path,
    each ancestor directory's suffixes, and the identifiers the path names."""
    key = path_key(path)
    segments = [s for s in key.split("/") if s and s != "."]
    if not segments:
        return
    for start in range(len(segments)):
        suffix = "/".join(segments[start:])
        yield suffix, FILE, len(segments) - start, suffix
    for depth in range(1, min(MAX_DIR_DEPTH, len(segments) - 1) + 1):
        parent = segments[:-depth]
        for start in range(len(parent)):
            if len(parent) - start >= 2 or depth == 1:  # one bare segment only for the file's own dir
                suffix = "/".join(parent[start:])
                yield suffix, DIRECTORY, len(parent) - start - depth, suffix + "/"
    original = path.strip().rstrip("/").split("/")
    stem = original[-1].rsplit(".", 1)[0] if _extension(original[-1]) else original[-1]
    if compound(stem):
        yield fold(stem), IDENTIFIER, 1, stem
    dirs = [s for s in original[:-1] if s and s != "."]
    for back in range(1, min(MAX_MODULE_DEPTH, len(dirs)) + 1):
        dotted = ".".join([*dirs[-back:], stem])
        yield fold(dotted), IDENTIFIER, back + 1, dotted


def command_segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line, as token lists (`a && b | c` → three)."""
    command = command[:MAX_COMMAND_CHARS]
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(islice(lexer, MAX_COMMAND_TOKENS))
    except ValueError:  # an unclosed quote: whitespace is the best guess left
        tokens = command.split()[:MAX_COMMAND_TOKENS]
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(token.rsplit("/", 1)[-1] if not segments[-1] else token)
    return [s for s in segments if s]


def command_paths(segments: list[list[str]]) -> list[str]:
    """Arguments of a command that read as file paths (Codex reads files through its shell)."""
    found = [token for segment in segments for token in segment[1:] if not token.startswith("-")
             and (("/" in token and len(token) > 2) or _extension(token.rsplit("/", 1)[-1]) in CODE_EXTENSIONS)]
    return list(dict.fromkeys(found))[:8]


def in_order(phrase: tuple[str, ...], tokens: list[str], start: int) -> bool:
    """`phrase[1:]` appears in `tokens` after `start`, in order (other tokens may sit between)."""
    want = 1
    for token in tokens[start + 1:]:
        if want < len(phrase) and token == phrase[want]:
            want += 1
    return want == len(phrase)


@dataclass(frozen=True)
class Hit:
    memory_id: str
    kind: int
    specificity: int
    why: str             # what matched, said for the agent: "cites billing/stripe_client.py"


class AnchorIndex:
    """Anchor key → memory ids; built in slices (`build_some`), then kept by `add` / `remove`."""

    def __init__(self) -> None:
        self.built = False
        self.todo: list[str] | None = None                               # ids left while a build runs
        self.paths: dict[str, dict[str, int]] = {}                       # key -> {id: kind}
        self.identifiers: dict[str, dict[str, None]] = {}                # key -> {id: None}
        # (program, next word) -> {id: phrases}: a `git` command reads only its subcommand's memories.
        self.commands: dict[tuple[str, ...], dict[str, list[tuple[str, ...]]]] = {}
        self.of: dict[str, Anchors] = {}

    def build(self, memories: Iterable[Memory]) -> None:
        """Index `memories` at once (tests, and a store small enough not to care)."""
        self.todo = []
        for memory in memories:
            self.add(memory)
        self.built, self.todo = True, None

    def build_some(self, live: Mapping[str, Memory], budget: int) -> bool:
        """Index up to `budget` more of `live`, starting a build if none runs; True once complete.
        Changes meanwhile go through `add` / `remove` as they come."""
        if self.built:
            return True
        if self.todo is None:
            self.todo = list(live)
        for _ in range(min(budget, len(self.todo))):
            memory = live.get(self.todo.pop())
            if memory is not None:
                self.add(memory)
        if not self.todo:
            self.built, self.todo = True, None
        return self.built

    def add(self, memory: Memory) -> None:
        """Index `memory` (a no-op before a build starts; handoffs and tainted memories are not indexed)."""
        if (self.todo is None and not self.built) or memory.category == HANDOFF or memory.tainted:
            return
        found = extract(memory.content)
        if not found:
            return
        self.remove(memory)
        self.of[memory.id] = found
        for key, kind in found.paths:
            self.paths.setdefault(key, {})[memory.id] = kind
        for key in found.identifiers:
            self.identifiers.setdefault(key, {})[memory.id] = None
        for phrase in found.phrases:
            self.commands.setdefault(phrase[:2], {}).setdefault(memory.id, []).append(phrase)

    def remove(self, memory: Memory) -> None:
        found = self.of.pop(memory.id, None)
        if found is None:
            return
        for key, _ in found.paths:
            _drop(self.paths, key, memory.id)
        for key in found.identifiers:
            _drop(self.identifiers, key, memory.id)
        for phrase in found.phrases:
            _drop(self.commands, phrase[:2], memory.id)

    def for_path(self, path: str) -> Iterator[Hit]:
        for key, kind, specificity, name in path_lookups(path):
            if kind == IDENTIFIER:
                for memory_id in self.identifiers.get(key, ()):
                    yield Hit(memory_id, IDENTIFIER, specificity, f"names {name}")
                continue
            for memory_id, cited_kind in self.paths.get(key, {}).items():
                # The whole path is the file even without an extension; an ancestor matches only a directory.
                if kind == FILE:
                    yield Hit(memory_id, FILE, specificity, f"cites {name}")
                elif cited_kind == DIRECTORY:
                    yield Hit(memory_id, DIRECTORY, specificity, f"cites directory {name}")

    def for_command(self, command: str) -> Iterator[Hit]:
        segments = command_segments(command)
        for tokens in segments:
            for start, token in enumerate(tokens):
                # The phrase's second word within a few tokens of its first (`git -C dir push`).
                for second in tokens[start + 1:start + 1 + PAIR_WINDOW]:
                    for memory_id, phrases in self.commands.get((token, second), {}).items():
                        for phrase in phrases:
                            if in_order(phrase, tokens, start):
                                yield Hit(memory_id, COMMAND, len(phrase), f"names `{' '.join(phrase)}`")
        for path in command_paths(segments):
            yield from self.for_path(path)


def _drop(table: dict[Any, dict[str, Any]], key: Any, memory_id: str) -> None:
    entry = table.get(key)  # None: a phrase sharing its first two words with one dropped before
    if entry is not None:
        entry.pop(memory_id, None)
        if not entry:
            del table[key]


def best(hits: Iterable[Hit]) -> list[Hit]:
    """One hit per memory (its strongest), strongest first; newer memories first on a tie."""
    top: dict[str, Hit] = {}
    for hit in hits:
        held = top.get(hit.memory_id)
        if held is None or (hit.kind, hit.specificity) > (held.kind, held.specificity):
            top[hit.memory_id] = hit
    newest_first = sorted(top.values(), key=lambda h: h.memory_id, reverse=True)
    return sorted(newest_first, key=lambda h: (-h.kind, -h.specificity))
