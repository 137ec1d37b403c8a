"""`gpupool diff -o json`: the diff as the document docs/reference/diff-json.md describes."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from gpupool.analysis.diff import SliceLayout, SpecDiff
from gpupool.present.diff.verdict import verdict_class

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side
    from gpupool.spec.diagnostics import Diagnostic


JSON_SCHEMA_VERSION = 3


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _camelize(value: object) -> object:
    if isinstance(value, dict):
        return {_camel(k) if isinstance(k, str) else k: _camelize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_camelize(v) for v in value]
    return value


def diagnostic_json(d: Diagnostic, prefix: str = "") -> dict[str, object]:
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


def format_json(base: Side, head: Side, d: SpecDiff, ok: bool) -> str:
    def side(s: Side) -> dict[str, object]:
        return {
            "label": s.label,
            "exists": s.exists,
            "valid": s.valid,
            "partial": s.partial,
            "diagnostics": [diagnostic_json(x, s.prefix) for x in s.diagnostics],
        }

    mig = []
    for c in d.mig:
        # The solver's placements are the slice maps' input, not part of the document (docs/reference/diff-json.md).
        row = asdict(replace(c, slices_before=SliceLayout(), slices_after=SliceLayout()))
        del row["slices_before"], row["slices_after"]
        for k in ("groups_before", "groups_after"):
            row[k] = [{"gpus": list(g), "layout": dict(layout)} for g, layout in row[k]]
        mig.append(row)
    doc = {
        "schemaVersion": JSON_SCHEMA_VERSION,
        "ok": ok,
        "comparable": d.comparable,
        "empty": d.empty,
        "verdict": verdict_class(head, d, ok),
        "summary": d.summary(),
        "alerts": [{"risk": a.risk, "count": a.count, "names": list(a.names)} for a in d.alerts()],
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
        "pools": [asdict(p) for p in d.pools],
        "allocationCutovers": [asdict(c) for c in d.cutovers],
        "queues": {
            "enabledBefore": d.queues.enabled_before,
            "enabledAfter": d.queues.enabled_after,
            "tenants": [asdict(q) for q in d.queues.tenants],
            "tiers": [asdict(t) for t in d.queues.tiers],
            "cohorts": [asdict(c) for c in d.queues.cohorts],
            "flavors": [asdict(f) for f in d.queues.flavors],
        },
    }
    return json.dumps(_camelize(doc), indent=2, ensure_ascii=False, default=str) + "\n"
