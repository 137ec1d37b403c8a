"""`gpupool diff` output: text (terminals), markdown (the pull-request comment), json."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gpupool.present.numbers import signed

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side
from gpupool.present.tables import md_table, text_table

MAX_FIELDS = 8  # field-level changes shown per object before "... N more"
EVICTS = "⚠ EVICTS GPU WORKLOADS"


def _value(v) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, str) and "\n" in v:
        return f"<{len(v.splitlines())} lines>"
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _quota_text(t) -> str:
    return ", ".join(f"{q.resource} {q.before} → {q.after} ({signed(q.delta)})" if t.kind == "changed"
                     else f"{q.resource} {q.after if t.kind == 'added' else q.before}" for q in t.quotas)


def _tenant_lines(d) -> list[tuple[str, str]]:
    """(marker, sentence) per tenant change; marker is +, -, ~ or ⚠."""
    out = []
    for t in d.tenants:
        cc = f", cost centre {t.cost_center}" if t.cost_center else ""
        if t.kind == "added":
            grants = _quota_text(t) or "no GPU quota"
            out.append(("+", f"{t.name} onboarded (tier {t.tier}{cc}): {grants}"))
        elif t.kind == "removed" and t.namespace == "deleted":
            out.append(("-", f"{t.name} removed (was offboarded): namespace {t.name} and everything in it is DELETED"))
        elif t.kind == "removed":
            kept = ""
            if t.retained_objects and not t.deleted_objects:
                kept = (" Its quotas, limit range and role binding are retained too, frozen as last applied"
                        + (f" (still admitting {_quota_text(t)}, which no longer counts against capacity)"
                           if t.quotas else "") + ".")
            elif t.deleted_objects:
                kept = (f" Pulumi deletes its other objects ({', '.join(t.deleted_objects)}), so nothing limits "
                        "its GPU use.")
            out.append(("⚠", f"{t.name} removed without being offboarded: namespace {t.name} is RETAINED (not "
                             f"deleted) and is no longer managed by gpupool.{kept} To delete it, mark the tenant "
                             "`offboarded: true` first, apply, then remove it"))
        else:
            parts = ([_quota_text(t)] if t.quotas else []) + list(t.details)
            out.append(("~", f"{t.name}: " + "; ".join(parts)))
    return out


def _mig_lines(d) -> list[str]:
    out = []
    for c in d.mig:
        if c.nodes:
            where = f"node{'s' if len(c.nodes) != 1 else ''} {', '.join(c.nodes)}"
        else:
            sel = ", ".join(f"{k}={v}" for k, v in c.node_selector.items())
            where = f"every node matching {sel} ({c.node_count} expected)"
        what = {"changed": f"{c.layout_before} → {c.layout_after}",
                "added": f"new MIG pool: {c.layout_after}",
                "nodes-added": f"nodes join the pool: {c.layout_after}"}[c.kind]
        cfg = f"mig.config {c.config_before or '(none)'} → {c.config_after}"
        reboot = "; nodes REBOOT (migRebootOnReconfigure)" if c.reboot else ""
        out.append(f"{EVICTS} on {where} (pool {c.pool}): MIG Manager re-partitions the GPUs ({what}; {cfg}) "
                   f"and evicts every GPU workload there first{reboot}")
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
            out.append(("+", f"key {c.key}: {c.sharing_after} replicas {c.replicas_after} "
                             f"(pools: {', '.join(c.pools_after) or '-'})"))
        else:
            out.append(("-", f"key {c.key}: was {c.sharing_before} replicas {c.replicas_before} "
                             f"(pools: {', '.join(c.pools_before) or '-'})"))
    for pool, kb, ka in d.pool_plugin_keys:
        out.append(("~", f"pool {pool}: nvidia.com/device-plugin.config {kb} → {ka}"))
    if out:
        out.append(("!", "the device plugin and GFD restart on every GPU node (config hash); running pods keep "
                         "their GPUs, advertised capacity changes"))
    return out


def _object_lines(d, md: bool = False) -> list[tuple[str, str]]:
    out = []
    code = (lambda s: f"`{s}`") if md else (lambda s: s)  # noqa: E731
    for o in d.objects:
        what = f"{o.object_kind} {o.object_name}"
        if o.kind == "added":
            out.append(("+", f"{code(o.file)} ({what})"))
        elif o.kind == "removed":
            note = " — retained in the cluster (retainOnDelete), no longer managed" if o.retained else ""
            out.append(("-", f"{code(o.file)} ({what}){note}"))
        else:
            shown = [f"{code(f.path)}: {_value(f.before)} → {_value(f.after)}" for f in o.fields[:MAX_FIELDS]]
            more = len(o.fields) - MAX_FIELDS
            if more > 0:
                shown.append(f"… {more} more")
            out.append(("~", f"{code(o.file)} ({what}): " + "; ".join(shown)))
    return out


_MD_MARK = {"+": "**added**", "-": "**removed**", "~": "**changed**", "⚠": "⚠", "!": "note:"}


def _md_items(items: list[tuple[str, str]]) -> str:
    return "\n".join(f"- {_MD_MARK.get(m, m)} {t}" for m, t in items) + "\n"


def _headroom_rows(d) -> list[list[str]]:
    def n(v):
        return "-" if v is None else str(v)
    rows = []
    for h in d.headroom:
        if not h.changed:
            continue
        flag = " ⚠" if h.headroom_after is not None and h.headroom_after < 0 else ""
        rows.append([h.resource, f"{n(h.capacity_before)} → {n(h.capacity_after)}",
                     f"{n(h.granted_before)} → {n(h.granted_after)}",
                     f"{n(h.headroom_before)} → {n(h.headroom_after)}{flag}"])
    return rows


def _status(base: Side, head: Side, ok: bool) -> list[str]:
    out = []
    if not head.valid:
        out.append(f"✗ HEAD {head.label} is INVALID ({head.errors} errors; diagnostics on stderr). "
                   + ("The diff below uses the parts that validated and may be incomplete."
                      if head.partial else "Nothing could be compared."))
    if not base.exists:
        out.append(f"BASE {base.label}: everything in HEAD is new")
    elif not base.valid:
        out.append(f"BASE {base.label} is invalid ({base.errors} errors)"
                   + ("; compared with the parts that validated" if base.partial else "; compared with nothing"))
    if head.valid and not ok:
        out.append("✗ HEAD leaves negative headroom (see Headroom)")
    if ok:
        out.append("✓ HEAD is valid and every resource has non-negative headroom")
    return out


def format_text(base: Side, head: Side, d, ok: bool) -> str:
    lines = [f"gpupool diff: {base.label} → {head.label}", *_status(base, head, ok), ""]

    def section(title, body):
        if body:
            lines.extend([title, *[f"  {b}" for b in body], ""])
    section("Tenants", [f"{m} {s}" for m, s in _tenant_lines(d)])
    rows = _headroom_rows(d)
    if rows:
        lines.append("Headroom (policy-allowed minus granted), before → after")
        lines.extend("  " + line for line in text_table(["RESOURCE", "CAPACITY", "GRANTED", "HEADROOM"],
                                                       rows).splitlines())
        lines.append("")
    section("MIG layout changes", _mig_lines(d))
    section("Device-plugin config", [t if m == "!" else f"{m} {t}" for m, t in _plugin_lines(d)])
    section("Rendered objects (gpupool render)", [f"{m} {t}" for m, t in _object_lines(d)])
    if d.empty:
        lines.append("no changes")
    return "\n".join(lines).rstrip("\n") + "\n"


def format_markdown(base: Side, head: Side, d, ok: bool) -> str:
    out = [f"## gpupool diff\n\n`{base.label}` → `{head.label}`\n"]
    out.append("\n".join(f"- {s}" for s in _status(base, head, ok)) + "\n")
    if not head.valid:
        diags = head.rendered_diagnostics()
        out.append("<details><summary>HEAD diagnostics</summary>\n\n```\n" + "\n".join(diags) + "\n```\n\n</details>\n")
    evicts = _mig_lines(d)
    retained = [s for m, s in _tenant_lines(d) if m == "⚠"]
    if evicts or retained:
        out.append("> [!WARNING]\n" + "\n".join(f"> - **{s}**" if s.startswith(EVICTS) else f"> - {s}"
                                                  for s in evicts + retained) + "\n")
    tl = _tenant_lines(d)
    if tl:
        out.append("### Tenants\n\n" + md_table(["", "TENANT CHANGE"], [[m, s] for m, s in tl]))
    rows = _headroom_rows(d)
    if rows:
        out.append("### Headroom (policy-allowed minus granted)\n\n"
                   + md_table(["RESOURCE", "CAPACITY", "GRANTED", "HEADROOM"], rows, (1, 2, 3)))
    if evicts:
        out.append("### MIG layout changes\n\n" + "\n".join(f"- {s}" for s in evicts) + "\n")
    pl = _plugin_lines(d)
    if pl:
        out.append("### Device-plugin config\n\n" + _md_items(pl))
    ol = _object_lines(d, md=True)
    if ol:
        body = _md_items(ol)
        out.append(f"### Rendered objects\n\n<details><summary>{len(ol)} objects change</summary>\n\n{body}\n"
                   "</details>\n")
    if d.empty:
        out.append("No changes.\n")
    return "\n".join(out)


def format_json(base: Side, head: Side, d, ok: bool) -> str:
    from dataclasses import asdict

    def side(s: Side) -> dict:
        return {"label": s.label, "exists": s.exists, "valid": s.valid, "partial": s.partial,
                "diagnostics": s.rendered_diagnostics()}
    doc = {"schemaVersion": 1, "ok": ok, "base": side(base), "head": side(head),
           "tenants": [asdict(t) for t in d.tenants],
           "headroom": [asdict(h) for h in d.headroom],
           "mig": [asdict(c) for c in d.mig],
           "devicePlugin": [asdict(c) for c in d.plugin],
           "poolPluginKeys": [{"pool": p, "before": b, "after": a} for p, b, a in d.pool_plugin_keys],
           "objects": [asdict(o) for o in d.objects]}
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


FORMATTERS = {"text": format_text, "markdown": format_markdown, "json": format_json}
