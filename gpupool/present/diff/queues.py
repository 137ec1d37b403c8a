"""The Queues section of `gpupool diff` (text and the PR comment): Kueue changes as a reviewer reads them.

Rows are (marker, text, risky): risky rows are the ones gpupool.analysis.diff also alerts on (kept as long as
the security- and destruction-relevant tenant rows when the comment is cut); the rest are routine grant
changes. Tenant rows that read the same but for the name share one row that counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.analysis.diff.queues import Change, PolicyField, QueueDiff, QuotaLine, TenantQueueChange
from gpupool.present.numbers import signed


@dataclass(frozen=True)
class QueueRow:
    marker: str  # + - ~ ⚠
    text: str
    risky: bool


def limit_text(v: object) -> str:
    """A limit as the rows show it: None is Kueue's null (no limit)."""
    if v is None:
        return "none"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {n}" for k, n in sorted(v.items())) + "}"
    return str(v)


def _cohort(c: str | None) -> str:
    return f"cohort {c}" if c else "no cohort (isolated)"


def _line(q: QuotaLine, kind: Change) -> str:
    where = f"{q.flavor} {q.resource}"
    if kind == Change.ADDED:
        return f"{where} nominal {q.nominal_after:,}"
    if kind == Change.REMOVED:
        return f"{where} nominal {q.nominal_before:,}"
    parts = []
    if q.nominal_before != q.nominal_after:
        parts.append(
            f"nominal {q.nominal_before:,} → {q.nominal_after:,} ({signed(q.nominal_after - q.nominal_before)})"
        )
    if q.borrowing_before != q.borrowing_after:
        parts.append(f"borrowing limit {limit_text(q.borrowing_before)} → {limit_text(q.borrowing_after)}")
    if q.lendable_before != q.lendable_after:
        parts.append(f"lendable {q.lendable_before:,} → {q.lendable_after:,}")
    return f"{where} " + ", ".join(parts)


def _tenant_text(q: TenantQueueChange) -> str:
    """The row without the tenant's name (rows that read the same are grouped)."""
    if q.kind == Change.ADDED:
        quota = [_line(x, q.kind) for x in q.quotas if x.nominal_after]
        held = "; holds (offboarded)" if q.stopped else ""
        return (
            f"new ClusterQueue and LocalQueue ({_cohort(q.cohort_after)}): "
            + (", ".join(quota) or "no nominal quota (borrows only)")
            + held
        )
    if q.kind == Change.REMOVED:
        return "ClusterQueue and LocalQueue deleted with the tenant"
    parts = []
    if q.cohort_changed:
        parts.append(f"{_cohort(q.cohort_before)} → {_cohort(q.cohort_after)}")
    parts += [_line(x, q.kind) for x in q.quotas]
    if q.admitted:
        parts.append(
            "most admitted (its ResourceQuota) "
            + ", ".join(f"{a.resource} {a.before:,} → {a.after:,}" for a in q.admitted)
        )
    if q.reduced:
        parts.append("⚠ guaranteed quota shrinks: what it runs above it counts as borrowed, preemptible on reclaim")
    return "; ".join(parts)


def _names(names: list[str], shown: int = 10) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" … and {more:,} more" if more > 0 else "")


