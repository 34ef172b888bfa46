"""Argument rules of the durable tier its terse schemas do not spell out; each fails, before anything is
written, with the -32602 `InvalidParams(param, reason)` the schema validator would raise. Import contract:
idents, scopes, tool (the patterns), validate, records, shortids, errors."""

from __future__ import annotations

import re
from typing import Any

from memoryd.daemon.calls.validate import python_pattern
from memoryd.daemon.identity import idents
from memoryd.daemon.identity.scopes import unique
from memoryd.daemon.memories.records import LINK_TYPES
from memoryd.daemon.memories.shortids import ShortIds, is_short_id
from memoryd.daemon.tool import SCOPE_PATTERN
from memoryd.errors import InvalidParams, ResourceState

MAX_LINKS = 64
MAX_SCOPE_CHARS = 128
MAX_FILTER_SCOPES = 64
MAX_VERIFIED_ITEMS = 64
MAX_PATH_CHARS = 4096
MAX_CANDIDATES = 10
_SCOPE_RE = python_pattern(SCOPE_PATTERN)
# Matched with `fullmatch`: `$` would also accept a value that ends in a newline.
_PENDING_RE = re.compile(r"pending-[1-9][0-9]{0,17}")
_COMMIT_RE = re.compile(r"[0-9a-f]{7,40}")


def check_id(name: str, value: str) -> str:
    if not idents.is_ulid(value):
        raise InvalidParams(name, "must be a ULID (26 chars of Crockford base32)")
    return value


def named_memory(short_ids: ShortIds, name: str, value: str) -> str:
    """The memory id `value` names (a whole or short id); an ambiguous short id fails naming the candidates."""
    if idents.is_ulid(value) or not is_short_id(value):
        return check_id(name, value)
    if not (found := short_ids.resolve(value)):
        raise ResourceState("unknown_memory", value, f"no memory has the short id {value!r}")
    if len(found) > 1:
        error = InvalidParams(name, f"{value!r} names {len(found)} memories: " + ", ".join(
            short_ids.short(i) + f" ({i})" for i in found[:MAX_CANDIDATES]))
        error.data["candidates"] = [{"id": i, "short_id": short_ids.short(i)} for i in found[:MAX_CANDIDATES]]
        raise error
    return found[0]


def check_pending_id(value: str) -> str:
    if not _PENDING_RE.fullmatch(value):
        raise InvalidParams("pending_id", "must look like pending-<n>")
    return value


def check_scope_list(name: str, scopes: list[str] | None, cap: int = MAX_FILTER_SCOPES) -> list[str]:
    """Distinct scopes, each `^[a-z0-9]+(?:[-:][a-z0-9]+)*$` and at most 128 chars."""
    if scopes is None:
        return []
    for i, scope in enumerate(scopes):
        if len(scope) > MAX_SCOPE_CHARS or not _SCOPE_RE.fullmatch(scope):
            raise InvalidParams(f"{name}[{i}]", f"{scope[:40]!r} is not a scope like projects:memoryd "
                                                "(lowercase a-z0-9, '-' and ':', at most 128 chars)")
    scopes = unique(scopes)
    if len(scopes) > cap:
        raise InvalidParams(name, f"at most {cap} scopes")
    return scopes


def check_write_scopes(scopes: list[str], cap: int, name: str = "scopes") -> list[str]:
    """A write's scopes: at least one, at most the config's cap."""
    if not (checked := check_scope_list(name, scopes, cap)):
        raise InvalidParams(name, "must name at least one scope")
    return checked


def check_links(live: dict[str, Any], links: list[Any] | None, self_id: str | None = None) -> list[dict[str, str]]:
    """Links as `{type, target_id}`: at most 64, known types, live targets, no self-link."""
    if not links:
        return []
    if len(links) > MAX_LINKS:
        raise InvalidParams("links", f"at most {MAX_LINKS} links, got {len(links)}")
    checked = []
    for i, link in enumerate(links):
        if not isinstance(link, dict) or set(link) != {"type", "target_id"}:
            raise InvalidParams(f"links[{i}]", "must be an object {type, target_id}")
        if link["type"] not in LINK_TYPES:
            raise InvalidParams(f"links[{i}].type", f"must be one of {', '.join(LINK_TYPES)}")
        target = link["target_id"]
        if not idents.is_ulid(target):
            raise InvalidParams(f"links[{i}].target_id", "must be a memory id (ULID)")
        if target == self_id:
            raise InvalidParams(f"links[{i}].target_id", "a memory cannot link to itself")
        if target not in live:
            raise InvalidParams(f"links[{i}].target_id", f"no live memory {target}")
        checked.append({"type": link["type"], "target_id": target})
    return list({(x["type"], x["target_id"]): x for x in checked}.values())


def check_verified(paths: list[str] | None, commits: list[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """memory_verify's evidence lists: at most 64 each; paths ≤ 4096 chars; commits hex SHAs."""
    path_list, commit_list = tuple(paths or ()), tuple(commits or ())
    for name, items in (("verified_paths", path_list), ("verified_commits", commit_list)):
        if len(items) > MAX_VERIFIED_ITEMS:
            raise InvalidParams(name, f"at most {MAX_VERIFIED_ITEMS} items")
    for i, path in enumerate(path_list):
        if not path.strip() or len(path) > MAX_PATH_CHARS:
            raise InvalidParams(f"verified_paths[{i}]", f"must be a non-empty path of at most {MAX_PATH_CHARS} chars")
    for i, commit in enumerate(commit_list):
        if not _COMMIT_RE.fullmatch(commit):
            raise InvalidParams(f"verified_commits[{i}]", "must be a commit SHA (7-40 lowercase hex)")
    return path_list, commit_list
