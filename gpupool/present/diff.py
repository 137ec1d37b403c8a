"""`gpupool diff` output: text (terminals), markdown (the pull-request comment), json (docs/diff-json.md).

The markdown is built to always post: the verdict and a terraform-style summary line first, then (for an
invalid side) its errors and the alerts, then the details in collapsed sections. With a limit, the assembled
text plus the sticky-comment marker is measured and the least important items are cut until it fits
(`RANK_*`: objects and preview lines go first, headroom rows last), each cut counted; `format_markdown(...,
limit=None)` gives the full, uncut comment (written with `--full-output`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from gpupool.present.numbers import signed
from gpupool.present.tables import md_table, text_table

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side

MAX_FIELDS = 8  # field-level changes shown per object before "... N more"
EVICTS = "⚠ EVICTS GPU WORKLOADS"
GITHUB_COMMENT_LIMIT = 65_536  # characters GitHub accepts in one comment body
MAX_ERRORS_SHOWN = 40  # in the markdown; the full diff and `gpupool validate` have them all
MAX_WARNINGS_SHOWN = 20
MAX_CHART_RESOURCES = 16
JSON_SCHEMA_VERSION = 2


# -- sentences shared by text and markdown --------------------------------------------------------


def _value(v) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, str) and "\n" in v:
        return f"<{len(v.splitlines())} lines>"
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _quota_text(t) -> str:
    return ", ".join(
        f"{q.resource} {q.before} → {q.after} ({signed(q.delta)})"
        if t.kind == "changed"
        else f"{q.resource} {q.after if t.kind == 'added' else q.before}"
        for q in t.quotas
    )


def _tenant_lines(d) -> list[tuple[str, str]]:
    """(marker, sentence) per tenant change; marker is +, -, ~ or ⚠."""
    out = []
    for t in d.tenants:
        cc = f", cost centre {t.cost_center}" if t.cost_center else ""
        if t.kind == "added":
            grants = _quota_text(t) or "no GPU quota"
            stack = f", stack {t.stack}" if t.stack else ""
            out.append(("+", f"{t.name} onboarded (tier {t.tier}{cc}{stack}): {grants}"))
        elif t.kind == "removed" and t.namespace == "deleted":
            out.append(("-", f"{t.name} removed (was offboarded): namespace {t.name} and everything in it is DELETED"))
        elif t.kind == "removed":
            kept = ""
            if t.retained_objects and not t.deleted_objects:
                kept = (
                    " Its quotas, limit range and role binding are retained too, frozen as last applied"
                    + (
                        f" (still admitting {_quota_text(t)}, which no longer counts against capacity)"
                        if t.quotas
                        else ""
                    )
                    + "."
                )
            elif t.deleted_objects:
                kept = (
                    f" Pulumi deletes its other objects ({', '.join(t.deleted_objects)}), so nothing limits "
                    "its GPU use."
                )
            out.append(
                (
                    "⚠",
                    f"{t.name} removed without being offboarded: namespace {t.name} is RETAINED (not "
                    f"deleted) and is no longer managed by gpupool.{kept} To delete it, mark the tenant "
                    "`offboarded: true` first, apply, then remove it",
                )
            )
        else:
            parts = ([_quota_text(t)] if t.quotas else []) + list(t.details)
            out.append(("~", f"{t.name}: " + "; ".join(parts)))
    return out


def _unknown_lines(d) -> list[str]:
    out = []
    for u in d.unknown:
        if u.section == "tenant":
            word = "UNREADABLE" if "could not be read" in u.reason or "unreadable" in u.reason else "INVALID"
            why = "" if u.reason == f"invalid in {u.side}" else f" ({u.reason})"
            what = f"tenant {u.name} is {word} in {u.side}{why}"
        elif u.section == "oversubscription":
            what = f"the oversubscription policy is invalid in {u.side}"
        else:
            why = "" if u.reason == f"invalid in {u.side}" else f" ({u.reason})"
            what = f"{u.section} {u.name} is INVALID in {u.side}{why}"
        out.append(f"{what}: compared as {'BASE' if u.side == 'HEAD' else 'HEAD'} has it, so no change is shown")
    return out


def _mig_lines(d) -> list[str]:
    out = []
    for c in d.mig:
        if c.nodes:
            where = f"node{'s' if len(c.nodes) != 1 else ''} {', '.join(c.nodes)}"
        else:
            sel = ", ".join(f"{k}={v}" for k, v in c.node_selector.items())
            where = f"every node matching {sel} ({c.node_count} expected)"
        what = {
            "changed": f"{c.layout_before} → {c.layout_after}",
            "added": f"new MIG pool: {c.layout_after}",
            "nodes-added": f"nodes join the pool: {c.layout_after}",
        }[c.kind]
        cfg = f"mig.config {c.config_before or '(none)'} → {c.config_after}"
        reboot = "; nodes REBOOT (migRebootOnReconfigure)" if c.reboot else ""
        out.append(
            f"{EVICTS} on {where} (pool {c.pool}): MIG Manager re-partitions the GPUs ({what}; {cfg}) "
            f"and evicts every GPU workload there first{reboot}"
        )
        if c.waves:
            cordon = "cordoned, " if c.cordon else ""
            out.append(
                f"  rollout: {c.at_once} node{'s' if c.at_once != 1 else ''} unavailable at once "
                f"({cordon}each waits for nvidia.com/mig.config.state=success, at most "
                f"{c.node_timeout_seconds}s; a failed node stops the rollout): "
                + " → ".join(", ".join(w) for w in c.waves)
            )
        if c.new_nodes:
            out.append(
                f"  new node{'s' if len(c.new_nodes) != 1 else ''} {', '.join(c.new_nodes)}: labelled at once, "
                "no wait (no workloads yet)"
            )
        if not c.nodes:
            out.append(
                "  rollout: gpupool cannot name these nodes; the node-group tooling must roll them "
                "(cordon, relabel, wait for success, uncordon; see gpupool's docs/design.md)"
            )
    return out


def _plugin_lines(d) -> list[tuple[str, str]]:
    out = []
    for c in d.plugin:
        if c.kind == "changed":
            if c.sharing_before != c.sharing_after:
                rep = f"{c.sharing_before} ×{c.replicas_before} → {c.sharing_after} ×{c.replicas_after}"
            elif c.replicas_before != c.replicas_after:
                rep = f"{c.sharing_before} replicas {c.replicas_before} → {c.replicas_after}"
            else:
                rep = "settings changed"
            out.append(("~", f"key {c.key}: {rep} (pools: {', '.join(c.pools_after) or '-'})"))
        elif c.kind == "added":
            out.append(
                (
                    "+",
                    f"key {c.key}: {c.sharing_after} replicas {c.replicas_after} "
                    f"(pools: {', '.join(c.pools_after) or '-'})",
                )
            )
        else:
            out.append(
                (
                    "-",
                    f"key {c.key}: was {c.sharing_before} replicas {c.replicas_before} "
                    f"(pools: {', '.join(c.pools_before) or '-'})",
                )
            )
    for pool, kb, ka in d.pool_plugin_keys:
        out.append(("~", f"pool {pool}: nvidia.com/device-plugin.config {kb} → {ka}"))
    if out:
        out.append(
            (
                "!",
                "the device plugin and GFD restart on every GPU node (config hash); running pods keep "
                "their GPUs, advertised capacity changes",
            )
        )
    return out


def _object_lines(d, md: bool = False) -> list[tuple[str, str]]:
    out = []
    code = _code if md else (lambda s: s)
    for o in d.objects:
        what = f"{o.object_kind} {o.object_name}"
        what = _md_escape(what) if md else what
        if o.kind == "added":
            out.append(("+", f"{code(o.file)} ({what})"))
        elif o.kind == "removed":
            note = " — retained in the cluster (retainOnDelete), no longer managed" if o.retained else ""
            out.append(("-", f"{code(o.file)} ({what}){note}"))
        else:
            shown = [
                f"{code(f.path)}: {code(_value(f.before)) if md else _value(f.before)} → "
                f"{code(_value(f.after)) if md else _value(f.after)}"
                for f in o.fields[:MAX_FIELDS]
            ]
            more = len(o.fields) - MAX_FIELDS
            if more > 0:
                shown.append(f"… {more} more")
            out.append(("~", f"{code(o.file)} ({what}): " + "; ".join(shown)))
    return out


def _headroom_rows(d) -> list[list[str]]:
    def n(v):
        return "-" if v is None else str(v)

    rows = []
    for h in d.headroom:
        if not h.changed:
            continue
        flag = " ⚠" if h.headroom_after is not None and h.headroom_after < 0 else ""
        rows.append(
            [
                h.resource,
                f"{n(h.capacity_before)} → {n(h.capacity_after)}",
                f"{n(h.granted_before)} → {n(h.granted_after)}",
                f"{n(h.headroom_before)} → {n(h.headroom_after)}{flag}",
            ]
        )
    return rows


_MOVES_SHOWN = 30


def _stack_lines(d) -> list[str]:
    """Sharding changes: the count, and each tenant another Pulumi stack holds after this change."""
    before, after = d.tenant_shards
    if not d.stack_moves and before == after:
        return []
    count = lambda n: f"{n} tenant shards" if n else "not sharded"  # noqa: E731
    out = [f"sharding.tenantShards: {count(before)} → {count(after)}; {_plural(len(d.stack_moves), 'tenant')} move"]
    out += [f"{mv.tenant}: {mv.before} → {mv.after}" for mv in d.stack_moves[:_MOVES_SHOWN]]
    if len(d.stack_moves) > _MOVES_SHOWN:
        out.append(f"... and {len(d.stack_moves) - _MOVES_SHOWN} more (gpupool diff -o json lists them all)")
    if d.stack_moves:
        out.append(
            "⚠ ci/pulumi-stack.sh up moves them in two passes: the stacks they leave release them first, so "
            "their owners' role binding and per-pod maximum are absent until the stack they join creates "
            "them, later in the same run (namespaces and quotas are retained throughout)"
        )
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(d) -> str:
    """`2 tenants to onboard, 1 to change, 0 to offboard, 0 to remove · 14 objects to add, ...` (terraform's
    "Plan: X to add, Y to change, Z to destroy"), with what the reviewer must not miss."""
    s = d.summary()
    parts = [
        f"{_plural(s['tenantsOnboarded'], 'tenant')} to onboard, {s['tenantsChanged']} to change, "
        f"{s['tenantsOffboarded']} to offboard, {s['tenantsRemoved']} to remove"
        + (f" ({s['tenantsUnknown']} not compared: invalid or unreadable)" if s["tenantsUnknown"] else ""),
        f"{_plural(s['objectsToAdd'], 'object')} to add, {s['objectsToChange']} to change, "
        f"{s['objectsToDelete']} to delete" + (f", {s['objectsToRetain']} to retain" if s["objectsToRetain"] else ""),
        f"{_plural(s['poolsRelaidOut'], 'pool')} re-laid out"
        + (" (evicting GPU workloads)" if s["poolsRelaidOut"] else ""),
        f"headroom changes on {_plural(s['headroomChanges'], 'resource')}"
        + (f" ({s['negativeHeadroom']} NEGATIVE)" if s["negativeHeadroom"] else ""),
    ]
    if s["tenantsMovingStack"]:
        parts.append(f"{_plural(s['tenantsMovingStack'], 'tenant')} moving between Pulumi stacks")
    return " · ".join(parts)


def _verdict(base: Side, head: Side, d, ok: bool) -> str:
    """The first words: can this change be applied?"""
    if not head.valid:
        return f"✗ HEAD is INVALID ({_plural(head.errors, 'error')}): this change cannot be applied."
    if not ok:
        return "✗ HEAD leaves negative headroom: this change cannot be applied."
    return "✓ HEAD is valid and every resource keeps non-negative headroom."


def _context_lines(base: Side, head: Side, d) -> list[str]:
    out = []
    if not d.comparable:
        which = [s for s in (base, head) if s.exists and s.spec is None]
        out.append(
            "Nothing was compared: "
            + " and ".join(f"{s.name} ({s.label})" for s in which)
            + " could not be read far enough to build a model; fix the errors first."
        )
    elif not head.valid:
        out.append(
            "The changes below are only what the valid parts of both sides support: anything HEAD could "
            "not read is compared as BASE has it (a tenant counts with its BASE quota)."
        )
    if not base.exists:
        out.append(f"BASE {base.label}: everything in HEAD is new.")
    elif not base.valid:
        out.append(
            f"BASE {base.label} is invalid ({_plural(base.errors, 'error')}); its unreadable parts are "
            "compared as HEAD has them."
        )
    return out


# -- text ------------------------------------------------------------------------------------------


def _slice_maps(c) -> list[str]:
    """Before/after slice maps, one per MIG group (the GPUs of a group share one layout)."""
    from gpupool.gpu.mig import catalog, check_layout
    from gpupool.present.mig import slice_map

    out = []
    for title, model_name, groups in (
        ("before", c.gpu_model_before, c.groups_before),
        ("after", c.gpu_model, c.groups_after),
    ):
        model = catalog().resolve(model_name) if model_name else None
        if not groups or model is None:
            out.append(f"{title}: MIG disabled (whole GPUs)")
            continue
        for gpus, layout in groups:
            fit = check_layout(model, dict(layout))
            ids = ",".join(str(g) for g in gpus)
            out.append(f"{title}: {model.name} GPU {ids}")
            out.extend(slice_map(model, fit.placements).splitlines())
    return out


def format_text(base: Side, head: Side, d, ok: bool) -> str:
    lines = [
        f"gpupool diff: {base.label} → {head.label}",
        _verdict(base, head, d, ok),
        "Plan: " + summary_line(d),
        *_context_lines(base, head, d),
    ]
    # The errors themselves are the FILE:LINE:COL lines on stderr (as `gpupool validate` prints them).
    for side in (head, base):
        if side.exists and not side.valid:
            lines.append(f"{side.name} errors: the {_plural(side.errors, 'FILE:LINE:COL line')} on stderr")
    lines.append("")

    def section(title, body):
        if body:
            lines.extend([title, *[f"  {b}" for b in body], ""])

    section("Not compared", _unknown_lines(d))
    section("Tenants", [f"{m} {s}" for m, s in _tenant_lines(d)])
    section("Pulumi stacks (sharding)", _stack_lines(d))
    rows = _headroom_rows(d)
    if rows:
        lines.append("Headroom (policy-allowed minus granted), before → after")
        lines.extend(
            "  " + line for line in text_table(["RESOURCE", "CAPACITY", "GRANTED", "HEADROOM"], rows).splitlines()
        )
        lines.append("")
    section("MIG layout changes", _mig_lines(d))
    for c in d.mig:
        section(f"MIG slices, pool {c.pool}", _slice_maps(c))
    section("Device-plugin config", [t if m == "!" else f"{m} {t}" for m, t in _plugin_lines(d)])
    for c in d.configs:
        section(f"{_config_title(c)}", c.unified.rstrip("\n").splitlines())
    section("Rendered objects (gpupool render)", [f"{m} {t}" for m, t in _object_lines(d)])
    if d.empty and d.comparable:
        lines.append("no changes")
    return "\n".join(lines).rstrip("\n") + "\n"


def _config_title(c) -> str:
    what = "MIG Manager config" if c.config == "mig" else "device-plugin config"
    return f"pool {c.pool}: {what} {c.name_before or '(none)'} → {c.name_after or '(none)'}"


# -- markdown --------------------------------------------------------------------------------------


def _code(text: str) -> str:
    """Inline code that no content can break out of (backticks in it get a longer fence)."""
    text = str(text).replace("\n", " ")
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fenced(body: str, lang: str = "") -> str:
    longest = max((len(r) for r in re.findall(r"`{3,}", body)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{body.rstrip(chr(10))}\n{fence}\n"


_MD_MARK = {"+": "**added**", "-": "**removed**", "~": "**changed**", "⚠": "⚠", "!": "note:"}


def _md_escape(text: str) -> str:
    """Text from specs is shown as text: no HTML, no links, no mentions, no table breaks."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("@", "@\u200b")
        .replace("[", "\\[")
        .replace("]", "\\]")
    )


