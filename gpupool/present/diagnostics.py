"""Diagnostics for people and for machines: text, JSON, GitHub workflow commands, SARIF 2.1.0.

Every format carries the rule id. `Checked` is one validated spec: its label, its diagnostics (sorted) and
the counts shown in its summary line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.spec.diagnostics import Diagnostic

FORMATS = ("text", "json", "github", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
JSON_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Checked:
    path: str
    diagnostics: Sequence[Diagnostic]
    ok: bool  # valid (and, under --strict, free of warnings)
    summary: str  # "ok (2 pools, 3 tiers, 3 tenants)" or "1 errors, 0 warnings"

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)

    @property
    def warnings(self) -> int:
        return len(self.diagnostics) - self.errors


def _message(d: Diagnostic) -> str:
    return f"{d.path}: {d.message}" if d.path else d.message


def diagnostic_json(d: Diagnostic) -> dict[str, object]:
    """One diagnostic as `validate -o json` (and `tenant new -o json`) write it."""
    return {
        "rule": d.rule,
        "severity": d.severity,
        "file": d.location.file,
        "line": d.location.line,
        "column": d.location.column,
        "path": d.path,
        "message": d.message,
    }


def as_json(checked: Sequence[Checked]) -> str:
    return (
        json.dumps(
            {
                "schemaVersion": JSON_SCHEMA_VERSION,
                "ok": all(c.ok for c in checked),
                "specs": [
                    {
                        "path": c.path,
                        "ok": c.ok,
                        "errors": c.errors,
                        "warnings": c.warnings,
                        "diagnostics": [diagnostic_json(d) for d in c.diagnostics],
                    }
                    for c in checked
                ],
            },
            indent=2,
        )
        + "\n"
    )


def _escape_data(text: str) -> str:
    # The runner's own escaping (toolkit/core command.ts): %, CR and LF in the message ...
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    # ... and additionally ':' and ',' in property values.
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def as_github(checked: Sequence[Checked]) -> str:
    """GitHub Actions workflow commands: each problem becomes an annotation on its file and line."""
    lines = []
    for c in checked:
        for d in c.diagnostics:
            props = ",".join(
                f"{k}={_escape_property(str(v))}"
                for k, v in (
                    ("file", d.location.file),
                    ("line", d.location.line),
                    ("col", d.location.column),
                    ("title", d.rule),
                )
            )
            lines.append(f"::{'error' if d.is_error else 'warning'} {props}::{_escape_data(_message(d))}")
    return "".join(line + "\n" for line in lines)


def as_sarif(checked: Sequence[Checked], version: str) -> str:
    """One SARIF 2.1.0 run: every registered rule in tool.driver.rules, one result per diagnostic."""
    from urllib.parse import quote

    from gpupool import rules as _package  # noqa: F401  (registers every rule)
    from gpupool.rules.docs import help_uri, parse
    from gpupool.rules.registry import RULES

    ids = sorted(RULES)
    index = {rule_id: i for i, rule_id in enumerate(ids)}
    rules = []
    for rule_id in ids:
        r = RULES[rule_id]
        entry = {"id": rule_id, "shortDescription": {"text": r.title}, "helpUri": help_uri(rule_id)}
        why = parse(r.doc).why
        if why:
            entry["fullDescription"] = {"text": why}
        rules.append(entry)
    results = []
    for c in checked:
        for d in c.diagnostics:
            result: dict[str, object] = {
                "ruleId": d.rule,
                "level": "error" if d.is_error else "warning",
                "message": {"text": _message(d)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": quote(d.location.file.replace("\\", "/"))},
                            "region": {"startLine": d.location.line, "startColumn": d.location.column},
                        }
                    }
                ],
            }
            if d.rule in index:
                result["ruleIndex"] = index[d.rule]
            results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "gpupool", "version": version, "rules": rules}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
