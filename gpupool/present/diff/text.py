"""`gpupool diff -o text`: the diff for terminals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpupool.analysis.diff import SpecDiff
from gpupool.present.diff.configs import config_title, object_lines, plugin_lines
from gpupool.present.diff.headroom import HEADROOM_HEADERS, headroom_rows
from gpupool.present.diff.nodes import mig_lines, pool_lines, slice_maps
from gpupool.present.diff.queues import queue_rows
from gpupool.present.diff.tenants import stack_lines, tenant_rows
from gpupool.present.diff.verdict import alert_lines, context_lines, no_changes, summary_line, unknown_lines, verdict
from gpupool.present.diff.words import counted
from gpupool.present.tables import text_table
from gpupool.present.text import safe

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side


def format_text(base: Side, head: Side, d: SpecDiff, ok: bool) -> str:
    lines = [
        f"gpupool diff: {base.label} → {head.label}",
        verdict(base, head, d, ok),
        "Plan: " + summary_line(d),
        *context_lines(base, head, d),
    ]
    # The errors themselves are the FILE:LINE:COL lines on stderr (as `gpupool validate` prints them).
    for side in (head, base):
        if side.exists and not side.valid:
            lines.append(f"{side.name} errors: the {counted(side.errors, 'FILE:LINE:COL line')} on stderr")
    lines.append("")

    def section(title: str, body: list[str]) -> None:
        if body:
            lines.extend([title, *[f"  {b}" for b in body], ""])

    section("Alerts", [f"⚠ {title}: {what}" for title, what in alert_lines(d, names=30)])
    section("Not compared", unknown_lines(d))
    section("Tenants", [f"{r.marker} {r.text}" for r in tenant_rows(d)])
    section("Pulumi stacks (sharding)", stack_lines(d))
    rows = headroom_rows(d)
    if rows:
        lines.append("Headroom (allowed by the oversubscription policy minus granted), before → after")
        lines.extend("  " + line for line in text_table(HEADROOM_HEADERS, rows).splitlines())
        lines.append("")
    section("Queues (Kueue)", [f"{r.marker} {r.text}" for r in queue_rows(d.queues)])
    section("Pools", pool_lines(d))
    section(
        "MIG layout changes", [x for sentence, detail in mig_lines(d) for x in [sentence, *(f"  {y}" for y in detail)]]
    )
    for c in d.evicting:
        section(f"MIG slices, pool {c.pool}", slice_maps(c))
    section("Device-plugin config", [t if m == "!" else f"{m} {t}" for m, t in plugin_lines(d)])
    for cfg in d.configs:
        section(f"{config_title(cfg)}", cfg.unified.rstrip("\n").splitlines())
    section("Rendered objects (gpupool render)", [f"{m} {t}" for m, t in object_lines(d)])
    nothing = no_changes(head, d)
    if nothing:
        lines.append(nothing[0].lower() + nothing[1:].rstrip("."))
    # Every line may hold text from a spec: no escape sequence, carriage return or newline of it gets through.
    return "\n".join(safe(line) for line in lines).rstrip("\n") + "\n"