# Grey bars = before, blue bars = after, one pair per resource, and a red zero line when a value is negative.
# Mermaid draws a bar from the axis minimum, and two series at one category overlap, so each resource gets
# two categories and each series sits at the axis minimum (a zero-length bar) in the other's slot.
_CHART_COLORS = "#9D9D9D, #4C78A8, #E45756"


def mermaid_headroom(d) -> str | None:
    """Headroom per resource before and after, as a Mermaid xychart; None when no resource's headroom changes."""
    changed = [h for h in d.headroom if h.changed][:MAX_CHART_RESOURCES]
    if not changed:
        return None
    before = [h.headroom_before or 0 for h in changed]
    after = [h.headroom_after or 0 for h in changed]
    lo, hi = min([0, *before, *after]), max([1, *before, *after])
    pad = max(1, (hi - lo) // 10)
    lo = lo - pad if lo < 0 else 0
    labels, series_b, series_a = [], [], []
    for h, b, a in zip(changed, before, after):
        name = h.resource.removeprefix("nvidia.com/")
        labels += [f"{name} before", f"{name} after"]
        series_b += [b, lo]
        series_a += [lo, a]
    zero = lo < 0
    title = "Headroom by resource: grey = before, blue = after" + (", red line = 0" if zero else "")
    init = json.dumps({"themeVariables": {"xyChart": {"plotColorPalette": _CHART_COLORS}}})

    def nums(xs):
        return ", ".join(map(str, xs))

    return (
        f"%%{{init: {init}}}%%\n"
        "xychart-beta horizontal\n"
        f"    title {json.dumps(title)}\n"
        f"    x-axis [{', '.join(json.dumps(x) for x in labels)}]\n"
        f'    y-axis "headroom" {lo} --> {hi + pad}\n'
        f"    bar [{nums(series_b)}]\n"
        f"    bar [{nums(series_a)}]\n" + (f"    line [{nums([0] * len(labels))}]\n" if zero else "")
    )


# What is kept longest when the comment must be cut (lower first). The verdict, the summary line, the errors
# and the alerts are never cut: they are the fixed parts, outside every section.
RANK_HEADROOM = 1
RANK_MIG = 2  # evictions and slice maps
RANK_TENANT_RISK = 3  # access, offboarding, removal, stack moves
RANK_CONFIG = 4
RANK_QUOTA = 5
RANK_METADATA = 6
RANK_OBJECT = 7
RANK_PREVIEW = 8

# marocchino/sticky-pull-request-comment adds "\n<!-- Sticky Pull Request Comment{header} -->" to the body
# (src/comment.ts, headerComment/bodyWithHeader); the header is gpupool-diff-<stack>. Kept free for it.
STICKY_MARKER_MARGIN = 256


def comment_length(text: str) -> int:
    """The length GitHub's limit is checked against, counted so that it can only over-estimate: UTF-16 code
    units (an astral character counts twice), never fewer than characters."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class _Item:
    text: str
    rank: int


@dataclass
class _Section:
    """A collapsible part of the comment whose items can be cut to fit. Items are shown by rank (most
    important first), so cutting from the end of a section cuts its least important items."""

    key: str  # what the cut note calls its items
    summary: str
    items: list[_Item]
    head: str = ""  # fixed text before the items (a table header, an intro)
    tail: str = ""  # fixed text after them (the chart, the preview's summary)
    sep: str = "\n"
    open: bool = False

    def __post_init__(self) -> None:
        self.items = sorted(self.items, key=lambda i: i.rank)  # stable: equal ranks keep their order

    def render(self, kept: int | None = None) -> str:
        shown = self.items if kept is None else self.items[:kept]
        texts = [i.text for i in shown]
        body = self.head + self.sep.join(texts) + ("\n" if texts and not self.sep.endswith("\n\n") else "")
        cut = len(self.items) - len(shown)
        if cut:
            body += f"\n✂ {cut:,} more {self.key} cut to fit the comment limit; see the full diff.\n"
        attr = " open" if self.open else ""
        return f"<details{attr}><summary>{self.summary}</summary>\n\n{body}{self.tail}\n</details>\n"


def _cut_note(sections: list[_Section], kept: list[int], where: str) -> str:
    cut = [(s.key, len(s.items) - k) for s, k in zip(sections, kept) if len(s.items) > k]
    if not cut:
        return ""
    counts = ", ".join(f"{n:,} {key}" for key, n in cut)
    return f"✂ **Cut to fit GitHub's {GITHUB_COMMENT_LIMIT:,}-character comment limit:** {counts}; {where}.\n"


def _assemble(fixed: list[str], sections: list[_Section], kept: list[int], where: str) -> str:
    parts = fixed + [s.render(k) for s, k in zip(sections, kept)]
    note = _cut_note(sections, kept, where)
    return "\n".join(parts + ([note] if note else []))


def _fit(fixed: list[str], sections: list[_Section], budget: int, where: str) -> str | None:
    """The comment with as many items as fit in BUDGET, the least important cut first; None when even the
    fixed parts with every section emptied do not fit."""
    full = [len(s.items) for s in sections]
    text = _assemble(fixed, sections, full, where)
    if comment_length(text) <= budget:
        return text
    # Every item in the order it is cut: highest rank first, and within a rank the later ones first.
    order = sorted(((it.rank, si, ii) for si, s in enumerate(sections) for ii, it in enumerate(s.items)), reverse=True)

    def kept_after(n: int) -> list[int]:
        kept = list(full)
        for _rank, si, ii in order[:n]:
            kept[si] = min(kept[si], ii)
        return kept

    def fits(n: int) -> str | None:
        t = _assemble(fixed, sections, kept_after(n), where)
        return t if comment_length(t) <= budget else None

    if fits(len(order)) is None:
        return None
    # Fewest cuts that fit: length falls with every cut but for the one-off cut notes, so search, then
    # step on until the measured text fits (it does at len(order)).
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    for n in range(lo, len(order) + 1):
        t = fits(n)
        if t is not None:
            return t
    return None  # unreachable: fits(len(order)) held


def _sections(base: Side, head: Side, d, preview: str | None) -> list[_Section]:
    out = []
    tl = _tenant_lines(d)
    if tl:
        rows = [_Item(f"| {m} | {_md_escape(s)} |", RANK_TENANT_RISK) for m, s in tl]
        s = d.summary()
        out.append(
            _Section(
                "tenant changes",
                f"Tenants: {s['tenantsOnboarded']} onboarded, {s['tenantsChanged']} "
                f"changed, {s['tenantsOffboarded']} offboarded, {s['tenantsRemoved']} removed",
                rows,
                head="|  | TENANT CHANGE |\n|---|---|\n",
                open=len(rows) <= 20,
            )
        )
    sl = _stack_lines(d)
    if sl:
        out.append(
            _Section(
                "stack moves",
                f"Pulumi stacks: {_plural(len(d.stack_moves), 'tenant')} move between stacks",
                [_Item(f"- {_md_escape(line)}", RANK_TENANT_RISK) for line in sl],
                open=len(sl) <= 20,
            )
        )
    cells = _headroom_rows(d)
    if cells:
        table = md_table(["RESOURCE", "CAPACITY", "GRANTED", "HEADROOM"], cells, (1, 2, 3))
        chart = mermaid_headroom(d)
        lines = table.rstrip("\n").split("\n")
        out.append(
            _Section(
                "resources",
                f"Headroom (policy-allowed minus granted): {_plural(len(cells), 'resource')} change",
                [_Item(r, RANK_HEADROOM) for r in lines[2:]],
                head="\n".join(lines[:2]) + "\n",
                tail=("\n" + _fenced(chart, "mermaid")) if chart else "",
                open=len(cells) <= 20,
            )
        )
    if d.mig:
        items = [_Item(f"- **{s}**", RANK_MIG) for s in _mig_lines(d)]
        items += [
            _Item(
                f"**pool {_md_escape(c.pool)}**, MIG slices per GPU (which profile holds which memory slices):\n\n"
                + _fenced("\n".join(_slice_maps(c))),
                RANK_MIG,
            )
            for c in d.mig
        ]
        out.append(
            _Section(
                "MIG items",
                f"MIG layout changes: {_plural(len(d.mig), 'pool')} re-laid out",
                items,
                sep="\n\n",
                open=True,
            )
        )
    pl = _plugin_lines(d)
    if pl or d.configs:
        items = [_Item(f"- {_MD_MARK.get(m, m)} {_md_escape(t)}", RANK_CONFIG) for m, t in pl]
        items += [
            _Item(f"{_md_escape(_config_title(c))}\n\n" + _fenced(c.unified, "diff"), RANK_CONFIG) for c in d.configs
        ]
        out.append(
            _Section(
                "config items",
                f"Config changes: {_plural(len(d.configs), 'config entry')} (MIG Manager, device plugin)",
                items,
                sep="\n\n",
            )
        )
    ol = _object_lines(d, md=True)
    if ol:
        out.append(
            _Section(
                "objects",
                f"Rendered objects: {_plural(len(ol), 'object')} change",
                [_Item(f"- {_MD_MARK.get(m, m)} {t}", RANK_OBJECT) for m, t in ol],
            )
        )
    if preview is not None:
        out.append(_preview_section(preview))
    return out


_PREVIEW_SUMMARY = re.compile(r"^\s*Resources:\s*$")


def _preview_section(preview: str) -> _Section:
    """`pulumi preview --diff` in a diff fence; its closing `Resources:` summary is never cut."""
    lines = preview.rstrip("\n").split("\n")
    at = next((i for i in range(len(lines) - 1, -1, -1) if _PREVIEW_SUMMARY.match(lines[i])), len(lines))
    body, summary = lines[:at], lines[at:]
    fence = "`" * (max((len(r) for r in re.findall(r"`{3,}", preview)), default=2) + 1)
    tail = ("\n".join(summary) + "\n" if summary else "") + f"{fence}\n"
    return _Section(
        "preview lines",
        "pulumi preview --diff",
        [_Item(x, RANK_PREVIEW) for x in body],
        head=f"{fence}diff\n",
        tail=tail,
    )


@dataclass(frozen=True)
class _Shown:
    """How much of the fixed parts is shown: all of it uncut, less when even they would not fit."""

    errors: int | None = MAX_ERRORS_SHOWN  # per side; None: all
    warnings: int | None = MAX_WARNINGS_SHOWN


# Tried in turn until the comment fits: fewer errors and alert lines (each says how many more there are).
_SHRINK = (_Shown(), _Shown(10, 10), _Shown(3, 5), _Shown(1, 2), _Shown(0, 0))


def _fixed_parts(base: Side, head: Side, d, ok: bool, shown: _Shown) -> list[str]:
    title = f"## gpupool diff\n\n{_code(base.label)} → {_code(head.label)}\n"
    out = [title, f"**{_verdict(base, head, d, ok)}** Plan: {summary_line(d)}\n"]
    boxes = []
    for side in (head, base):
        if side.valid or not side.exists:
            continue
        errs = side.error_diagnostics
        listed = errs if shown.errors is None else errs[: shown.errors]
        lines = [side.prefix + e.render() for e in listed]
        more = len(errs) - len(listed)
        body = _fenced("\n".join(lines)) if lines else ""
        if more:
            body += f"\n✂ {_plural(more, 'more error')}: see the full diff or run `gpupool validate`.\n"
        if side is head:
            boxes.append(
                "> [!CAUTION]\n> **HEAD is invalid: this change cannot be applied** until these "
                f"{_plural(len(errs), 'error')} are fixed (shown as annotations on the changed "
                "lines in CI).\n\n" + body
            )
        else:
            boxes.append(f"BASE has {_plural(len(errs), 'error')} (compared with the parts that validated):\n\n" + body)
    out.extend(boxes)
    context = _context_lines(base, head, d)
    if context:
        out.append("\n".join(f"- {_md_escape(c)}" for c in context) + "\n")
    unknown = _unknown_lines(d)
    warnings = _mig_lines(d) + [s for m, s in _tenant_lines(d) if m == "⚠"] + unknown
    if warnings:
        listed_w = warnings if shown.warnings is None else warnings[: shown.warnings]
        more = len(warnings) - len(listed_w)
        lines = [f"> - **{_md_escape(s)}**" if s.startswith(EVICTS) else f"> - {_md_escape(s)}" for s in listed_w]
        if more:
            lines.append(f"> - ✂ … and {more} more (see the sections below and the full diff)")
        out.append("> [!WARNING]\n" + "\n".join(lines) + "\n")
    if d.empty and d.comparable:
        out.append("No changes.\n")
    return out


def format_markdown(
    base: Side,
    head: Side,
    d,
    ok: bool,
    *,
    limit: int | None = GITHUB_COMMENT_LIMIT,
    preview: str | None = None,
    full_output: str | None = None,
) -> str:
    """The pull-request comment. With a `limit` (characters) the comment, and the sticky-comment marker the
    workflow's action adds to it, always fit: the least important items are cut first (RANK_*), then
    fewer errors and alert lines are listed; None keeps everything."""
    sections = _sections(base, head, d, preview)
    if limit is None:
        return "\n".join(_fixed_parts(base, head, d, ok, _Shown(None, None)) + [s.render() for s in sections])
    where = (
        f"the full diff is in {_code(full_output)} (uploaded as a workflow artifact)"
        if full_output
        else "run `gpupool diff` with `--full-output FILE` for the full diff"
    )
    budget = limit - STICKY_MARKER_MARGIN if limit > 4 * STICKY_MARKER_MARGIN else limit
    for shown in _SHRINK:
        text = _fit(_fixed_parts(base, head, d, ok, shown), sections, budget, where)
        if text is not None:
            return text
    # Only the verdict and the summary line are left: pathological input (paths of thousands of characters).
    first = _fixed_parts(base, head, d, ok, _SHRINK[-1])[:2]
    note = f"\n✂ Everything else was cut to fit the comment limit; {where}.\n"
    text = "\n".join(first)
    while comment_length(text + note) > budget and text:
        text = text[: max(0, len(text) - max(1, comment_length(text + note) - budget))]
    return text + note if comment_length(text + note) <= budget else note[:budget]


# -- json ------------------------------------------------------------------------------------------


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _camelize(value):
    if isinstance(value, dict):
        return {_camel(k) if isinstance(k, str) else k: _camelize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_camelize(v) for v in value]
    return value


def diagnostic_json(d, prefix: str = "") -> dict:
    loc = d.location
    return {
        "severity": d.severity,
        "rule": d.rule or None,
        "file": prefix + loc.file,
        "line": loc.line,
        "column": loc.column,
        "path": d.path,
        "message": d.message,
    }


def format_json(base: Side, head: Side, d, ok: bool) -> str:
    def side(s: Side) -> dict:
        return {
            "label": s.label,
            "exists": s.exists,
            "valid": s.valid,
            "partial": s.partial,
            "diagnostics": [diagnostic_json(x, s.prefix) for x in s.diagnostics],
        }

    mig = []
    for c in d.mig:
        row = asdict(c)
        for k in ("groups_before", "groups_after"):
            row[k] = [{"gpus": list(g), "layout": dict(layout)} for g, layout in row[k]]
        mig.append(row)
    doc = {
        "schemaVersion": JSON_SCHEMA_VERSION,
        "ok": ok,
        "comparable": d.comparable,
        "empty": d.empty,
        "summary": d.summary(),
        "base": side(base),
        "head": side(head),
        "unknown": [asdict(u) for u in d.unknown],
        "tenants": [asdict(t) for t in d.tenants],
        "headroom": [asdict(h) for h in d.headroom],
        "mig": mig,
        "devicePlugin": [asdict(c) for c in d.plugin],
        "poolPluginKeys": [{"pool": p, "before": b, "after": a} for p, b, a in d.pool_plugin_keys],
        "configs": [asdict(c) for c in d.configs],
        "objects": [asdict(o) for o in d.objects],
        "tenantShards": {"before": d.tenant_shards[0], "after": d.tenant_shards[1]},
        "stackMoves": [asdict(mv) for mv in d.stack_moves],
    }
    return json.dumps(_camelize(doc), indent=2, ensure_ascii=False, default=str) + "\n"


FORMATTERS = {"text": format_text, "markdown": format_markdown, "json": format_json}
