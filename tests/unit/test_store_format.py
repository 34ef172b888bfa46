"""Record frontmatter written as `key: <JSON>` lines reads back exactly — with memoryd's parser and
with a plain YAML loader — and everything outside that subset still goes through YAML."""

from __future__ import annotations

import itertools
import random
import string

import pytest
import yaml

from memoryd import safe_yaml
from memoryd.daemon.identity import idents
from memoryd.daemon.storage import frontmatter, nofollow
from memoryd.errors import InvalidParams


def _front(data: bytes) -> str:
    return data.decode().split("---\n")[1]


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 2 else 4)
    if kind == 0:
        return "".join(rng.choice(string.printable + "\x00\x1b\x7f") for _ in range(rng.randrange(12)))
    if kind == 1:
        return rng.choice([None, True, False, 0, -7, 2**70])
    if kind == 2:
        return rng.choice(["yes", "no", "on", "off", "null", "~", "1e3", "0x1F", "1_000", "007", "2026-01-01",
                           "a: b", "- x", "# c", "&a", "*a", "!tag", "'q'", '"dq"', "back\\slash", "\\/", ""])
    if kind == 3:
        return rng.choice(["/home/jörg/ü", "emoji \U0001f600", "line\u2028sep", "nel\x85", 1.5])
    if kind in (4, 5):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(4))}


def test_random_frontmatters_read_back_exactly_with_both_parsers() -> None:
    rng = random.Random(3)
    for _ in range(500):
        meta = {f"key_{i}": _value(rng) for i in range(rng.randrange(1, 8))}
        try:
            data = frontmatter.render(meta, "body", "content")
        except InvalidParams:
            continue  # a value YAML cannot carry (e.g. NEL): refused, as before
        assert frontmatter.parse(data) == (meta, "body")
        assert yaml.load(_front(data), Loader=safe_yaml.yaml_kit()[1]) == meta


def test_plain_ascii_records_use_json_lines_and_the_rest_yaml() -> None:
    plain = frontmatter.render({"id": "01J00000000000000000000000", "scopes": ["projects:x"], "count": 3}, "b", "c")
    assert _front(plain) == 'id: "01J00000000000000000000000"\nscopes: ["projects:x"]\ncount: 3\n'
    fancy = frontmatter.render({"worktree": "/home/jörg"}, "b", "c")
    assert _front(fancy) == "worktree: /home/jörg\n"


@pytest.mark.parametrize("line", ['a: 1.5', 'a: "x\\/y"', 'a: "\\ud83d\\ude00"', 'a: 0x1F', 'a: yes', '# c',
                                  'a: NaN', 'A: 1', 'a:  "x"'])
def test_lines_json_and_yaml_could_read_differently_go_to_yaml(line: str) -> None:
    assert frontmatter._parse_json_lines(line + "\n") is None or line == 'a:  "x"'
    data = f"---\n{line}\n---\nbody".encode()
    try:
        expected = yaml.load(line + "\n", Loader=safe_yaml.yaml_kit()[1])
    except yaml.YAMLError:
        return
    if isinstance(expected, dict):
        assert frontmatter.parse(data)[0] == expected


@pytest.mark.parametrize("key", ["on", "off", "yes", "no", "true", "false", "null", "y", "n"])
def test_keys_yaml_reads_as_booleans_or_null_are_left_to_yaml(key: str) -> None:
    assert frontmatter._parse_json_lines(f'{key}: "x"\n') is None
    data = frontmatter.render({key: "x"}, "b", "c")
    assert frontmatter.parse(data)[0] == yaml.load(_front(data), Loader=safe_yaml.yaml_kit()[1]) == {key: "x"}


def test_the_memory_cache_row_follows_the_memory_fields_in_order() -> None:
    import dataclasses

    from memoryd.daemon.memories.records import ROW_FIELDS, Memory, RowTables

    assert tuple(f.name for f in dataclasses.fields(Memory) if f.init) == ROW_FIELDS
    memory = Memory("01J00000000000000000000000", "text", ("projects:x",), "fact", "high", "inferred",
                    "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "sess-1", {"repo": "/r"},
                    links=({"type": "extends", "target_id": "01J00000000000000000000001"},), tainted=True,
                    taint=("role-prefix",), removed_at="2026-01-03T00:00:00.000Z", removed_reason="old")
    tables = RowTables()
    row = tables.to_row(memory)
    assert RowTables(tables.scopes, tables.origins).from_row(row) == memory


