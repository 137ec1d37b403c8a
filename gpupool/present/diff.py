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
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from gpupool.analysis.diff import (
    ACCESS_ASPECTS,
    METADATA_ASPECTS,
    Aspect,
    Kind,
    MigKind,
    Namespace,
    Risk,
    SliceLayout,
    UnknownCause,
    raise_text,
)
from gpupool.present.markdown import code, fenced, html_text, inline, mermaid_text
from gpupool.present.numbers import signed
from gpupool.present.queue_diff import limit_text, queue_rows, reduced_text
from gpupool.present.tables import md_table, text_table
from gpupool.present.text import safe

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side

MAX_FIELDS = 8  # field-level changes shown per object before "... N more"
EVICTS = "⚠ EVICTS GPU WORKLOADS"
GITHUB_COMMENT_LIMIT = 65_536  # characters GitHub accepts in one comment body
MAX_ERRORS_SHOWN = 40  # in the markdown; the full diff and `gpupool validate` have them all
MAX_WARNINGS_SHOWN = 20
MAX_CHART_RESOURCES = 16
JSON_SCHEMA_VERSION = 3


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
        if t.kind == Kind.CHANGED
        else f"{q.resource} {q.after if t.kind == Kind.ADDED else q.before}"
        for q in t.quotas
    )


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def _names(names, shown: int = 10) -> str:
    names = list(names)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" … and {more:,} more" if more > 0 else "")


def _access_text(t) -> str:
    who = ", ".join(t.owners) if t.owners else "no owners"
    text = f"owners {who} (role {t.owner_role})" if t.owners else "no owners"
    if t.foreign_service_accounts:
        text += (
            f"; ⚠ ServiceAccount{'s' if len(t.foreign_service_accounts) != 1 else ''} of another namespace: "
            + ", ".join(t.foreign_service_accounts)
        )
    return text


def _removal_text(t, md: bool = False) -> str:
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
class _Row:
    marker: str  # +, -, ~ or ⚠
    text: str
    rank: int
    names: tuple[str, ...] = ()  # the tenants a grouped row stands for
    markdown: str = ""  # the row as markdown when it is more than `inline(text)` (it has code in it)

    def md(self) -> str:
        return self.markdown or inline(self.text)


def _tenant_row(t) -> _Row:
    cc = f", cost centre {t.cost_center}" if t.cost_center else ""
    if t.kind == Kind.ADDED:
        grants = _quota_text(t) or "no GPU quota"
        stack = f", stack {t.stack}" if t.stack else ""
        marker = "⚠" if t.foreign_service_accounts else "+"
        return _Row(
            marker, f"{t.name} onboarded (tier {t.tier}{cc}{stack}): {grants}; {_access_text(t)}", RANK_TENANT_RISK
        )
    if t.kind == Kind.REMOVED and t.namespace == Namespace.DELETED:
        return _Row(
            "⚠",
            f"{t.name} removed (was offboarded): namespace {t.name} and everything in it is DELETED",
            RANK_TENANT_RISK,
        )
    if t.kind == Kind.REMOVED:
        return _Row("⚠", _removal_text(t), RANK_TENANT_RISK, markdown=_removal_text(t, md=True))
    risky = (
        t.access_changed
        or t.offboarding
        or bool(t.foreign_service_accounts)
        or t.tier_raise is not None
        or bool(t.max_per_pod_lifts)
    )
    rank = RANK_TENANT_RISK if risky else RANK_METADATA if t.metadata_only else RANK_QUOTA
    return _Row("⚠" if risky else "~", f"{t.name}: " + _change_text(t), rank)


def _change_text(t, generic: bool = False) -> str:
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


def _tenant_rows(d, group: bool = False) -> list[_Row]:
    """One row per tenant change; with `group`, changed tenants whose change reads the same (1,000 cost
    centres, one quota bump for everyone) share one row that counts and names them."""
    rows = [(t, _tenant_row(t)) for t in d.tenants]
    if not group:
        return [r for _t, r in rows]

    def key(t, r) -> tuple[str, int, str] | None:
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
                _Row(r.marker, f"{k[2]}: {_plural(len(names), 'tenant')} ({_names(names)})", r.rank, tuple(names))
            )
    return out


_ASPECT_WORDS = {Aspect.COST_CENTER: "cost centre", Aspect.LABELS: "namespace labels"}


