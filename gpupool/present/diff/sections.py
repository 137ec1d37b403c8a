"""The pull-request comment's collapsible sections, each a list of ranked items the budget may cut."""

from __future__ import annotations

import re

from gpupool.analysis.diff import SpecDiff
from gpupool.present.diff.budget import (
    RANK_CONFIG,
    RANK_HEADROOM,
    RANK_MIG,
    RANK_OBJECT,
    RANK_PREVIEW,
    RANK_QUOTA,
    RANK_TENANT_RISK,
    Item,
    Section,
)
from gpupool.present.diff.configs import config_title, object_lines, plugin_lines
from gpupool.present.diff.headroom import HEADROOM_HEADERS, headroom_rows, mermaid_headroom
from gpupool.present.diff.nodes import mig_lines, pool_lines, slice_maps
from gpupool.present.diff.queues import queue_rows
from gpupool.present.diff.tenants import stack_lines, tenant_rows
from gpupool.present.diff.verdict import summary_line_queues
from gpupool.present.diff.words import counted, counts_text
from gpupool.present.markdown import fenced, inline
from gpupool.present.tables import md_table
from gpupool.present.text import safe

MD_MARK = {"+": "**added**", "-": "**removed**", "~": "**changed**", "⚠": "⚠", "!": "note:"}


def _tenants(d: SpecDiff) -> Section | None:
    rows = tenant_rows(d, group=True)
    if not rows:
        return None
    s = d.summary()
    counts = [
        (s["tenantsOnboarded"], "onboarded"),
        (s["tenantsChanged"], "changed"),
        (s["tenantsOffboarded"], "offboarded"),
        (s["tenantsRemoved"], "removed"),
    ]
    return Section(
        "tenant rows",
        "Tenants: " + counts_text(counts),
        [Item(f"| {r.marker} | {r.md()} |", r.rank) for r in rows],
        head="|  | TENANT CHANGE |\n|---|---|\n",
        open=len(rows) <= 20,
    )


def _stacks(d: SpecDiff) -> Section | None:
    lines = stack_lines(d)
    if not lines:
        return None
    return Section(
        "stack moves",
        f"Pulumi stacks: {counted(len(d.stack_moves), 'tenant')} move between stacks",
        [Item(f"- {inline(line)}", RANK_TENANT_RISK) for line in lines],
        open=len(lines) <= 20,
    )


def _headroom(d: SpecDiff) -> Section | None:
    cells = headroom_rows(d)
    if not cells:
        return None
    table = md_table(HEADROOM_HEADERS, cells, (1, 2, 3, 4))
    chart = mermaid_headroom(d)
    lines = table.rstrip("\n").split("\n")
    return Section(
        "resources",
        f"Headroom (allowed by the oversubscription policy minus granted): {counted(len(cells), 'resource')} change",
        [Item(r, RANK_HEADROOM) for r in lines[2:]],
        head="\n".join(lines[:2]) + "\n",
        tail=("\n" + fenced(chart, "mermaid")) if chart else "",
        open=True,
    )


def _queues(d: SpecDiff) -> Section | None:
    rows = queue_rows(d.queues)
    if not rows:
        return None
    return Section(
        "queue rows",
        "Queues (Kueue): " + (summary_line_queues(d) or "changes"),
        [Item(f"| {r.marker} | {inline(r.text)} |", RANK_TENANT_RISK if r.risky else RANK_QUOTA) for r in rows],
        head="|  | QUEUE CHANGE |\n|---|---|\n",
        open=len(rows) <= 20,
    )


def _pools(d: SpecDiff) -> Section | None:
    lines = pool_lines(d)
    if not lines:
        return None
    return Section(
        "pool items",
        f"Pools: {counted(len({p.pool for p in d.pools} | {c.pool for c in d.cutovers}), 'pool')} change "
        "(nodes joining or leaving, allocation)",
        [Item(f"- {MD_MARK[x[0]]} {inline(x[2:])}", RANK_MIG) for x in lines],
        open=True,
    )


def _mig(d: SpecDiff) -> Section | None:
    lines = mig_lines(d)
    if not lines:
        return None
    items = [
        Item(f"- **{inline(sentence)}**" + "".join(f"\n  - {inline(x)}" for x in detail), RANK_MIG)
        for sentence, detail in lines
    ]
    items += [
        Item(
            f"**pool {inline(c.pool)}**, MIG slices per GPU (which profile holds which memory slices):\n\n"
            + fenced("\n".join(slice_maps(c))),
            RANK_MIG,
        )
        for c in d.evicting
    ]
    summary = f"MIG layout changes: {counted(len(d.evicting), 'pool')} re-laid out"
    return Section("MIG items", summary, items, sep="\n\n", open=True)


def _configs(d: SpecDiff) -> Section | None:
    lines = plugin_lines(d)
    if not lines and not d.configs:
        return None
    items = [Item(f"- {MD_MARK.get(m, m)} {inline(t)}", RANK_CONFIG) for m, t in lines]
    items += [Item(f"{inline(config_title(c))}\n\n" + fenced(c.unified, "diff"), RANK_CONFIG) for c in d.configs]
    summary = (
        f"Config changes: {counted(len(d.configs), 'config entry', 'config entries')} (MIG Manager, device plugin)"
    )
    return Section("config items", summary, items, sep="\n\n")


def _objects(d: SpecDiff) -> Section | None:
    lines = object_lines(d, md=True)
    if not lines:
        return None
    return Section(
        "objects",
        f"Rendered objects: {counted(len(lines), 'object')} change",
        [Item(f"- {MD_MARK.get(m, m)} {t}", RANK_OBJECT) for m, t in lines],
    )


_PREVIEW_SUMMARY = re.compile(r"^\s*Resources:\s*$")


def _preview(preview: str) -> Section:
    """`pulumi preview --diff` in a diff fence; its closing `Resources:` summary is never cut."""
    lines = preview.rstrip("\n").split("\n")
    at = next((i for i in range(len(lines) - 1, -1, -1) if _PREVIEW_SUMMARY.match(lines[i])), len(lines))
    body, summary = lines[:at], lines[at:]
    fence = "`" * (max((len(r) for r in re.findall(r"`{3,}", preview)), default=2) + 1)
    tail = ("\n".join(safe(x) for x in summary) + "\n" if summary else "") + f"{fence}\n"
    return Section(
        "preview lines",
        "pulumi preview --diff",
        [Item(safe(x), RANK_PREVIEW) for x in body],
        head=f"{fence}diff\n",
        tail=tail,
    )


def sections(d: SpecDiff, preview: str | None) -> list[Section]:
    """Every section with something in it, in the comment's order; the preview last."""
    built = [make(d) for make in (_tenants, _stacks, _headroom, _queues, _pools, _mig, _configs, _objects)]
    out = [s for s in built if s is not None]
    if preview is not None:
        out.append(_preview(preview))
    return out