def queue_rows(d: QueueDiff) -> list[QueueRow]:
    out: list[QueueRow] = []
    if d.turned_on:
        flavors, cohorts, queues = d.counts_after
        out.append(
            QueueRow(
                "⚠",
                f"queueing turned on (Kueue): {flavors:,} ResourceFlavors, {cohorts:,} Cohorts, {queues:,} "
                "ClusterQueues with a LocalQueue each; every tenant's GPU workloads must now go through Kueue (the "
                "queue policy refuses GPU pods Kueue does not hold, and Kueue must run the documented "
                "configuration, docs/explanation/queueing.md), and GPU ResourceQuotas are sized to the most Kueue can admit",
                True,
            )
        )
    if d.turned_off:
        out.append(
            QueueRow(
                "⚠",
                f"queueing turned off: every Kueue object gpupool made is deleted ({len(d.tenants):,} "
                "ClusterQueues); Jobs are no longer queued, and GPU ResourceQuotas shrink back to the grants "
                "(pods of workloads running on borrowed quota are refused when re-created)",
                True,
            )
        )
        return out  # every queue goes: one row says it
    for f in d.flavors:
        pairs = [
            ("capacity", f.capacity_before, f.capacity_after),
            ("nominal", f.nominal_before, f.nominal_after),
            ("lendable", f.lendable_before, f.lendable_after),
            ("borrowable", f.borrowable_before, f.borrowable_after),
        ]
        out.append(
            QueueRow(
                "~",
                f"flavor {f.flavor} {f.resource}: " + ", ".join(f"{w} {x:,} → {y:,}" for w, x, y in pairs if x != y),
                False,
            )
        )
    for t in d.tiers:
        what = f"tier {t.tier}: {t.field.value} {limit_text(t.before)} → {limit_text(t.after)}"
        if t.field == PolicyField.ISOLATED:
            what = f"tier {t.tier}: " + ("isolated (no cohort)" if t.after else "joins the cohort (not isolated)")
        out.append(
            QueueRow("⚠" if t.exposes else "~", what + (f" — {t.exposes}" if t.exposes else ""), bool(t.exposes))
        )
    for c in d.cohorts:
        quota = ", ".join(f"{x.flavor} {x.resource} {x.before:,} → {x.after:,}" for x in c.quotas)
        if c.kind == Change.ADDED:
            text = f"cohort {c.name} added" + (f" (parent {c.parent_after})" if c.parent_after else " (root)")
        elif c.kind == Change.REMOVED:
            text = f"cohort {c.name} removed"
        else:
            bits = [f"parent {c.parent_before} → {c.parent_after}"] if c.parent_before != c.parent_after else []
            if c.weight_before != c.weight_after:
                bits.append(f"weight {limit_text(c.weight_before)} → {limit_text(c.weight_after)}")
            text = f"cohort {c.name}: " + ", ".join(bits + ([f"shared quota {quota}"] if quota else []))
        if quota and c.kind != Change.CHANGED:
            text += f"; shared quota {quota}"
        out.append(QueueRow({"added": "+", "removed": "-"}.get(c.kind, "~"), text, False))
    groups: dict[tuple[str, str], list[str]] = {}
    for q in d.tenants:
        marker = "⚠" if q.reduced else {"added": "+", "removed": "-"}.get(q.kind, "~")
        groups.setdefault((marker, _tenant_text(q)), []).append(q.tenant)
    for (marker, text), names in groups.items():
        row = f"{names[0]}: {text}" if len(names) == 1 else f"{text}: {len(names):,} tenants ({_names(names)})"
        out.append(QueueRow(marker, row, marker == "⚠"))
    if out and d.enabled_after:
        out.append(_outside_row(d))
    return out


def _outside_row(d: QueueDiff) -> QueueRow:
    """Each tenant's ceiling outside Kueue at HEAD (issue 35): one row; tenants with one above 0 named."""
    open_ = {t: {r: n for r, n in rs.items() if n} for t, rs in sorted(d.outside_after.items())}
    open_ = {t: rs for t, rs in open_.items() if rs}
    if not open_:
        return QueueRow(
            "~",
            f"ceiling outside Kueue: 0 GPUs for every tenant ({len(d.outside_after):,}): the queue policy refuses "
            "GPU pods Kueue does not hold",
            False,
        )
    listed = "; ".join(f"{t} " + ", ".join(f"{r} {n:,}" for r, n in sorted(rs.items())) for t, rs in open_.items())
    return QueueRow("⚠", f"ceiling outside Kueue above 0: {listed}", True)


def reduced_text(q: TenantQueueChange) -> str:
    """For the alert line: which entries shrink."""
    return ", ".join(f"{x.flavor} {x.resource} {x.nominal_before:,} → {x.nominal_after:,}" for x in q.reduced)