def _unknown_lines(d) -> list[str]:
    out = []
    for u in d.unknown:
        plain = u.cause == UnknownCause.INVALID
        if u.section == "tenant":
            word = "UNREADABLE" if u.unreadable else "INVALID"
            what = f"tenant {u.name} is {word} in {u.side}" + ("" if plain else f" ({u.reason})")
        elif u.section == "oversubscription":
            what = f"the oversubscription policy is invalid in {u.side}"
        elif u.section == "queueing":
            what = f"the queueing block is invalid in {u.side}"
        else:
            what = f"{u.section} {u.name} is INVALID in {u.side}" + ("" if plain else f" ({u.reason})")
        out.append(f"{what}: compared as {'BASE' if u.side == 'HEAD' else 'HEAD'} has it, so no change is shown")
    return out


def _duration(seconds: int) -> str:
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h".replace(".0 h", " h")


def _mig_lines(d) -> list[tuple[str, list[str]]]:
    """(the eviction sentence, its detail lines) per evicting MIG change."""
    out = []
    for c in d.evicting:
        if c.nodes:
            ev = c.evicted_nodes
            where = f"node{'s' if len(ev) != 1 else ''} {_names(ev)}"
        else:
            sel = ", ".join(f"{k}={v}" for k, v in c.node_selector.items())
            where = f"every node matching {sel} ({c.node_count} expected)"
        what = {
            MigKind.CHANGED: f"{c.layout_before} → {c.layout_after}",
            MigKind.ADDED: f"new MIG pool: {c.layout_after}",
            MigKind.NODES_ADDED: f"nodes join the pool: {c.layout_after}",
        }[c.kind]
        cfg = f"mig.config {c.config_before or '(none)'} → {c.config_after}"
        reboot = "; nodes REBOOT (migRebootOnReconfigure)" if c.reboot else ""
        who = (
            f"; affected: {_plural(len(c.tenants), 'tenant')} ({_names(c.tenants)}), tier{'s' if len(c.tiers) != 1 else ''} "
            + ", ".join(c.tiers)
            if c.tenants
            else "; no tenant is granted what this pool supplies"
        )
        sentence = (
            f"{EVICTS} on {where} (pool {c.pool}): MIG Manager re-partitions the GPUs ({what}; {cfg}) "
            f"and evicts every GPU workload there first{reboot}{who}"
        )
        detail = []
        if c.waves:
            cordon = "cordoned, " if c.cordon else ""
            if c.drain_timeout_seconds:
                cordon += (
                    f"its GPU pods evicted (PodDisruptionBudgets respected; one not gone within "
                    f"{c.drain_timeout_seconds:,} s stops the rollout), "
                )
            per_wave = f"2 × {c.node_timeout_seconds:,} s"
            if c.drain_timeout_seconds:
                per_wave = f"({per_wave} + {c.drain_timeout_seconds:,} s)"
            detail.append(
                f"rollout: {_plural(len(c.waves), 'wave')} of at most {_plural(c.at_once, 'node')} unavailable at "
                f"once ({cordon}each waits for its MIG Manager to restart with the new config, then for "
                f"nvidia.com/mig.config.state=success, each at most {c.node_timeout_seconds:,} s; a failed node "
                f"stops the rollout); worst case {len(c.waves):,} × {per_wave} = "
                f"{_duration(c.worst_case_seconds)}: "
                + " → ".join(", ".join(w) for w in c.waves[:10])
                + (f" → … {len(c.waves) - 10:,} more waves" if len(c.waves) > 10 else "")
            )
        if c.new_nodes:
            detail.append(
                f"new node{'s' if len(c.new_nodes) != 1 else ''} {_names(c.new_nodes)}: labelled at once, "
                "not in a wave; where MIG Manager already runs on one, its pod is restarted and its run waited for"
            )
        if not c.nodes:
            detail.append(
                "rollout: gpupool cannot name these nodes; the node-group tooling must roll them "
                "(cordon, relabel, wait for success, uncordon; see README)"
            )
        out.append((sentence, detail))
    return out


