"""When a side is invalid, only what the valid parts of both sides support is compared: an item one side
could not read is taken from the other side on both, so it shows no change, and is listed as `Unknown`
instead (a tenant whose file failed to load is "unreadable", never "removed")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gpupool.model import platform as m

if TYPE_CHECKING:
    from gpupool.analysis.sides import Gaps


class UnknownCause(StrEnum):
    INVALID = "invalid"  # the item is there but failed validation
    FILE_UNREADABLE = "fileUnreadable"  # its tenant file could not be read
    MAYBE_UNREADABLE = "maybeUnreadable"  # absent, and the side has unreadable items it may be among
    NEW_INVALID = "newInvalid"  # only in HEAD, and invalid there
    GONE_INVALID = "goneInvalid"  # only in BASE, invalid there


@dataclass(frozen=True)
class Unknown:
    """An item one side could not read: compared as the other side has it, so it shows no change."""

    section: str  # "tenant" | "tier" | "pool" | "oversubscription" | "queueing"
    name: str
    side: str  # "BASE" | "HEAD"
    reason: str
    cause: UnknownCause = UnknownCause.INVALID

    @property
    def unreadable(self) -> bool:
        return self.cause in (UnknownCause.FILE_UNREADABLE, UnknownCause.MAYBE_UNREADABLE)


def _missing_reason(
    section: str, name: str, item, spec: m.Spec, gaps: Gaps, side: str
) -> tuple[UnknownCause, str] | None:
    """Why an item of the other side may be hidden in this side's gaps (None: it is really absent)."""
    from gpupool.analysis.sides import spec_relative

    if name in gaps.named(section):
        return UnknownCause.INVALID, f"invalid in {side}"
    if section == "tenants" and item.source_file and item.source_file != spec.source_path and gaps.tenant_files:
        if spec_relative(spec.source_path, item.source_file) in gaps.tenant_files:
            return UnknownCause.FILE_UNREADABLE, f"its tenant file could not be read in {side}"
    if section in gaps.unnamed or (section == "tenants" and gaps.tenant_files):
        what = {"tenants": "tenant files or entries", "tiers": "tiers", "pools": "node pools"}[section]
        return (
            UnknownCause.MAYBE_UNREADABLE,
            f"not found among {side}'s readable items, and {side} has unreadable {what}",
        )
    return None


def _insert(own: tuple, added: list, other: tuple) -> tuple:
    """own plus items taken from other, each placed after the item that precedes it in other (order
    matters: configs are rendered in spec order, and a reordering must not show up as a change)."""
    out = list(own)
    for item in added:
        i = [x.name for x in other].index(item.name)
        before = {x.name for x in other[:i]}
        at = max((k + 1 for k, x in enumerate(out) if x.name in before), default=0)
        out.insert(at, item)
    return tuple(out)


def reconcile(
    base: m.Spec | None, head: m.Spec | None, base_gaps: Gaps | None, head_gaps: Gaps | None
) -> tuple[m.Spec | None, m.Spec | None, list[Unknown]]:
    """(base', head', unknown): an item one side could not read takes the other side's value on both sides."""
    if (
        base is None
        or head is None
        or ((base_gaps is None or base_gaps.empty) and (head_gaps is None or head_gaps.empty))
    ):
        return base, head, []
    from gpupool.analysis.sides import Gaps

    gb, ga = base_gaps or Gaps(), head_gaps or Gaps()
    unknown: list[Unknown] = []
    fields = {}
    for section, label in (("tenants", "tenant"), ("tiers", "tier"), ("pools", "pool")):
        items_b = {x.name: x for x in getattr(base, section)}
        items_a = {x.name: x for x in getattr(head, section)}
        add_b, add_a = [], []
        for name, item in items_b.items():
            if name not in items_a:
                why = _missing_reason(section, name, item, base, ga, "HEAD")
                if why:
                    add_a.append(item)
                    unknown.append(Unknown(label, name, "HEAD", why[1], why[0]))
        for name, item in items_a.items():
            if name not in items_b:
                why = _missing_reason(section, name, item, head, gb, "BASE")
                if why:
                    add_b.append(item)
                    unknown.append(Unknown(label, name, "BASE", why[1], why[0]))
        for name in sorted(ga.named(section) - set(items_b) - set(items_a)):
            unknown.append(
                Unknown(label, name, "HEAD", "new in HEAD and invalid there: not counted", UnknownCause.NEW_INVALID)
            )
        for name in sorted(gb.named(section) - set(items_b) - set(items_a)):
            unknown.append(
                Unknown(
                    label, name, "BASE", "invalid in BASE and absent from HEAD: not counted", UnknownCause.GONE_INVALID
                )
            )
        fields[section] = (
            _insert(getattr(base, section), add_b, getattr(head, section)),
            _insert(getattr(head, section), add_a, getattr(base, section)),
        )

    def same_where_invalid(block: str, invalid_head: bool, invalid_base: bool) -> tuple[Any, Any]:
        """BASE's and HEAD's BLOCK, the valid side's on both when one side's did not validate (an invalid
        `queueing:` block is absent from the model: not "queueing turned off")."""
        b, a = getattr(base, block), getattr(head, block)
        if invalid_head:
            unknown.append(Unknown(block, block, "HEAD", "invalid in HEAD"))
            return b, b
        if invalid_base:
            unknown.append(Unknown(block, block, "BASE", "invalid in BASE"))
            return a, a
        return b, a

    over_b, over_a = same_where_invalid("oversubscription", ga.oversubscription, gb.oversubscription)
    queue_b, queue_a = same_where_invalid("queueing", ga.queueing, gb.queueing)
    base2 = replace(
        base,
        tenants=fields["tenants"][0],
        tiers=fields["tiers"][0],
        pools=fields["pools"][0],
        oversubscription=over_b,
        queueing=queue_b,
    )
    head2 = replace(
        head,
        tenants=fields["tenants"][1],
        tiers=fields["tiers"][1],
        pools=fields["pools"][1],
        oversubscription=over_a,
        queueing=queue_a,
    )
    return base2, head2, unknown
