"""Semantic validation: load, check against the schema, build the model, run the rules.

Every stage reports into one Report and skips only what an earlier stage already rejected, so one run
reports every problem it can. The model is returned only when there are no errors: nothing is applied
from an invalid spec.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpupool.model import platform as m
from gpupool.spec.diagnostics import Report, SpecError
from gpupool.spec.loader import LoadedSpec, load_spec


@dataclass
class Result:
    loaded: LoadedSpec
    report: Report
    spec: m.Spec | None  # only when there are no errors: nothing is applied from an invalid spec
    partial: m.Spec | None = None  # the model of whatever did validate (for diffs of invalid specs)

    @property
    def ok(self) -> bool:
        return self.spec is not None


def validate_file(path: str | Path, *, cwd: Path | None = None) -> Result:
    with _collector_paused():
        loaded = load_spec(path, cwd=cwd)
        return validate_loaded(loaded)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a spec is loaded and judged. Loading builds hundreds of
    thousands of small containers, each allocation burst triggers collections that traverse all of them and
    every imported module: with 1,000 tenants that was a third to half of validate's time. The data holds no
    reference cycles (reference counting frees it); collection resumes as before afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_valid_spec(path: str | Path) -> m.Spec:
    """The model of a valid spec, or SpecError carrying every diagnostic."""
    result = validate_file(path)
    if result.spec is None:
        raise SpecError(result.report.sorted())
    return result.spec


def validate_loaded(loaded: LoadedSpec, *, changed: frozenset[str] = frozenset()) -> Result:
    """Validate LOADED; CHANGED names the tenants the change under review adds or edits (see Context)."""
    report = loaded.report
    if loaded.data is None:
        return Result(loaded, report, None)
    import gpupool.rules  # noqa: F401  (importing the package registers every rule)
    from gpupool.model.build import build
    from gpupool.rules.registry import Context, run_rules
    from gpupool.spec import schema

    bad = schema.check(loaded, report)
    built = build(loaded, report, bad)
    spec = built.model if built is not None and built.complete else None
    run_rules(Context(loaded, report, spec, bad, built=built, changed=changed))
    return Result(loaded, report, spec if not report.errors else None, partial=spec)
