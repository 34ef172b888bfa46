"""Short ids (daemon/memories/shortids.py): the ULID's random tail, lengthened where two share it."""

from __future__ import annotations

from memoryd.daemon.identity.idents import mint_ulid
from memoryd.daemon.memories.shortids import ShortIds, is_short_id


def test_a_short_id_is_m_and_the_ulids_last_eight_characters_lowercased() -> None:
    memory_id = mint_ulid(1_700_000_000)
    ids = ShortIds({memory_id: None}, {})
    assert ids.short(memory_id) == "m" + memory_id[-8:].lower()
    assert ids.resolve(ids.short(memory_id)) == [memory_id] == ids.resolve(ids.short(memory_id).upper())
    assert is_short_id(ids.short(memory_id)) and not is_short_id(memory_id)


def test_100k_ids_minted_within_one_minute_get_short_ids_of_at_most_ten_characters_all_distinct() -> None:
    live = {mint_ulid(1_700_000_000 + i / 2000): None for i in range(100_000)}
    ids = ShortIds(live, {})
    shorts = [ids.short(i) for i in live]
    assert len(set(shorts)) == len(live) and max(map(len, shorts)) <= 10


def test_two_ids_sharing_a_tail_show_nine_characters_and_eight_name_both() -> None:
    a, b = "01HZX000000000000" + "0ABCDEFGH", "01HZY000000000000" + "1ABCDEFGH"
    ids = ShortIds({a: None}, {b: None})  # one live, one removed: the store's ids are both tables
    assert (ids.short(a), ids.short(b)) == ("m0abcdefgh", "m1abcdefgh")
    assert ids.resolve("mabcdefgh") == [a, b]  # an 8-character one shown before the second came names both
    assert ids.resolve("m0abcdefgh") == [a] and ids.resolve("m1abcdefgh") == [b]


def test_the_table_follows_writes() -> None:
    live: dict[str, None] = {}
    ids = ShortIds(live, {})
    a = "01HZX000000000000" + "0ABCDEFGH"
    live[a] = None
    assert ids.short(a) == "mabcdefgh"
    live["01HZY000000000000" + "1ABCDEFGH"] = None  # a sync brings in one with the same tail
    assert ids.short(a) == "m0abcdefgh"
