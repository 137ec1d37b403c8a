"""docs/reference/spec-reference.md is generated from the JSON Schema (python -m gpupool.spec.reference) and kept
current: it names every property the schema defines, so a new field cannot ship undocumented."""

from __future__ import annotations

import json
from pathlib import Path

from gpupool.spec import reference

ROOT = Path(__file__).resolve().parent.parent


def test_the_reference_is_up_to_date():
    assert reference.main(["--check"]) == 0, (
        "docs/reference/spec-reference.md is stale: python -m gpupool.spec.reference"
    )


def test_every_schema_property_has_a_row():
    text = reference.render()
    schema = json.loads((ROOT / "schemas" / "gpupool.schema.json").read_text())
    names = set(schema["properties"]) - {"$schema"}
    for definition in schema["$defs"].values():
        names |= set(definition.get("properties", {})) - {"$schema"}
    rows = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    leaves = {r.rsplit(".", 1)[-1].removesuffix("[]") for r in rows}
    assert names <= leaves, names - leaves
    assert "nodePools[].sharing.mig.preset" in rows and "cluster.gpuOperator.chartVersion" in rows
    assert "gpus" in rows and "offboarded" in rows  # the tenant file's table


def test_check_fails_on_a_stale_file(tmp_path):
    stale = tmp_path / "ref.md"
    stale.write_text("# old\n")
    assert reference.main(["--check", "--output", str(stale)]) == 1
