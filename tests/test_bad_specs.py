"""Data-driven corpus of bad specs: each case declares the diagnostics it must produce.

A case is either `tests/bad_specs/<name>.yaml` or a directory `tests/bad_specs/<name>/` holding `spec.yaml`
(and usually a `tenants/` directory of tenant files). The spec starts with one or more lines

    # expect: [FILE:]LINE:COL SEVERITY RULE: SUBSTRING OF THE MESSAGE

FILE defaults to the spec itself; for tenant-file cases it is the tenant file relative to the case directory
(e.g. tenants/empty.yaml). A case may hold symlinks (tenant files pointing into tests/bad_specs/_outside, which is
not a case). Every expected diagnostic must be reported with exactly that file, line, column and
rule id (GP123), every diagnostic must carry a registered rule id, and `gpupool validate` must exit 1 without a
traceback.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file
from gpupool.rules.registry import RULES

CORPUS = Path(__file__).resolve().parent / "bad_specs"
EXPECT = re.compile(
    r"^# expect: (?:(?P<file>[^\s:]+):)?(?P<line>\d+):(?P<col>\d+) (?P<severity>error|warning) "
    r"(?P<rule>GP\d{3}): (?P<message>.+)$"
)


def _cases() -> list[Path]:
    cases = sorted(p for p in CORPUS.glob("*.yaml"))
    cases += sorted(p / "spec.yaml" for p in CORPUS.iterdir() if (p / "spec.yaml").is_file())
    return sorted(cases, key=lambda p: _case_name(p))


def _case_name(spec: Path) -> str:
    return spec.parent.name if spec.name == "spec.yaml" and spec.parent != CORPUS else spec.stem


def _expectations(spec: Path) -> list[dict]:
    out = []
    for line in spec.read_bytes().decode("utf-8", "replace").splitlines():
        if line.startswith("# expect:"):
            match = EXPECT.match(line)
            assert match, f"{spec}: malformed expectation line {line!r}"
            out.append(match.groupdict())
    return out


CASES = _cases()


def test_corpus_is_large_enough():
    assert len(CASES) >= 45
    assert sum(1 for p in CASES if p.name == "spec.yaml") >= 5  # tenant-file cases


def test_corpus_covers_every_security_and_derived_name_rule():
    """Every GP8xx/GP9xx rule (issue 9: untrusted tenant files) has cases asserting its id."""
    asserted = {e["rule"] for p in CASES for e in _expectations(p)}
    ours = {r for r in RULES if r.startswith(("GP8", "GP9"))}
    assert ours - asserted == set(), f"rules without a bad-spec case: {sorted(ours - asserted)}"
    assert sum(1 for p in CASES if _case_name(p).startswith(("sec-", "names-", "num-", "yaml9-"))) >= 60


@pytest.mark.parametrize("spec", CASES, ids=_case_name)
def test_bad_spec_reports_expected_diagnostics(spec: Path):
    expectations = _expectations(spec)
    assert expectations, f"{spec} declares no `# expect:` line"
    result = validate_file(spec, cwd=spec.parent)
    diagnostics = result.report.sorted()
    rendered = "\n".join(d.render() for d in diagnostics)
    assert result.spec is None, "a bad spec must not produce a model"
    for exp in expectations:
        file = exp["file"] or spec.name
        hits = [
            d
            for d in diagnostics
            if d.location.file == file
            and d.location.line == int(exp["line"])
            and d.location.column == int(exp["col"])
            and d.severity == exp["severity"]
            and d.rule == exp["rule"]
            and exp["message"] in d.render()
        ]
        assert hits, (
            f"expected {file}:{exp['line']}:{exp['col']} {exp['severity']} {exp['rule']}: {exp['message']}"
            f"\ngot:\n{rendered}"
        )
    for d in diagnostics:
        assert d.location.line >= 1 and d.location.column >= 1 and d.message
        assert d.rule in RULES, f"diagnostic without a registered rule id: {d.render()}"


@pytest.mark.parametrize("spec", CASES, ids=_case_name)
def test_bad_spec_cli_exits_1_without_traceback(spec: Path, capsys):
    status = main(["validate", str(spec)])
    out, err = capsys.readouterr()
    assert status == 1
    assert "Traceback" not in out + err
    for line in err.splitlines()[:-1]:  # the last line is the summary
        assert re.match(r"^[^:]+:\d+:\d+: (error|warning): .+ \[GP\d{3}\]$", line), line
