"""`gpupool shards` as text: one row per stack, then the moves a run would make."""

from __future__ import annotations

from typing import Any

from gpupool.present.tables import text_table
from gpupool.present.text import safe

_SHOWN = 6  # tenant names shown per stack; the rest are counted


def _names(names: list[str]) -> str:
    names = [safe(n) for n in names]  # names come from files and --states: shown with control characters escaped
    if len(names) <= _SHOWN:
        return ", ".join(names) or "-"
    return ", ".join(names[:_SHOWN]) + f", ... ({len(names) - _SHOWN} more)"


def table(doc: dict[str, Any], *, with_states: bool) -> str:
    if not doc["tenantShards"] and len(doc["stacks"]) == 1:
        head = f"Not sharded: stack {safe(doc['platformStack'])} holds the platform and every tenant.\n\n"
    else:
        head = (
            f"{doc['tenantShards']} tenant shards: stack {safe(doc['platformStack'])} holds the platform, "
            f"{safe(doc['platformStack'])}.tenants-<k> the tenants.\n\n"
        )
    headers = ["STACK", "ROLE", "TENANTS", "NAMES"]
    if with_states:
        headers[3:3] = ["HELD", "IN", "OUT"]
    rows = []
    for s in doc["stacks"]:
        row = [s["stack"], s["shard"] or "platform", str(len(s["tenants"])), _names(s["tenants"])]
        if with_states:
            row[3:3] = [str(len(s["held"])) if s["exists"] else "new", str(len(s["arriving"])), str(len(s["leaving"]))]
        rows.append(row)
    out = head + text_table(headers, rows, right=(2, 3, 4, 5) if with_states else (2,))
    if with_states:
        moving = [s for s in doc["stacks"] if s["releaseFirst"]]
        if moving:
            out += "\nTenants move: these stacks release theirs first (pass 1), then every stack applies:\n"
            out += "".join(f"  {safe(s['stack'])}: releases {_names(s['leaving'])}\n" for s in moving)
        else:
            out += "\nNo tenant moves between stacks: one pass.\n"
    return out
