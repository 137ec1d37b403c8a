"""Headroom per changed resource: table rows (text and markdown) and the markdown's Mermaid chart."""

from __future__ import annotations

import json

from gpupool.analysis.diff import Headroom, SpecDiff
from gpupool.present.markdown import mermaid_text

HEADROOM_HEADERS = ["RESOURCE", "CAPACITY", "ALLOWED", "GRANTED", "HEADROOM"]


def headroom_rows(d: SpecDiff) -> list[list[str]]:
    """Per changed resource: physical capacity, what the oversubscription policy allows, granted, headroom
    (= allowed - granted), before → after."""

    def n(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"

    rows = []
    for h in d.headroom:
        if not h.changed:
            continue
        flag = " ⚠ OVER" if h.headroom_after is not None and h.headroom_after < 0 else ""
        kept = f" (incl. {h.retained_after:,} retained)" if h.retained_after else ""
        rows.append(
            [
                h.resource,
                f"{n(h.capacity_before)} → {n(h.capacity_after)}",
                f"{n(h.allowed_before)} → {n(h.allowed_after)}",
                f"{n(h.granted_before)} → {n(h.granted_after)}{kept}",
                f"{n(h.headroom_before)} → {n(h.headroom_after)}{flag}",
            ]
        )
    return rows


MAX_CHART_RESOURCES = 16


# Per resource after the change, three bars from zero drawn over each other (mermaid draws a category's bars
# at one place, later series on top): red = granted, light = allowed by the policy on top of it, dark = the
# granted part within allowed on top of both. So dark is granted, light is free, and red shows only where more
# is granted than allowed. Every bar is a quantity that starts at zero: no bar length stands for a negative
# number. The numbers are in the category labels, because mermaid's own data labels repeat the first series'
# values on every series (mermaid 11.17.2). The value axis has no tick labels: mermaid starts every bar at the
# plot's edge but maps values onto a range inset by half that label width, so with them every bar was ~12
# pixels too long and 0 a stub like a short bar (barPlot.ts; BaseAxis.getRange).
_CHART_COLORS = "#C62828, #BFD3EA, #1F4E8C"


def _chart_label(h: Headroom) -> str:
    name = h.resource.removeprefix("nvidia.com/")
    granted, allowed, room = h.granted_after or 0, h.allowed_after or 0, h.headroom_after
    state = (
        "removed" if room is None else f"{-room:,} OVER" if room < 0 else "now FULL" if room == 0 else f"{room:,} free"
    )
    was = "" if h.headroom_before is None else f", was {h.headroom_before:,}"
    return f"{name}: {granted:,} of {allowed:,} ({state}{was})"


def mermaid_headroom(d: SpecDiff) -> str | None:
    """Granted within allowed per resource after the change, as a Mermaid xychart; None when no
    resource's headroom changes."""
    changed = [h for h in d.headroom if h.changed][:MAX_CHART_RESOURCES]
    if not changed:
        return None
    granted = [max(0, h.granted_after or 0) for h in changed]
    allowed = [max(0, h.allowed_after or 0) for h in changed]
    top = max([1, *granted, *allowed])
    top += max(1, top // 10)
    within = [min(g, a) for g, a in zip(granted, allowed)]
    title = "After: granted (dark) within allowed (light); red: granted beyond allowed"
    init = json.dumps(
        {
            "xyChart": {"yAxis": {"showLabel": False}},
            "themeVariables": {"xyChart": {"plotColorPalette": _CHART_COLORS}},
        }
    )

    def nums(xs: list[int]) -> str:
        return ", ".join(map(str, xs))

    return (
        f"%%{{init: {init}}}%%\n"
        "xychart-beta horizontal\n"
        f"    title {json.dumps(title)}\n"
        f"    x-axis [{', '.join(json.dumps(mermaid_text(_chart_label(h)), ensure_ascii=False) for h in changed)}]\n"
        f'    y-axis "units" 0 --> {top}\n'
        f"    bar [{nums(granted)}]\n"
        f"    bar [{nums(allowed)}]\n"
        f"    bar [{nums(within)}]\n"
    )