def _pool_lines(d) -> list[str]:
    """Node pools added or removed, and nodes joining or leaving (new nodes have no workloads yet)."""
    joining = {c.pool: c for c in d.mig if not c.evicts}
    out = []
    for p in d.pools:
        layout = f" (MIG layout {joining[p.pool].layout_after}, applied at once)" if p.pool in joining else ""
        if p.kind == Kind.ADDED:
            n = _plural(len(p.nodes_added), "node") if p.nodes_added else f"{p.count_after} selector nodes"
            out.append(f"+ pool {p.pool} added ({p.gpu_model}, {n}){layout}")
            continue
        if p.kind == Kind.REMOVED:
            gone = f": nodes {_names(p.nodes_removed)} leave the platform" if p.nodes_removed else ""
            out.append(f"- pool {p.pool} removed{gone}; its GPUs no longer count as capacity")
            continue
        if p.nodes_added:
            out.append(f"+ pool {p.pool}: {_names(p.nodes_added)} join (no workloads yet){layout}")
        if p.nodes_removed:
            out.append(
                f"- pool {p.pool}: {_names(p.nodes_removed)} leave the platform (gpupool stops managing their "
                "labels; drain them before the node goes)"
            )
        if p.count_before != p.count_after:
            out.append(f"~ pool {p.pool}: expected nodes {p.count_before} → {p.count_after}")
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
    code_ = code if md else (lambda s: s)
    for o in d.objects:
        what = f"{o.object_kind} {o.object_name}"
        what = inline(what) if md else what
        if o.kind == "added":
            out.append(("+", f"{code_(o.file)} ({what})"))
        elif o.kind == "removed":
            note = " — retained in the cluster (retainOnDelete), no longer managed" if o.retained else ""
            out.append(("-", f"{code_(o.file)} ({what}){note}"))
        else:
            shown = [
                f"{code_(f.path)}: {code(_value(f.before)) if md else _value(f.before)} → "
                f"{code(_value(f.after)) if md else _value(f.after)}"
                for f in o.fields[:MAX_FIELDS]
            ]
            more = len(o.fields) - MAX_FIELDS
            if more > 0:
                shown.append(f"… {more} more")
            how = (IMMUTABLE if o.object_kind == "PriorityClass" else RENAMED) if o.replaced else ""
            out.append(("~", f"{code_(o.file)} ({what}): " + "; ".join(([how] if how else []) + shown)))
    return out


HEADROOM_HEADERS = ["RESOURCE", "CAPACITY", "ALLOWED", "GRANTED", "HEADROOM"]


RENAMED = "REPLACED (renamed: deleted and created)"
# A tier's PriorityClass on a value change (Desired.replace_on_changes): say what it takes and means.
IMMUTABLE = (
    "REPLACED (the field is immutable: `pulumi up` deletes and creates it (docs/safety.md); with the render run"
    " `kubectl replace --force -f` on this file first; running pods keep their old priority until they are"
    " re-created, and pods created in between naming it are refused)"
)


def _headroom_rows(d) -> list[list[str]]:
    """Per changed resource: physical capacity, what the oversubscription policy allows, granted, headroom
    (= allowed - granted), before → after."""

    def n(v):
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
        out.append(f"... and {len(d.stack_moves) - _MOVES_SHOWN:,} more (gpupool diff -o json lists them all)")
    if d.stack_moves:
        out.append(
            "⚠ gpupool stacks up moves them in two passes: the stacks they leave release them first, so "
            "their owners' role binding and per-pod maximum are absent until the stack they join creates "
            "them, later in the same run (namespaces and quotas are retained throughout)"
        )
    return out


def summary_line(d) -> str:
    """`2 tenants to onboard, 1 to change · 14 objects to add, 3 to change · ...` (terraform's "Plan: X to
    add, Y to change, Z to destroy"): only the counts that are not zero."""
    s = d.summary()

    def group(first: str, counts: list[tuple[int, str]]) -> str | None:
        parts = [(n, what) for n, what in counts if n]
        if not parts:
            return None
        head_n, head_what = parts[0]
        out = [f"{_plural(head_n, first)} {head_what}"] + [f"{n:,} {what}" for n, what in parts[1:]]
        return ", ".join(out)

    parts = [
        group(
            "tenant",
            [
                (s["tenantsOnboarded"], "to onboard"),
                (s["tenantsChanged"], "to change"),
                (s["tenantsOffboarded"], "to offboard"),
                (s["tenantsRemoved"], "to remove"),
                (s["tenantsUnknown"], "not compared (invalid or unreadable)"),
            ],
        ),
        group(
            "object",
            [
                (s["objectsToAdd"], "to add"),
                (s["objectsToChange"], "to change"),
                (s["objectsToDelete"], "to delete"),
                (s["objectsToRetain"], "to retain"),
            ],
        ),
        f"{_plural(s['poolsRelaidOut'], 'pool')} re-laid out (evicting GPU workloads)" if s["poolsRelaidOut"] else None,
        f"{_plural(s['poolsNotCompared'], 'pool')} not compared (invalid in a side; may change)"
        if s["poolsNotCompared"]
        else None,
        group("node", [(s["nodesJoining"], "joining"), (s["nodesLeaving"], "leaving")]),
        f"headroom changes on {_plural(s['headroomChanges'], 'resource')}"
        + (f" ({s['negativeHeadroom']:,} NEGATIVE)" if s["negativeHeadroom"] else "")
        if s["headroomChanges"]
        else None,
        f"{_plural(s['tenantsMovingStack'], 'tenant')} moving between Pulumi stacks"
        if s["tenantsMovingStack"]
        else None,
        "queueing turned on"
        if d.queues.turned_on
        else "queueing turned off"
        if d.queues.turned_off
        else group(
            "queue",
            [(s["queuesAdded"], "to add"), (s["queuesChanged"], "to change"), (s["queuesRemoved"], "to remove")],
        ),
        f"{_plural(s['queuePolicyChanges'], 'queue policy change')} (tiers, cohorts)"
        if s["queuePolicyChanges"] and not (d.queues.turned_on or d.queues.turned_off)
        else None,
    ]
    shown = [p for p in parts if p]
    return " · ".join(shown) if shown else "no changes"


