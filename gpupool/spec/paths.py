"""Render a path inside the spec the way a person would point at it.

("tenants", 3, "gpus", "nvidia.com/gpu") becomes tenants[team-a].gpus["nvidia.com/gpu"] when the data
is at hand (list items are named by their `name`), else tenants[3].gpus["nvidia.com/gpu"].

A path shows text from the file only when that text was not refused and is harmless: a list item is named
by its `name` only when the schema accepted that name and it is plain (letters, digits, `-_.`, at most 63
characters: a tenant name, an env variable), and a mapping key only when the schema accepted it and it is
plain (letters, digits and `-_./+`, at most 253 characters). Any other key is named
by its position, counted from 0 like list items: tenants[team-a].gpus[key 2] is the third key of that
mapping. Tenant files are untrusted input, and a path ends up in terminals and pull-request comments.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_SHOWN_KEY = re.compile(r"^(\$?[A-Za-z0-9_][-A-Za-z0-9_./+]{0,252}|<<)$")  # << is YAML's merge key
_SHOWN_NAME = re.compile(r"^[A-Za-z0-9_]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9_])?$")


def shown_key(key: Any) -> bool:
    """Whether a mapping key may appear as text in a path (else it is named by its position)."""
    return isinstance(key, str) and _SHOWN_KEY.match(key) is not None


def shown_name(name: Any) -> bool:
    """Whether a list item's `name` may name it in a path (else it is named by its index)."""
    return isinstance(name, str) and _SHOWN_NAME.match(name) is not None


def key_position(key: Any, node: Any) -> str:
    """`[key N]`: the key's position in its mapping (`[key ?]` when the mapping is not at hand)."""
    if isinstance(node, dict):
        for i, k in enumerate(node):
            if k == key:
                return f"[key {i}]"
    return "[key ?]"


def render_path(
    path: tuple,
    data: Any = None,
    refused: Collection[tuple] = (),
    positions: Mapping[tuple, int] | None = None,
    unnamed: Collection[tuple] = (),
) -> str:
    """`refused`: paths of keys the schema or the loader refused, named by their position; `unnamed`: paths of
    list items whose `name` the schema refused, named by their index. `positions`:
    the position of a key when `data` is not at hand yet (the loader, while it builds the data)."""
    out: list[str] = []
    node = data
    for depth, part in enumerate(path):
        if isinstance(part, int):
            name = None
            if isinstance(node, list) and 0 <= part < len(node):
                item = node[part]
                if isinstance(item, dict) and shown_name(item.get("name")) and path[: depth + 1] not in unnamed:
                    name = item["name"]
                node = item
            else:
                node = None
            out.append(f"[{name if name is not None else part}]")
            continue
        key = str(part)
        if not shown_key(key) or path[: depth + 1] in refused:
            where = positions.get(path[: depth + 1]) if positions is not None else None
            out.append(f"[key {where}]" if where is not None else key_position(part, node))
        else:
            out.append(f".{key}" if _PLAIN_KEY.match(key) else f'["{key}"]')
        node = node.get(part) if isinstance(node, dict) else None
    text = "".join(out)
    return text[1:] if text.startswith(".") else text
