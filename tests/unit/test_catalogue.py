"""A tool is one declaration (daemon/tool.py): its profile and its replay ride on it, and the
catalogue, the profiles and the replay path are derived from the declarations."""

from __future__ import annotations

from memoryd.daemon import catalogue


def test_the_core_profile_is_the_tools_declared_core_in_catalogue_order() -> None:
    assert set(catalogue.CORE) == {
        "episode_handoff", "episode_write", "episode_promote", "memory_session_finish", "memory_write",
        "memory_write_confirm", "memory_write_cancel", "memory_search", "memory_show", "memory_digest"}
    assert [t.name for t in catalogue.listed("core")] == [n for n in catalogue.TOOLS if n in catalogue.CORE]
    assert [t.name for t in catalogue.listed("full")] == list(catalogue.TOOLS)


def test_every_write_a_restart_could_repeat_declares_its_replay_and_no_read_does() -> None:
    replayed = {name for name, tool in catalogue.TOOLS.items() if tool.replay is not None}
    assert replayed == {"episode_write", "memory_write", "memory_write_confirm", "episode_promote",
                        "memory_update", "memory_remove", "memory_restore", "memory_verify"}
    assert not [name for name in replayed if catalogue.TOOLS[name].read_only]


def test_every_declared_tool_has_a_handler_and_a_closed_object_schema() -> None:
    for name, tool in catalogue.TOOLS.items():
        schema = tool.input_schema
        assert callable(tool.handler), name
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert set(tool.required) <= set(schema["properties"]), name