def summary_line_queues(d) -> str:
    """The Queues section's counts: `2 added, 3 changed, 1 tier or cohort policy change`."""
    s = d.summary()
    if d.queues.turned_on or d.queues.turned_off:
        return "queueing turned " + ("on" if d.queues.turned_on else "off")
    parts = [
        _counts([(s["queuesAdded"], "added"), (s["queuesChanged"], "changed"), (s["queuesRemoved"], "removed")]),
        _plural(s["queuePolicyChanges"], "tier or cohort policy change") if s["queuePolicyChanges"] else "",
    ]
    return ", ".join(p for p in parts if p and p != "none")


def _risk_phrase(d, a) -> str:
    """The verdict's words for one alert: what the change does."""
    n = a.count
    if a.risk == Risk.ACCESS_CHANGED:
        escalating = sum(t.escalates for t in d.tenants if t.name in set(a.names))
        verb = "escalates" if escalating else "changes"
        return f"{verb} the access of {_plural(n, 'tenant')}"
    return {
        Risk.NAMESPACE_DELETED: f"DELETES {_plural(n, 'namespace')}",
        Risk.DELETION_PROTECTION_LOST: f"removes the deletion protection of {_plural(n, 'namespace')}",
        Risk.NAMESPACE_UNMANAGED: f"leaves {_plural(n, 'namespace')} unmanaged",
        Risk.FOREIGN_SERVICE_ACCOUNT: f"binds ServiceAccounts of other namespaces in {_plural(n, 'tenant')}",
        Risk.EVICTION: f"evicts GPU workloads on {_plural(n, 'node')}",
        Risk.REBOOT: f"reboots the nodes of {_plural(n, 'pool')}",
        Risk.STACK_MOVE: f"moves {_plural(n, 'tenant')} between Pulumi stacks",
        Risk.NODES_REMOVED: f"removes {_plural(n, 'node')}",
        Risk.QUEUEING_ON: f"turns Kueue queueing on for {_plural(n, 'tenant')}",
        Risk.QUEUEING_OFF: f"turns Kueue queueing off ({_plural(n, 'queue')} deleted)",
        Risk.NOMINAL_REDUCED: f"reduces the guaranteed Kueue quota of {_plural(n, 'tenant')}",
        Risk.PREEMPTION_EXPOSED: f"exposes the workloads of {_plural(n, 'tier')} to more preemption",
        Risk.TIER_RAISED: f"raises the tier (priority) of {_plural(n, 'tenant')}",
        Risk.MAX_PER_POD_LIFTED: f"lifts the per-pod GPU maximum of {_plural(n, 'tenant')}",
    }[a.risk]


def verdict_class(head: Side, d, ok: bool) -> str:
    """ "blocked" (✗ cannot apply), "risky" (⚠ applies but destroys, evicts, escalates or moves stacks) or
    "routine" (✓)."""
    if not head.valid or not ok:
        return "blocked"
    return "risky" if d.alerts() else "routine"


def _verdict(base: Side, head: Side, d, ok: bool) -> str:
    """The first words: can this change be applied, and is it more than routine?"""
    if not head.valid:
        return f"✗ HEAD is INVALID ({_plural(head.errors, 'error')}): this change cannot be applied."
    if not ok:
        over = [h.resource for h in d.headroom if h.headroom_after is not None and h.headroom_after < 0]
        return f"✗ HEAD leaves negative headroom ({', '.join(over)}): this change cannot be applied."
    alerts = d.alerts()
    if alerts:
        return "⚠ HEAD applies, but it " + "; ".join(_risk_phrase(d, a) for a in alerts) + "."
    return "✓ HEAD is valid, every resource keeps non-negative headroom, and the change is routine."


