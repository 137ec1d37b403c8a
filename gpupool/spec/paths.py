"""Render a path inside the spec the way a person would point at it.

("tenants", 3, "gpus", "nvidia.com/gpu") becomes tenants[team-a].gpus["nvidia.com/gpu"] when the data
is at hand (list items are named by their `name`), else tenants[3].gpus["nvidia.com/gpu"].
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def render_path(path: tuple, data: Any = None) -> str:
    out: list[str] = []
    node = data
    for part in path:
        if isinstance(part, int):
            name = None
            if isinstance(node, list) and 0 <= part < len(node):
                item = node[part]
                if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
                    name = item["name"]
                node = item
            else:
                node = None
            out.append(f"[{name if name is not None else part}]")
        else:
            key = str(part)
            out.append(f".{key}" if _PLAIN_KEY.match(key) else f'["{key}"]')
            node = node.get(part) if isinstance(node, dict) else None
    text = "".join(out)
    return text[1:] if text.startswith(".") else text
