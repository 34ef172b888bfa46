"""The one tool catalogue: every tier's `TOOLS`, joined. The bridge, the docs and the tests read it
through the daemon's `tools` op, so nothing is listed twice."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memoryd.daemon.episodes import tools as episode_tools
from memoryd.daemon.memories import tools as memory_tools
from memoryd.daemon.sessions import tools as session_tools
from memoryd.daemon.tool import Tool
from memoryd.instructions import INSTRUCTIONS
from memoryd.profiles import PROFILES

TOOLS: dict[str, Tool] = {tool.name: tool for tier in (episode_tools.TOOLS, memory_tools.TOOLS, session_tools.TOOLS)
                          for tool in tier}

# The `core` profile (the default; `Tool.core`): what an agent calls on its own (docs/tools.md, "Tool profiles").
CORE = tuple(name for name, tool in TOOLS.items() if tool.core)


def listed(profile: str) -> list[Tool]:
    """The tools a bridge lists under `profile`, in catalogue order; any tool stays callable."""
    if profile not in PROFILES:
        raise ValueError(f"unknown tool profile {profile!r}")
    return [tool for tool in TOOLS.values() if profile == "full" or tool.name in CORE]


def payload(profile: str = "full") -> dict[str, Any]:
    return {"tools": [tool.wire() for tool in listed(profile)], "instructions": INSTRUCTIONS}


ETAG = hashlib.sha256(json.dumps(payload(), sort_keys=True).encode()).hexdigest()[:16]