_ALERT_TITLE = {
    Risk.NAMESPACE_DELETED: "namespace deleted with everything in it",
    Risk.DELETION_PROTECTION_LOST: "offboarded: deletion protection removed (removing the tenant then deletes the namespace)",
    Risk.NAMESPACE_UNMANAGED: "removed without offboarding: namespace retained, unmanaged",
    Risk.ACCESS_CHANGED: "owners or ownerRole change",
    Risk.FOREIGN_SERVICE_ACCOUNT: "a ServiceAccount of another namespace is an owner",
    Risk.EVICTION: "GPU workloads evicted (MIG re-layout)",
    Risk.REBOOT: "nodes reboot (migRebootOnReconfigure)",
    Risk.STACK_MOVE: "tenants move between Pulumi stacks",
    Risk.NODES_REMOVED: "nodes leave the platform",
    Risk.QUEUEING_ON: "Kueue queueing turned on: every tenant's Jobs must go through Kueue",
    Risk.QUEUEING_OFF: "Kueue queueing turned off: queues deleted, ResourceQuotas shrink to the grants",
    Risk.NOMINAL_REDUCED: "guaranteed (nominal) Kueue quota shrinks: usage above it is preemptible on reclaim",
    Risk.PREEMPTION_EXPOSED: "tier queue policy allows more preemption",
    Risk.TIER_RAISED: "tier raised: its pods can preempt more workloads",
    Risk.MAX_PER_POD_LIFTED: "per-pod GPU maximum raised or removed",
}


def _lift_limit(n: int | None) -> str:
    return "no limit" if n is None else f"{n:,}"


def alert_lines(d, names: int = 10) -> list[tuple[str, str]]:
    """(title, "count — what") per risk; access changes say what changes; at most NAMES names each."""
    out = []
    by_name = {t.name: t for t in d.tenants}
    for a in d.alerts():
        if a.risk == Risk.ACCESS_CHANGED:
            what = [
                f"{n} ("
                + "; ".join(x.text.split(" (")[0] for x in by_name[n].details if x.aspect in ACCESS_ASPECTS)
                + ")"
                for n in a.names
            ]
        elif a.risk == Risk.FOREIGN_SERVICE_ACCOUNT:
            what = [f"{n} ({', '.join(by_name[n].foreign_service_accounts)})" for n in a.names]
        elif a.risk == Risk.NOMINAL_REDUCED:
            queues = {q.tenant: q for q in d.queues.tenants}
            what = [f"{n} ({reduced_text(queues[n])})" for n in a.names]
        elif a.risk == Risk.TIER_RAISED:
            what = [
                f"{n} (tier {r.tier_before} → {r.tier_after}; {raise_text(r)})"
                for n in a.names
                if (r := by_name[n].tier_raise) is not None
            ]
        elif a.risk == Risk.MAX_PER_POD_LIFTED:
            what = [
                f"{n} ("
                + ", ".join(
                    f"{x.resource} {_lift_limit(x.before)} → {_lift_limit(x.after)}"
                    for x in by_name[n].max_per_pod_lifts
                )
                + ")"
                for n in a.names
            ]
        elif a.risk == Risk.PREEMPTION_EXPOSED:
            what = [
                f"{n} ("
                + "; ".join(
                    f"{t.field.value} {limit_text(t.before)} → {limit_text(t.after)}"
                    for t in d.queues.exposing
                    if t.tier == n
                )
                + ")"
                for n in a.names
            ]
        else:
            what = list(a.names)
        out.append((_ALERT_TITLE[a.risk], f"{a.count:,} — {_names(what, names)}" if names else f"{a.count:,}"))
    return out


def _context_lines(base: Side, head: Side, d) -> list[str]:
    out = []
    if not d.comparable:
        which = [s for s in (base, head) if s.exists and s.spec is None]
        out.append(
            "Nothing was compared: "
            + " and ".join(f"{s.name} ({s.label})" for s in which)
            + " could not be read far enough to build a model; fix the errors first."
        )
    elif not head.valid and any(u.side == "HEAD" for u in d.unknown):
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


def _no_changes(head: Side, d) -> str | None:
    """What to say when nothing changes: never "no changes" for an invalid HEAD, whose errors may hide some."""
    if not d.empty or not d.comparable:
        return None
    if not head.valid:
        return "No change among the parts both sides could read; HEAD's errors may hide changes (fix them first)."
    return "No changes."


# -- text ------------------------------------------------------------------------------------------


