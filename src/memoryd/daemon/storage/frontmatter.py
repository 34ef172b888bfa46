"""A record file's bytes: YAML frontmatter between `---` lines (`key: <JSON>` lines where they can be, JSON
being YAML: docs/benchmark.md), then the markdown body; `parse` refuses what it cannot trust (`BadRecord`).
Import contract: stdlib + yaml (through `safe_yaml`, on first use) + errors."""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring_ascii as _json_string
from typing import Any

from memoryd import safe_yaml
from memoryd.errors import InvalidParams

MAX_FRONTMATTER_BYTES = 64 * 1024
_ALIAS_HINT = re.compile(r"[&*!]")


class BadRecord(ValueError):
    """A record file that cannot be trusted (unparseable, aliased, oversized); it is skipped."""


def render(meta: dict[str, Any], body: str, blame: str) -> bytes:
    """Serialize a record; refuse (naming `blame`) a frontmatter over 64 KiB or not read back as written."""
    front = _json_lines(meta)  # exact by construction (tests/unit/test_store_format.py reads it back)
    if front is None:
        yaml, loader, dumper = safe_yaml.yaml_kit()  # imported on first use: it slows every daemon start
        front = yaml.dump(meta, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1_000_000)
        if yaml.load(front, Loader=loader) != meta:
            raise InvalidParams(blame, "the value does not survive a YAML round trip")
    raw = front.encode()
    if len(raw) > MAX_FRONTMATTER_BYTES:
        raise InvalidParams(blame, f"the record's frontmatter would be {len(raw)} bytes, over the 64 KiB limit")
    return b"---\n" + raw + b"---\n" + body.encode()


# A key YAML reads as a string: lowercase words, but not the ones YAML 1.1 reads as a boolean or null.
_PLAIN_KEY = re.compile(r"(?!(?:yes|no|on|off|true|false|null|y|n)\Z)[a-z_]+")
# JSON escapes that YAML's double-quoted scalars read differently: `\/`, and surrogate halves
# (JSON joins a pair into one character, YAML does not).
_JSON_ONLY_ESCAPE = re.compile(r"\\/|\\u[dD][89a-fA-F]")


def _json_lines(meta: dict[str, Any]) -> str | None:
    """`key: <JSON>` lines when every key is plain and every value fits `_json_text`; else None."""
    lines = []
    for key, value in meta.items():
        if key not in _PLAIN_KEYS_SEEN:
            if not (type(key) is str and _PLAIN_KEY.fullmatch(key)):
                return None
            if len(_PLAIN_KEYS_SEEN) < 1024:  # the frontmatter keys of a few record kinds
                _PLAIN_KEYS_SEEN.add(key)
        if (text := _json_text(value)) is None:
            return None
        lines.append(f"{key}: {text}\n")
    return "".join(lines)


_PLAIN_KEYS_SEEN: set[str] = set()
_JSON_SCALARS = {None: "null", True: "true", False: "false"}


def _json_text(value: Any) -> str | None:
    """`value` as `json.dumps` writes it, or None for anything but ASCII str, int, bool, None, list, dict."""
    kind = type(value)
    if kind is str:
        return _json_string(value) if value.isascii() else None
    if kind is int:
        return int.__repr__(value)
    if value is None or kind is bool:
        return _JSON_SCALARS[value]
    if kind is list:
        items = [_json_text(v) for v in value]
        return None if None in items else "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
    if kind is dict:
        pairs = []
        for k, v in value.items():
            if (text := _json_text(v)) is None or type(k) is not str or not k.isascii():
                return None
            pairs.append(f"{_json_string(k)}: {text}")
        return "{" + ", ".join(pairs) + "}"
    return None


def _parse_json_lines(text: str) -> dict[str, Any] | None:
    """The mapping of a frontmatter of `key: <JSON>` lines, exactly as YAML reads it; None for
    anything else (blank lines, comments, YAML-only syntax, floats)."""
    if _JSON_ONLY_ESCAPE.search(text):  # keys are [a-z_]+: a match can only be in a value
        return None
    meta: dict[str, Any] = {}
    plain_key = _PLAIN_KEY.fullmatch
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if not sep or not plain_key(key):
            return None
        try:
            try:
                meta[key], end = _SCAN(value, 0)
            except StopIteration:
                end = -1
            if end != len(value):
                meta[key] = _JSON.decode(value)
        except ValueError:
            return None
    return meta


def _no_float(text: str) -> Any:
    raise ValueError("YAML reads this number differently")


_JSON = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)
_SCAN = _JSON.scan_once  # type: ignore[attr-defined]  # the C scanner (not in the stubs)


def parse(data: bytes) -> tuple[dict[str, Any], str]:
    """The (frontmatter, body) of a record file; raises `BadRecord` for anything untrustworthy."""
    if not data.startswith(b"---\n"):
        raise BadRecord("no frontmatter")
    if (end := data.find(b"\n---\n", 3)) < 0:
        raise BadRecord("unterminated frontmatter")
    front = data[4 : end + 1]
    if len(front) > MAX_FRONTMATTER_BYTES:
        raise BadRecord("frontmatter over 64 KiB")
    text = front.decode("utf-8", errors="strict")
    meta = _parse_json_lines(text)
    if meta is None:
        try:  # only text holding '&', '*' or '!' can hold an anchor, alias or tag: walk its events first
            meta = safe_yaml.load(text, walk=bool(_ALIAS_HINT.search(text)))
        except safe_yaml.YAMLRefused as exc:
            raise BadRecord(f"frontmatter: {exc.reason}") from exc
        if not isinstance(meta, dict):
            raise BadRecord("frontmatter is not a mapping")
    return meta, data[end + 5 :].decode("utf-8", errors="replace")
