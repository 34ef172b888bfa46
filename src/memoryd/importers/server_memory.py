"""The MCP reference memory server's knowledge graph (`@modelcontextprotocol/server-memory`,
`memory.jsonl` lines or a `read_graph` answer) → one draft per entity (docs/import.md, "server-memory")."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.errors import BadImportInput
from memoryd.importers.draft import Draft, read_text, slug

SOURCE_SCOPE = "import:server-memory"
USER_ENTITIES = {"default_user"}
USER_TYPES = {"user"}


@dataclass
class Entity:
    name: str
    kind: str
    line: int
    observations: list[str] = field(default_factory=list)


def read(path: Path, skipped: list[tuple[str, str]]) -> list[Draft]:
    """One draft per entity of the graph file, in file order (nothing is ever skipped)."""
    if path.is_dir():
        path = _graph_file(path)
    entities, relations = _load(path, read_text(path))
    return [draft for entity in entities.values() if (draft := _draft(path, entity, relations))]


def _graph_file(folder: Path) -> Path:
    for name in ("memory.jsonl", "memory.json"):
        if (folder / name).is_file():
            return folder / name
    raise BadImportInput(folder, "no memory.jsonl or memory.json here (give the MEMORY_FILE_PATH file)")


def _load(path: Path, text: str) -> tuple[dict[str, Entity], list[tuple[str, str, str]]]:
    """Entities by name (a repeated name merges its observations) and (from, type, to) relations."""
    entities: dict[str, Entity] = {}
    relations: list[tuple[str, str, str]] = []
    for number, item in _items(path, text):
        kind = item.get("type")
        if kind == "entity" or (kind is None and "name" in item):
            _add_entity(path, number, item, entities)
        elif kind == "relation" or (kind is None and "relationType" in item):
            parts = (item.get("from"), item.get("relationType"), item.get("to"))
            if not all(isinstance(p, str) and p.strip() for p in parts):
                raise BadImportInput(path, "a relation needs from, to and relationType", number)
            relations.append(parts)  # type: ignore[arg-type]
        else:
            raise BadImportInput(path, f"type {kind!r} is neither 'entity' nor 'relation'", number)
    return entities, relations


def _items(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, object) pairs from JSON lines, or from one `read_graph` object."""
    stripped = text.strip()
    if stripped.startswith("{") and '"entities"' in stripped[:200]:
        try:
            graph = json.loads(stripped)
        except (ValueError, RecursionError):  # read line by line below, which names the line
            graph = None
        if isinstance(graph, dict) and "entities" in graph:
            return _graph_items(path, graph, "entities", "entity") + _graph_items(path, graph, "relations", "relation")
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise BadImportInput(path, f"not a JSON object: {exc}", number) from None
        except RecursionError:  # the decoder's guard against deep nesting; no graph nests so
            raise BadImportInput(path, "JSON nested too deeply", number) from None
        if not isinstance(item, dict):
            raise BadImportInput(path, "not a JSON object", number)
        items.append((number, item))
    return items


def _graph_items(path: Path, graph: dict[str, Any], key: str, kind: str) -> list[tuple[int, dict[str, Any]]]:
    """A `read_graph` answer's `entities` or `relations`: a list of objects, each typed `kind`."""
    items = graph.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise BadImportInput(path, f"{key!r} is not a list of JSON objects", 1)
    return [(1, {**i, "type": kind}) for i in items]


def _add_entity(path: Path, number: int, item: dict[str, Any], entities: dict[str, Entity]) -> None:
    name, kind, observations = item.get("name"), item.get("entityType") or "", item.get("observations") or []
    if not isinstance(name, str) or not name.strip():
        raise BadImportInput(path, "an entity without a name", number)
    if not isinstance(kind, str) or not isinstance(observations, list) \
            or not all(isinstance(o, str) for o in observations):
        raise BadImportInput(path, f"entity {name!r}: entityType must be text and observations a list of text", number)
    entity = entities.setdefault(name, Entity(name, kind, number))
    entity.observations += [o.strip() for o in observations if o.strip() and o.strip() not in entity.observations]


def _draft(path: Path, entity: Entity, relations: list[tuple[str, str, str]]) -> Draft | None:
    linked = [f"{a} {verb} {b}" for a, verb, b in relations if entity.name in (a, b)]
    if not entity.observations and not linked:
        return None
    lines = [f"{entity.name} ({entity.kind})" if entity.kind else entity.name, *(f"- {o}" for o in entity.observations)]
    if linked:
        lines += ["Relations:", *(f"- {r}" for r in linked)]
    about_user = entity.name in USER_ENTITIES or entity.kind.lower() in USER_TYPES
    # `entities:<slug>`; a name with no a-z0-9 letters (another script) gets a short hash
    level = slug(entity.name) or "e-" + hashlib.sha1(entity.name.encode()).hexdigest()[:10]
    return Draft(content="\n".join(lines), scopes=(f"entities:{level}", SOURCE_SCOPE),
                 origin=f"{path.name}:{entity.line}", category="user-inference" if about_user else "fact",
                 source="inferred")