def test_a_cached_record_shares_its_empty_fields_and_unchanged_stamp() -> None:
    """Through the cache file's bytes, a record's list fields come back as tuples, every empty
    one the shared `()`, and `updated` is the `created` string itself when the two are equal
    (the compaction behind the 100k RSS target)."""
    import dataclasses

    from memoryd.daemon.memories import parse_cache as cache
    from memoryd.daemon.memories.records import Memory

    plain = Memory("01J00000000000000000000000", "text", ("projects:x",), "fact", "high", "inferred",
                   "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", "sess-1", {"repo": "/r"})
    linked = dataclasses.replace(plain, id="01J00000000000000000000002", updated="2026-01-02T00:00:00.000Z",
                              links=({"type": "extends", "target_id": plain.id},), verified_paths=("a.py",))
    raw = cache.encode([(f"m/{m.id}.md", (1, 2), m, "0" * 64) for m in (plain, linked)], "gen")
    rows, tables, gen = cache.read(raw)
    back = {m.id: m for m in (tables.from_row(row[4:]) for row in rows.values())}
    assert back == {plain.id: plain, linked.id: linked} and gen == "gen"
    loaded = back[plain.id]
    shared = ()  # the one empty tuple
    fields = (loaded.links, loaded.taint, loaded.verified_paths, loaded.verified_commits)
    assert all(field is shared for field in fields)
    assert loaded.updated is loaded.created
    assert back[linked.id].links == ({"type": "extends", "target_id": plain.id},)
    assert back[linked.id].verified_paths == ("a.py",) and back[linked.id].updated != back[linked.id].created


def test_all_ulids_checks_every_id_in_one_call_exactly_as_is_ulid() -> None:
    from memoryd.daemon.identity.idents import all_ulids, is_ulid

    good = "01K00000000000000000000000"
    cases = [[], [good], [good, good.replace("0", "Z")], [good, "x"], [good[:-1] + "U"],
             [good + "\n" + good], [good + "\n" + good, ""], [good, good + "0"], [good[:25]]]
    for ids in cases:
        assert all_ulids(ids) == all(is_ulid(i) for i in ids), ids


def test_minted_ulids_are_what_python_ulid_reads() -> None:
    """Ids are minted by `idents.mint_ulid`; python-ulid, an independent implementation, must read
    each back with the same millisecond, and ids of later milliseconds must sort after."""
    from ulid import ULID

    rng = random.Random(11)
    minted = []
    for _ in range(2000):
        when = rng.uniform(0, 2**47 / 1000)
        text = idents.mint_ulid(when)
        assert idents.is_ulid(text)
        assert ULID.from_str(text).milliseconds == int(when * 1000)
        minted.append((int(when * 1000), text))
    minted.sort()
    assert all(a[1] < b[1] for a, b in itertools.pairwise(minted) if a[0] < b[0])
    assert len({text for _, text in minted}) == len(minted)


def test_a_read_falls_back_without_o_noatime_where_the_kernel_refuses_it(tmp_path, monkeypatch) -> None:
    """O_NOATIME is only for the files' owner (EPERM otherwise): the read then goes on without
    it, and later reads do not ask again."""
    path = tmp_path / "record.md"
    path.write_bytes(b"body")
    real_open, refused = nofollow.os.open, []

    def fussy_open(name, flags, *args):  # type: ignore[no-untyped-def]
        if flags & getattr(nofollow.os, "O_NOATIME", 0):
            refused.append(name)
            raise PermissionError(1, "Operation not permitted", name)
        return real_open(name, flags, *args)

    monkeypatch.setattr(nofollow, "_noatime", getattr(nofollow.os, "O_NOATIME", 0))
    monkeypatch.setattr(nofollow.os, "open", fussy_open)
    assert nofollow.read_nofollow(path) == b"body"
    assert nofollow.read_nofollow(path) == b"body"
    assert nofollow._noatime == 0 and len(refused) == (1 if hasattr(nofollow.os, "O_NOATIME") else 0)
