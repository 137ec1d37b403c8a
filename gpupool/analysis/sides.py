"""One side of a diff (BASE or HEAD): its model, possibly partial, whether it validated, its diagnostics."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Side:
    """One side of the diff: its model (possibly partial), whether it validated, and its diagnostics."""

    name: str  # "BASE" | "HEAD"
    label: str  # what to call it: a path, or REF:path
    exists: bool = True
    valid: bool = False
    partial: bool = False  # spec is a best-effort model of an invalid file
    spec: object = None
    diagnostics: list = field(default_factory=list)
    prefix: str = ""  # prepended to diagnostic file names (e.g. "origin/main:")

    def rendered_diagnostics(self) -> list[str]:
        return [self.prefix + d.render() for d in self.diagnostics]

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)


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
    return side
