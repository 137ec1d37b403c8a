"""One side of a diff (BASE or HEAD): its model, possibly partial, whether it validated, its diagnostics, and
what of it could not be read (its `Gaps`), so that an unreadable tenant is never mistaken for a removed one."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpupool.model import platform as m
    from gpupool.spec.diagnostics import Diagnostic

# Raw spec sections whose items the model keeps by name; an item missing from the model is a gap.
_SECTIONS = (("tenants", "tenants"), ("tiers", "tiers"), ("nodePools", "pools"))


@dataclass
class Gaps:
    """What of one side did not make it into its (partial) model, by name where the name is known.

    `unnamed` holds the sections with an invalid item whose name is unknown (a tenant file that does not
    parse, a `tenantFiles` entry that cannot be read, a pool without a name): every item of the other side
    that is missing from this one may be that item, so the diff calls it unknown, not removed."""

    tenants: set[str] = field(default_factory=set)
    tenant_files: set[str] = field(default_factory=set)  # relative to the spec's directory
    tiers: set[str] = field(default_factory=set)
    pools: set[str] = field(default_factory=set)
    unnamed: set[str] = field(default_factory=set)  # "tenants" | "tiers" | "pools"
    oversubscription: bool = False
    queueing: bool = False  # the `queueing:` block is there but did not make it into the model

    def named(self, section: str) -> set[str]:
        return getattr(self, section)

    @property
    def empty(self) -> bool:
        return not (
            self.tenants
            or self.tenant_files
            or self.tiers
            or self.pools
            or self.unnamed
            or self.oversubscription
            or self.queueing
        )


def spec_relative(spec_label: str, file_label: str) -> str:
    """A file's path relative to its spec's directory: what BASE and HEAD have in common when their
    labels differ (a temporary checkout of the base, another directory)."""
    return posixpath.normpath(
        posixpath.relpath(Path(file_label).as_posix(), posixpath.dirname(Path(spec_label).as_posix()) or ".")
    )


def find_gaps(loaded, model) -> Gaps:
    """Compare the raw data of a loaded spec with the model that validated from it."""
    gaps = Gaps()
    data = loaded.data if isinstance(loaded.data, dict) else {}
    spec_label = loaded.path
    have = {
        "tenants": {t.name for t in model.tenants} if model else set(),
        "tiers": {t.name for t in model.tiers} if model else set(),
        "pools": {p.name for p in model.pools} if model else set(),
    }
    loaded_files = {spec_label}
    for raw_key, section in _SECTIONS:
        items = data.get(raw_key)
        if not isinstance(items, list):
            if items is not None:
                gaps.unnamed.add(section)
            continue
        for i, item in enumerate(items):
            where = loaded.source.value((raw_key, i)).file
            loaded_files.add(where)
            name = item.get("name") if isinstance(item, dict) else None
            if isinstance(name, str) and name in have[section]:
                continue
            if isinstance(name, str) and name:
                gaps.named(section).add(name)
            elif section != "tenants" or where == spec_label:
                gaps.unnamed.add(section)
            if section == "tenants" and where != spec_label:
                gaps.tenant_files.add(spec_relative(spec_label, where))
    for d in loaded.report.errors:
        if d.location.file not in loaded_files:
            # Errors in a file that contributed no tenant: it failed to load (parse error, encoding, refused).
            gaps.tenant_files.add(spec_relative(spec_label, d.location.file))
        elif d.location.file == spec_label and d.path.startswith("tenantFiles"):
            gaps.unnamed.add("tenants")  # an entry that could not be expanded: which tenants it holds is unknown
        if d.path.startswith("oversubscription"):
            gaps.oversubscription = True
    gaps.queueing = isinstance(data.get("queueing"), dict) and (model is None or model.queueing is None)
    return gaps


@dataclass
class Side:
    """One side of the diff: its model (possibly partial), whether it validated, and its diagnostics."""

    name: str  # "BASE" | "HEAD"
    label: str  # what to call it: a path, or REF:path
    exists: bool = True
    valid: bool = False
    partial: bool = False  # spec is a best-effort model of an invalid file
    spec: m.Spec | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    prefix: str = ""  # prepended to diagnostic file names (e.g. "origin/main:")
    gaps: Gaps = field(default_factory=Gaps)

    def rendered_diagnostics(self) -> list[str]:
        return [self.prefix + d.render() for d in self.diagnostics]

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)

    @property
    def error_diagnostics(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def comparable(self) -> bool:
        """A side that does not exist (a new stack) compares as empty; one that exists needs a model."""
        return not self.exists or self.spec is not None


def move_paths(side: Side, materialised_dir: str, real_dir: str) -> None:
    """A BASE read from a temporary checkout names its local chart under that checkout; name it as HEAD
    does (under the real spec directory), so the same chartPath is not a change. Labels are already
    relative (the side is loaded with the checkout as its cwd)."""
    from dataclasses import replace

    spec = side.spec
    if spec is None:
        return
    op = spec.cluster.operator
    if not op.chart_path or not op.chart_path.startswith(materialised_dir.rstrip("/") + "/"):
        return
    moved = real_dir.rstrip("/") + op.chart_path[len(materialised_dir.rstrip("/")) :]
    side.spec = replace(spec, cluster=replace(spec.cluster, operator=replace(op, chart_path=moved)))


def load_side(name: str, path: Path | None, label: str, *, cwd: Path | None = None, prefix: str = "") -> Side:
    from gpupool.rules.engine import validate_file

    if path is None:
        return Side(name, label, exists=False)
    result = validate_file(path, cwd=cwd)
    side = Side(name, label, diagnostics=result.report.sorted(), prefix=prefix)
    if result.spec is not None:
        side.valid, side.spec = True, result.spec
    else:
        side.spec = result.partial
        side.partial = side.spec is not None
        side.gaps = find_gaps(result.loaded, side.spec)
    return side
