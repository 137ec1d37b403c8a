"""The words every format leads with: the verdict, the summary line, the alerts, what was not compared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpupool.analysis.diff import ACCESS_ASPECTS, Alert, Risk, SpecDiff, UnknownCause, raise_text
from gpupool.present.diff.queues import limit_text, reduced_text
from gpupool.present.diff.words import counted, counts_text, name_list

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side


def summary_line(d: SpecDiff) -> str:
    """`2 tenants to onboard, 1 to change · 14 objects to add, 3 to change · ...` (terraform's "Plan: X to
    add, Y to change, Z to destroy"): only the counts that are not zero."""
    s = d.summary()

    def group(first: str, counts: list[tuple[int, str]]) -> str | None:
        parts = [(n, what) for n, what in counts if n]
        if not parts:
            return None
        head_n, head_what = parts[0]
        out = [f"{counted(head_n, first)} {head_what}"] + [f"{n:,} {what}" for n, what in parts[1:]]
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
        f"{counted(s['poolsRelaidOut'], 'pool')} re-laid out (evicting GPU workloads)" if s["poolsRelaidOut"] else None,
        f"{counted(s['poolsNotCompared'], 'pool')} not compared (invalid in a side; may change)"
        if s["poolsNotCompared"]
        else None,
        group("node", [(s["nodesJoining"], "joining"), (s["nodesLeaving"], "leaving")]),
        f"headroom changes on {counted(s['headroomChanges'], 'resource')}"
        + (f" ({s['negativeHeadroom']:,} NEGATIVE)" if s["negativeHeadroom"] else "")
        if s["headroomChanges"]
        else None,
        f"{counted(s['tenantsMovingStack'], 'tenant')} moving between Pulumi stacks"
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
        f"{counted(s['queuePolicyChanges'], 'queue policy change')} (tiers, cohorts)"
        if s["queuePolicyChanges"] and not (d.queues.turned_on or d.queues.turned_off)
        else None,
    ]
    shown = [p for p in parts if p]
    return " · ".join(shown) if shown else "no changes"


def summary_line_queues(d: SpecDiff) -> str:
    """The Queues section's counts: `2 added, 3 changed, 1 tier or cohort policy change`."""
    s = d.summary()
    if d.queues.turned_on or d.queues.turned_off:
        return "queueing turned " + ("on" if d.queues.turned_on else "off")
    parts = [
        counts_text([(s["queuesAdded"], "added"), (s["queuesChanged"], "changed"), (s["queuesRemoved"], "removed")]),
        counted(s["queuePolicyChanges"], "tier or cohort policy change") if s["queuePolicyChanges"] else "",
    ]
    return ", ".join(p for p in parts if p and p != "none")


def _risk_phrase(d: SpecDiff, a: Alert) -> str:
    """The verdict's words for one alert: what the change does."""
    n = a.count
    if a.risk == Risk.ACCESS_CHANGED:
        escalating = sum(t.escalates for t in d.tenants if t.name in set(a.names))
        verb = "escalates" if escalating else "changes"
        return f"{verb} the access of {counted(n, 'tenant')}"
    return {
        Risk.NAMESPACE_DELETED: f"DELETES {counted(n, 'namespace')}",
        Risk.DELETION_PROTECTION_LOST: f"removes the deletion protection of {counted(n, 'namespace')}",
        Risk.NAMESPACE_UNMANAGED: f"leaves {counted(n, 'namespace')} unmanaged",
        Risk.FOREIGN_SERVICE_ACCOUNT: f"binds ServiceAccounts of other namespaces in {counted(n, 'tenant')}",
        Risk.EVICTION: f"evicts GPU workloads on {counted(n, 'node')}",
        Risk.REBOOT: f"reboots the nodes of {counted(n, 'pool')}",
        Risk.STACK_MOVE: f"moves {counted(n, 'tenant')} between Pulumi stacks",
        Risk.NODES_REMOVED: f"removes {counted(n, 'node')}",
        Risk.QUEUEING_ON: f"turns Kueue queueing on for {counted(n, 'tenant')}",
        Risk.QUEUEING_OFF: f"turns Kueue queueing off ({counted(n, 'queue')} deleted)",
        Risk.NOMINAL_REDUCED: f"reduces the guaranteed Kueue quota of {counted(n, 'tenant')}",
        Risk.PREEMPTION_EXPOSED: f"exposes the workloads of {counted(n, 'tier')} to more preemption",
        Risk.TIER_RAISED: f"raises the tier (priority) of {counted(n, 'tenant')}",
        Risk.MAX_PER_POD_LIFTED: f"lifts the per-pod GPU maximum of {counted(n, 'tenant')}",
        Risk.ALLOCATION_CUTOVER: f"switches {counted(n, 'pool')} between the device plugin and DRA",
    }[a.risk]


def verdict_class(head: Side, d: SpecDiff, ok: bool) -> str:
    """ "blocked" (✗ cannot apply), "risky" (⚠ applies but destroys, evicts, escalates or moves stacks) or
    "routine" (✓)."""
    if not head.valid or not ok:
        return "blocked"
    return "risky" if d.alerts() else "routine"


def verdict(base: Side, head: Side, d: SpecDiff, ok: bool) -> str:
    """The first words: can this change be applied, and is it more than routine?"""
    if not head.valid:
        return f"✗ HEAD is INVALID ({counted(head.errors, 'error')}): this change cannot be applied."
    if not ok:
        over = [h.resource for h in d.headroom if h.headroom_after is not None and h.headroom_after < 0]
        return f"✗ HEAD leaves negative headroom ({', '.join(over)}): this change cannot be applied."
    alerts = d.alerts()
    if alerts:
        return "⚠ HEAD applies, but it " + "; ".join(_risk_phrase(d, a) for a in alerts) + "."
    return "✓ HEAD is valid, every resource keeps non-negative headroom, and the change is routine."


ALERT_TITLE = {
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
    Risk.ALLOCATION_CUTOVER: "allocation cutover: another mechanism hands out the pool's devices (docs/explanation/dra.md)",
}


def _lift_limit(n: int | None) -> str:
    return "no limit" if n is None else f"{n:,}"


def alert_lines(d: SpecDiff, names: int = 10) -> list[tuple[str, str]]:
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
        out.append((ALERT_TITLE[a.risk], f"{a.count:,} — {name_list(what, names)}" if names else f"{a.count:,}"))
    return out


def unknown_lines(d: SpecDiff) -> list[str]:
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


def context_lines(base: Side, head: Side, d: SpecDiff) -> list[str]:
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
            f"BASE {base.label} is invalid ({counted(base.errors, 'error')}); its unreadable parts are "
            "compared as HEAD has them."
        )
    return out


def no_changes(head: Side, d: SpecDiff) -> str | None:
    """What to say when nothing changes: never "no changes" for an invalid HEAD, whose errors may hide some."""
    if not d.empty or not d.comparable:
        return None
    if not head.valid:
        return "No change among the parts both sides could read; HEAD's errors may hide changes (fix them first)."
    return "No changes."
