"""The rule registry: every semantic check is a small function with a stable id.

A rule is registered with `@rule("GP123", "one-line title")`. Its docstring says why the rule exists and
carries two examples, fenced as ``Passes:`` and ``Fails:`` YAML snippets; `docs/reference/rules.md` is generated from
them (`python -m gpupool.rules.docs`) and a test fails when it is stale. Rules run after the model was built
from the schema-valid parts of the spec, in id order; each reads the model and the raw data through a
`Context` and reports through it, so every diagnostic carries the id of the rule that found it.

Id ranges (one per concern, so parallel work never collides):
  GP0xx loading and schema        GP1xx cluster and operator      GP2xx node pools and MIG
  GP3xx sharing                   GP4xx tiers                     GP5xx tenants and quotas
  GP6xx capacity                  GP7xx rollout and admission     GP8xx security boundary (untrusted input)
  GP9xx derived names
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpupool.spec.diagnostics import ERROR, WARNING, Location, Report

if TYPE_CHECKING:
    from gpupool.model import platform as m
    from gpupool.model.build import Built
    from gpupool.spec.loader import LoadedSpec

RULE_ID = re.compile(r"^GP\d{3}$")


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    check: Callable[[Context], None] | None  # None: the check lives in the model builder (it gates building)
    doc: str = ""


RULES: dict[str, Rule] = {}


def _register(r: Rule) -> Rule:
    if not RULE_ID.match(r.id):
        raise ValueError(f"rule id {r.id!r} is not of the form GP123")
    if r.id in RULES and RULES[r.id].check is not r.check:
        raise ValueError(f"rule id {r.id} is registered twice ({RULES[r.id].title!r} and {r.title!r})")
    RULES[r.id] = r
    return r


def rule(rule_id: str, title: str) -> Callable[[Callable[[Context], None]], Callable[[Context], None]]:
    """Register a rule that runs on the built model: `@rule("GP501", "...") def f(ctx): ...`."""

    def wrap(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        _register(Rule(rule_id, title, fn, (fn.__doc__ or "").strip()))
        return fn

    return wrap


def declare(rule_id: str, title: str, doc: str) -> str:
    """Register a rule whose check runs while the model is built (it decides what gets built).

    Returns the id, to pass as `rule=` when reporting."""
    _register(Rule(rule_id, title, None, doc.strip()))
    return rule_id


@dataclass
class Context:
    """What a rule sees: the loaded spec (data and source locations), the model of whatever validated, and
    the paths the schema already rejected (rules skip those: reporting them again would be noise)."""

    loaded: LoadedSpec
    report: Report
    spec: m.Spec | None
    bad: set[tuple] = field(default_factory=set)
    current: str = ""  # id of the rule being run; set by the engine
    # The builder's view: the model even when the cluster section is broken (so capacity is still judged),
    # whether every pool was built, and the spec path of each built pool and tenant.
    built: Built | None = None
    # Tenants the change under review adds or edits (`tenant new`): an error several tenants share, such as a
    # resource granted beyond capacity, is blamed on one of them rather than on an unchanged neighbour.
    changed: frozenset[str] = frozenset()

    @property
    def data(self) -> Any:
        return self.loaded.data

    @property
    def spec_dir(self) -> Path:
        return Path(self.loaded.file_path or self.loaded.path).parent

    def usable(self, prefix: tuple) -> bool:
        """False when the schema rejected this path or anything below it."""
        n = len(prefix)
        return not any(p[:n] == prefix for p in self.bad)

    def location(self, path: tuple, *, key: bool = False) -> Location:
        return self.loaded.source.key(path) if key else self.loaded.source.value(path)

    def error(self, path: tuple, message: str, *, key: bool = False, rule: str = "") -> None:
        self._add(ERROR, path, message, key, rule)

    def warn(self, path: tuple, message: str, *, key: bool = False, rule: str = "") -> None:
        self._add(WARNING, path, message, key, rule)

    def _add(self, severity: str, path: tuple, message: str, key: bool, rule: str) -> None:
        self.report.add(severity, self.location(path, key=key), self.loaded.render(path), message, rule or self.current)


def run_rules(ctx: Context) -> None:
    """Run every registered model rule, in id order."""
    from gpupool import rules as _package  # noqa: F401  (importing the package registers every rule module)

    for rule_id in sorted(RULES):
        r = RULES[rule_id]
        if r.check is None:
            continue
        ctx.current = r.id
        r.check(ctx)
    ctx.current = ""
