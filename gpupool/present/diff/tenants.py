"""Tenant changes as rows (grouped when they read the same), and the stack moves of a sharding change."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.analysis.diff import METADATA_ASPECTS, Aspect, Kind, Namespace, SpecDiff, TenantChange
from gpupool.present.diff.budget import RANK_METADATA, RANK_QUOTA, RANK_TENANT_RISK
from gpupool.present.diff.words import counted, name_list
from gpupool.present.markdown import inline
from gpupool.present.numbers import signed


def _quota_text(t: TenantChange) -> str:
    return ", ".join(
        f"{q.resource} {q.before} → {q.after} ({signed(q.delta)})"
        if t.kind == Kind.CHANGED
        else f"{q.resource} {q.after if t.kind == Kind.ADDED else q.before}"
        for q in t.quotas
    )


def _access_text(t: TenantChange) -> str:
    who = ", ".join(t.owners) if t.owners else "no owners"
    text = f"owners {who} (role {t.owner_role})" if t.owners else "no owners"
    if t.foreign_service_accounts:
        text += (
            f"; ⚠ ServiceAccount{'s' if len(t.foreign_service_accounts) != 1 else ''} of another namespace: "
            + ", ".join(t.foreign_service_accounts)
        )
    return text


def _removal_text(t: TenantChange, md: bool = False) -> str:
    """What removing a tenant without offboarding does, from which of its objects Pulumi deletes; with `md`,
    as markdown (the text escaped, the field to set as code)."""
    deleted = [f.removesuffix(".yaml") for f in t.deleted_objects]
    kept = (
        f" Its quotas stay in force, frozen as last applied ({_quota_text(t)}), and still count against headroom."
        if t.quotas
        else ""
    )
    gone = (
        f" Pulumi deletes {', '.join(deleted)}: "
        + ("its owners lose their access" if any(f.endswith("-owners") for f in deleted) else "")
        + ("; " if any(f.endswith("-owners") for f in deleted) and len(deleted) > 1 else "")
        + ("its per-pod GPU maximum is no longer enforced" if any("max-per-pod" in f for f in deleted) else "")
        + "."
        if deleted
        else ""
    )
    text = inline if md else str
    return (
        text(
            f"{t.name} removed without being offboarded: namespace {t.name} is RETAINED (not deleted) and is no "
            f"longer managed by gpupool.{kept}{gone} To delete it, mark the tenant"
        )
        + " `offboarded: true` "
        + text("first, apply, then remove it")
    )


@dataclass(frozen=True)
class Row:
    marker: str  # +, -, ~ or ⚠
    text: str
    rank: int
    names: tuple[str, ...] = ()  # the tenants a grouped row stands for
    markdown: str = ""  # the row as markdown when it is more than `inline(text)` (it has code in it)

    def md(self) -> str:
        return self.markdown or inline(self.text)


def _tenant_row(t: TenantChange) -> Row:
    cc = f", cost centre {t.cost_center}" if t.cost_center else ""
    if t.kind == Kind.ADDED:
        grants = _quota_text(t) or "no GPU quota"
        stack = f", stack {t.stack}" if t.stack else ""
        marker = "⚠" if t.foreign_service_accounts else "+"
        return Row(
            marker, f"{t.name} onboarded (tier {t.tier}{cc}{stack}): {grants}; {_access_text(t)}", RANK_TENANT_RISK
        )
    if t.kind == Kind.REMOVED and t.namespace == Namespace.DELETED:
        return Row(
            "⚠",
            f"{t.name} removed (was offboarded): namespace {t.name} and everything in it is DELETED",
            RANK_TENANT_RISK,
        )
    if t.kind == Kind.REMOVED:
        return Row("⚠", _removal_text(t), RANK_TENANT_RISK, markdown=_removal_text(t, md=True))
    risky = (
        t.access_changed
        or t.offboarding
        or bool(t.foreign_service_accounts)
        or t.tier_raise is not None
        or bool(t.max_per_pod_lifts)
    )
    rank = RANK_TENANT_RISK if risky else RANK_METADATA if t.metadata_only else RANK_QUOTA
    return Row("⚠" if risky else "~", f"{t.name}: " + _change_text(t), rank)


def _change_text(t: TenantChange, generic: bool = False) -> str:
    """What changed for a tenant in both specs; with `generic`, billing and bookkeeping details say what
    changed, not to what ("cost centre changed"), so that changes of the same kind read the same."""
    parts = [_quota_text(t)] if t.quotas else []
    words = [_ASPECT_WORDS.get(x.aspect, x.aspect.value) for x in t.details if x.aspect in METADATA_ASPECTS]
    parts += [x.text for x in t.details if not (generic and x.aspect in METADATA_ASPECTS)]
    if generic and words:
        parts.append(", ".join(sorted(set(words))) + " changed")
    if t.access_changed:
        parts.append(f"now {_access_text(t)}")
    return "; ".join(parts)


def tenant_rows(d: SpecDiff, group: bool = False) -> list[Row]:
    """One row per tenant change; with `group`, changed tenants whose change reads the same (1,000 cost
    centres, one quota bump for everyone) share one row that counts and names them."""
    rows = [(t, _tenant_row(t)) for t in d.tenants]
    if not group:
        return [r for _t, r in rows]

    def key(t: TenantChange, r: Row) -> tuple[str, int, str] | None:
        """Changes that read the same (the name aside); metadata-only changes by what changed, not to what."""
        if t.kind != Kind.CHANGED or t.access_changed:
            return None
        return r.marker, r.rank, _change_text(t, generic=True)

    same: dict[tuple[str, int, str], list[str]] = {}
    for t, r in rows:
        k = key(t, r)
        if k is not None:
            same.setdefault(k, []).append(t.name)
    out, done = [], set()
    for t, r in rows:
        k = key(t, r)
        if k is None or len(same[k]) < 2:
            out.append(r)
        elif k not in done:
            done.add(k)
            names = same[k]
            out.append(
                Row(r.marker, f"{k[2]}: {counted(len(names), 'tenant')} ({name_list(names)})", r.rank, tuple(names))
            )
    return out


_ASPECT_WORDS = {Aspect.COST_CENTER: "cost centre", Aspect.LABELS: "namespace labels"}
_MOVES_SHOWN = 30


def _shards(n: int) -> str:
    return f"{n} tenant shards" if n else "not sharded"


def stack_lines(d: SpecDiff) -> list[str]:
    """Sharding changes: the count, and each tenant another Pulumi stack holds after this change."""
    before, after = d.tenant_shards
    if not d.stack_moves and before == after:
        return []
    out = [f"sharding.tenantShards: {_shards(before)} → {_shards(after)}; {counted(len(d.stack_moves), 'tenant')} move"]
    out += [f"{mv.tenant}: {mv.before} → {mv.after}" for mv in d.stack_moves[:_MOVES_SHOWN]]
    if len(d.stack_moves) > _MOVES_SHOWN:
        out.append(f"... and {len(d.stack_moves) - _MOVES_SHOWN:,} more (gpupool diff -o json lists them all)")
    if d.stack_moves:
        out.append(
            "⚠ gpupool stacks up moves them in two passes: the stacks they leave release them first, so "
            "their owners' role binding and per-pod maximum are absent until the stack they join creates "
            "them, later in the same run (namespaces and quotas are retained throughout)"
        )
    return out
