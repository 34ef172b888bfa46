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


def _collect() -> dict[str, Tool]:
    tiers = [episode_tools.TOOLS, memory_tools.TOOLS, session_tools.TOOLS]
    return {tool.name: tool for tier in tiers for tool in tier}


TOOLS: dict[str, Tool] = _collect()


def payload() -> dict[str, Any]:
    return {"tools": [tool.wire() for tool in TOOLS.values()], "instructions": INSTRUCTIONS}


ETAG = hashlib.sha256(json.dumps(payload(), sort_keys=True).encode()).hexdigest()[:16]