def _slice_maps(c) -> list[str]:
    """Before/after slice maps, one per MIG group (the GPUs of a group share one layout)."""
    from gpupool.present.mig import slice_map

    out = []
    for title, side in (("before", c.slices_before), ("after", c.slices_after)):
        if side.model is None:
            out.append(f"{title}: MIG disabled (whole GPUs)")
            continue
        for group in side.groups:
            ids = ",".join(str(g) for g in group.gpus)
            out.append(f"{title}: {safe(side.model.name)} GPU {ids}")
            out.extend(slice_map(side.model, group.placements).splitlines())
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

    section("Alerts", [f"⚠ {title}: {what}" for title, what in alert_lines(d, names=30)])
    section("Not compared", _unknown_lines(d))
    section("Tenants", [f"{r.marker} {r.text}" for r in _tenant_rows(d)])
    section("Pulumi stacks (sharding)", _stack_lines(d))
    rows = _headroom_rows(d)
    if rows:
        lines.append("Headroom (allowed by the oversubscription policy minus granted), before → after")
        lines.extend("  " + line for line in text_table(HEADROOM_HEADERS, rows).splitlines())
        lines.append("")
    section("Queues (Kueue)", [f"{r.marker} {r.text}" for r in queue_rows(d.queues)])
    section("Pools", _pool_lines(d))
    section(
        "MIG layout changes", [x for sentence, detail in _mig_lines(d) for x in [sentence, *(f"  {y}" for y in detail)]]
    )
    for c in d.evicting:
        section(f"MIG slices, pool {c.pool}", _slice_maps(c))
    section("Device-plugin config", [t if m == "!" else f"{m} {t}" for m, t in _plugin_lines(d)])
    for c in d.configs:
        section(f"{_config_title(c)}", c.unified.rstrip("\n").splitlines())
    section("Rendered objects (gpupool render)", [f"{m} {t}" for m, t in _object_lines(d)])
    nothing = _no_changes(head, d)
    if nothing:
        lines.append(nothing[0].lower() + nothing[1:].rstrip("."))
    # Every line may hold text from a spec: no escape sequence, carriage return or newline of it gets through.
    return "\n".join(safe(line) for line in lines).rstrip("\n") + "\n"


def _config_title(c) -> str:
    what = "MIG Manager config" if c.config == "mig" else "device-plugin config"
    return f"pool {c.pool}: {what} {c.name_before or '(none)'} → {c.name_after or '(none)'}"


# -- markdown --------------------------------------------------------------------------------------


_MD_MARK = {"+": "**added**", "-": "**removed**", "~": "**changed**", "⚠": "⚠", "!": "note:"}


# Per resource after the change, three bars from zero drawn over each other (mermaid draws a category's bars
# at one place, later series on top): red = granted, light = allowed by the policy on top of it, dark = the
# granted part within allowed on top of both. So dark is granted, light is free, and red shows only where more
# is granted than allowed. Every bar is a quantity that starts at zero: no bar length stands for a negative
# number. The numbers are in the category labels, because mermaid's own data labels repeat the first series'
# values on every series (mermaid 11.17.2). The value axis has no tick labels: mermaid starts every bar at the
# plot's edge but maps values onto a range inset by half that label width, so with them every bar was ~12
# pixels too long and 0 a stub like a short bar (barPlot.ts; BaseAxis.getRange).
_CHART_COLORS = "#C62828, #BFD3EA, #1F4E8C"


def _chart_label(h) -> str:
    name = h.resource.removeprefix("nvidia.com/")
    granted, allowed, room = h.granted_after or 0, h.allowed_after or 0, h.headroom_after
    state = (
        "removed" if room is None else f"{-room:,} OVER" if room < 0 else "now FULL" if room == 0 else f"{room:,} free"
    )
    was = "" if h.headroom_before is None else f", was {h.headroom_before:,}"
    return f"{name}: {granted:,} of {allowed:,} ({state}{was})"


def mermaid_headroom(d) -> str | None:
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

    def nums(xs):
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
        return f"<details{attr}><summary>{html_text(self.summary)}</summary>\n\n{body}{self.tail}\n</details>\n"


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


def _counts(parts: list[tuple[int, str]]) -> str:
    return ", ".join(f"{n:,} {what}" for n, what in parts if n) or "none"


