"""Every rule is documented with a passing and a failing example, and the examples do what they say.

For the rules on the model (GP1xx-GP7xx) each example replaces top-level keys of the docs' base spec: the
failing one must produce a diagnostic with the rule's id, the passing one none. GP0xx examples are whole
files; the bad-spec corpus exercises those ids. docs/reference/rules.md must be what the registry generates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpupool.rules import docs
from gpupool.rules.engine import validate_file
from gpupool.rules.registry import RULES

OURS = tuple(f"GP{n}" for n in range(1, 8))  # the model rules documented with base-spec examples
# GP8xx/GP9xx rules on the model too; the loader's (no check function) and GP809 (a tenant file's name) have
# whole-file examples, which the bad-spec corpus exercises.
FILE_EXAMPLES = {"GP809"}
MODEL_RULES = sorted(
    i
    for i in RULES
    if i.startswith(OURS) or (i.startswith(("GP8", "GP9")) and RULES[i].check is not None and i not in FILE_EXAMPLES)
)


def _ids(tmp_path: Path, snippet: str) -> list[str]:
    spec = yaml.safe_load(docs.EXAMPLE_BASE)
    spec.update(yaml.safe_load(snippet))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return [d.rule for d in validate_file(path, cwd=tmp_path).report.sorted()]


def test_base_spec_is_clean(tmp_path):
    assert _ids(tmp_path, "{}") == []


def test_every_id_the_builder_reports_is_declared():
    """gpupool.model.build names the ids of its checks (the model does not import rules); rules/ declares them."""
    from gpupool.model import build

    ids = {v for k, v in vars(build).items() if k.isupper() and isinstance(v, str) and v.startswith("GP")}
    assert len(ids) >= 25
    for rule_id in ids:
        assert rule_id in RULES and RULES[rule_id].check is None, rule_id


def test_rules_are_registered():
    assert len(MODEL_RULES) >= 30
    assert {"GP001", "GP002", "GP010"} <= set(RULES)


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_documented(rule_id):
    r = RULES[rule_id]
    doc = docs.parse(r.doc)
    assert r.title and r.title == r.title.strip() and "\n" not in r.title
    assert doc.passes and doc.fails, f"{rule_id} needs a Passes: and a Fails: example"


@pytest.mark.parametrize("rule_id", MODEL_RULES)
def test_failing_example_fires_the_rule(tmp_path, rule_id):
    ids = _ids(tmp_path, docs.parse(RULES[rule_id].doc).fails)
    assert rule_id in ids, ids


@pytest.mark.parametrize("rule_id", MODEL_RULES)
def test_passing_example_does_not(tmp_path, rule_id):
    ids = _ids(tmp_path, docs.parse(RULES[rule_id].doc).passes)
    assert rule_id not in ids, ids


def test_docs_rules_md_is_current():
    assert docs.DOCS_PATH.read_text(encoding="utf-8") == docs.render(), (
        "docs/reference/rules.md is stale: run `python -m gpupool.rules.docs`"
    )


def test_docs_check_flag_reports_stale(tmp_path, capsys):
    stale = tmp_path / "rules.md"
    stale.write_text("old\n")
    assert docs.main(["--check", "--output", str(stale)]) == 1
    assert docs.main(["--output", str(stale)]) == 0
    assert docs.main(["--check", "--output", str(stale)]) == 0