def _sections(base: Side, head: Side, d, preview: str | None) -> list[_Section]:
    out = []
    rows = _tenant_rows(d, group=True)
    if rows:
        s = d.summary()
        out.append(
            _Section(
                "tenant rows",
                "Tenants: "
                + _counts(
                    [
                        (s["tenantsOnboarded"], "onboarded"),
                        (s["tenantsChanged"], "changed"),
                        (s["tenantsOffboarded"], "offboarded"),
                        (s["tenantsRemoved"], "removed"),
                    ]
                ),
                [_Item(f"| {r.marker} | {r.md()} |", r.rank) for r in rows],
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
                [_Item(f"- {inline(line)}", RANK_TENANT_RISK) for line in sl],
                open=len(sl) <= 20,
            )
        )
    cells = _headroom_rows(d)
    if cells:
        table = md_table(HEADROOM_HEADERS, cells, (1, 2, 3, 4))
        chart = mermaid_headroom(d)
        lines = table.rstrip("\n").split("\n")
        out.append(
            _Section(
                "resources",
                f"Headroom (allowed by the oversubscription policy minus granted): "
                f"{_plural(len(cells), 'resource')} change",
                [_Item(r, RANK_HEADROOM) for r in lines[2:]],
                head="\n".join(lines[:2]) + "\n",
                tail=("\n" + fenced(chart, "mermaid")) if chart else "",
                open=True,
            )
        )
    qrows = queue_rows(d.queues)
    if qrows:
        out.append(
            _Section(
                "queue rows",
                "Queues (Kueue): " + (summary_line_queues(d) or "changes"),
                [
                    _Item(f"| {r.marker} | {inline(r.text)} |", RANK_TENANT_RISK if r.risky else RANK_QUOTA)
                    for r in qrows
                ],
                head="|  | QUEUE CHANGE |\n|---|---|\n",
                open=len(qrows) <= 20,
            )
        )
    pools = _pool_lines(d)
    if pools:
        marks = {"+": "**added**", "-": "**removed**", "~": "**changed**"}
        out.append(
            _Section(
                "pool items",
                f"Pools: {_plural(len(d.pools), 'pool')} change (nodes joining or leaving)",
                [_Item(f"- {marks[x[0]]} {inline(x[2:])}", RANK_MIG) for x in pools],
                open=True,
            )
        )
    mig = _mig_lines(d)
    if mig:
        items = [
            _Item(f"- **{inline(sentence)}**" + "".join(f"\n  - {inline(x)}" for x in detail), RANK_MIG)
            for sentence, detail in mig
        ]
        items += [
            _Item(
                f"**pool {inline(c.pool)}**, MIG slices per GPU (which profile holds which memory slices):\n\n"
                + fenced("\n".join(_slice_maps(c))),
                RANK_MIG,
            )
            for c in d.evicting
        ]
        out.append(
            _Section(
                "MIG items",
                f"MIG layout changes: {_plural(len(d.evicting), 'pool')} re-laid out",
                items,
                sep="\n\n",
                open=True,
            )
        )
    pl = _plugin_lines(d)
    if pl or d.configs:
        items = [_Item(f"- {_MD_MARK.get(m, m)} {inline(t)}", RANK_CONFIG) for m, t in pl]
        items += [_Item(f"{inline(_config_title(c))}\n\n" + fenced(c.unified, "diff"), RANK_CONFIG) for c in d.configs]
        out.append(
            _Section(
                "config items",
                f"Config changes: {_plural(len(d.configs), 'config entry', 'config entries')} "
                "(MIG Manager, device plugin)",
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
    tail = ("\n".join(safe(x) for x in summary) + "\n" if summary else "") + f"{fence}\n"
    return _Section(
        "preview lines",
        "pulumi preview --diff",
        [_Item(safe(x), RANK_PREVIEW) for x in body],
        head=f"{fence}diff\n",
        tail=tail,
    )


@dataclass(frozen=True)
class _Shown:
    """How much of the fixed parts is shown: all of it uncut, less when even they would not fit."""

    errors: int | None = MAX_ERRORS_SHOWN  # per side; None: all
    warnings: int | None = MAX_WARNINGS_SHOWN  # eviction sentences and items not compared
    names: int = 10  # per alert


# Tried in turn until the comment fits: fewer errors, alert names and lines (each says how many more there are).
_SHRINK = (_Shown(), _Shown(10, 10, 5), _Shown(3, 5, 3), _Shown(1, 2, 1), _Shown(0, 0, 0))


@dataclass(frozen=True)
class Heading:
    """What tells the dev comment from the prod one: the stack, the commit, where the full diff is."""

    stack: str | None = None
    commit: str | None = None
    artifact_url: str | None = None  # the workflow run whose artifacts hold the full diff
    artifact: str | None = None  # the artifact's name


_SAFE_URL = re.compile(r"https://[A-Za-z0-9._~:/?#@!$&'*+,;=%-]+")


def _linkable(url: str) -> bool:
    """An https URL of plain characters with no userinfo: a comment is read by everyone who can read the
    pull request, so a `https://user:token@host/...` is not linked (nor quoted)."""
    authority = url[len("https://") :].split("/", 1)[0]
    return bool(_SAFE_URL.fullmatch(url)) and "(" not in url and "@" not in authority


def _title(base: Side, head: Side, h: Heading) -> str:
    parts = ["## gpupool diff"]
    if h.stack:
        parts.append(f"stack {code(h.stack)}")
    if h.commit:
        parts.append(f"commit {code(h.commit[:12])}")
    line2 = f"{code(base.label)} → {code(head.label)}"
    if h.artifact_url and _linkable(h.artifact_url):
        name = f" {code(h.artifact)}" if h.artifact else ""
        line2 += f" · [full diff: artifact{name} of this run]({h.artifact_url.replace(')', '%29')})"
    return " · ".join(parts) + f"\n\n{line2}\n"


def _error_list(side: Side, listed) -> str:
    """Errors as a list: the location in code, the message as text that wraps."""
    out = []
    for e in listed:
        loc = e.location
        where = code(f"{side.prefix}{loc.file}:{loc.line}:{loc.column}")
        rule = f" {e.rule}" if e.rule else ""
        path = f"{code(e.path)}: " if e.path else ""
        out.append(f"- {where} **{e.severity}{rule}**: {path}{inline(e.message)}")
    return "\n".join(out) + ("\n" if out else "")


def _fixed_parts(base: Side, head: Side, d, ok: bool, shown: _Shown, heading: Heading) -> list[str]:
    out = [_title(base, head, heading), f"**{inline(_verdict(base, head, d, ok))}** Plan: {summary_line(d)}\n"]
    boxes = []
    for side in (head, base):
        if side.valid or not side.exists:
            continue
        errs = side.error_diagnostics
        listed = errs if shown.errors is None else errs[: shown.errors]
        body = _error_list(side, listed)
        more = len(errs) - len(listed)
        if more:
            body += f"\n✂ {_plural(more, 'more error')}: see the full diff or run `gpupool validate`.\n"
        these = "this error is" if len(errs) == 1 else f"these {len(errs):,} errors are"
        if side is head:
            # The errors inside the box: a list right after it would run into the next one.
            quoted = "".join(f"> {line}\n" if line else ">\n" for line in body.rstrip("\n").split("\n"))
            boxes.append(
                "> [!CAUTION]\n> **HEAD is invalid: this change cannot be applied** until "
                f"{these} fixed (shown as annotations on the changed lines in CI).\n>\n" + quoted
            )
        else:
            boxes.append(f"BASE has {_plural(len(errs), 'error')} (compared with the parts that validated):\n\n" + body)
    out.extend(boxes)
    context = _context_lines(base, head, d)
    if context:
        out.append("\n\n".join(inline(c) for c in context) + "\n")
    risks = [f"> - **{inline(title)}:** {inline(what)}" for title, what in alert_lines(d, shown.names)]
    warnings = [f"> - **{inline(sentence)}**" for sentence, _ in _mig_lines(d)]
    warnings += [f"> - {inline(x)}" for x in _unknown_lines(d)]
    if risks or warnings:
        listed_w = warnings if shown.warnings is None else warnings[: shown.warnings]
        more = len(warnings) - len(listed_w)
        if more:
            listed_w.append(f"> - ✂ … and {more:,} more (see the sections below and the full diff)")
        out.append("> [!WARNING]\n" + "\n".join(risks + listed_w) + "\n")
    nothing = _no_changes(head, d)
    if nothing:
        out.append(nothing + "\n")
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
    heading: Heading | None = None,
) -> str:
    """The pull-request comment. With a `limit` (characters) the comment, and the sticky-comment marker the
    workflow's action adds to it, always fit: the least important items are cut first (RANK_*), then
    fewer errors and alert lines are listed; None keeps everything."""
    heading = heading or Heading()
    sections = _sections(base, head, d, preview)
    if limit is None:
        fixed = _fixed_parts(base, head, d, ok, _Shown(None, None, 10_000), heading)
        return "\n".join(fixed + [s.render() for s in sections])
    where = (
        f"the full diff is in {code(full_output)} (uploaded as a workflow artifact)"
        if full_output
        else "run `gpupool diff` with `--full-output FILE` for the full diff"
    )
    budget = limit - STICKY_MARKER_MARGIN if limit > 4 * STICKY_MARKER_MARGIN else limit
    for shown in _SHRINK:
        text = _fit(_fixed_parts(base, head, d, ok, shown, heading), sections, budget, where)
        if text is not None:
            return text
    # Only the verdict and the summary line are left: pathological input (paths of thousands of characters).
    first = _fixed_parts(base, head, d, ok, _SHRINK[-1], heading)[:2]
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
        # The solver's placements are the slice maps' input, not part of the document (docs/diff-json.md).
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


FORMATTERS = {"text": format_text, "markdown": format_markdown, "json": format_json}
