"""`gpupool tenant new`: scaffolds a tenant file that validates except for its placeholders (GP590)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file
from gpupool.spec.schema import SCHEMA_DIR

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("stacks", "schemas"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPOOL_SPEC", raising=False)
    return tmp_path


def test_scaffold_validates_except_for_the_placeholders(project, capsys):
    assert (
        main(["tenant", "new", "vision", "--tier", "standard", "--gpus", "gpu.shared=2", "1g.10gb=1", "--stack", "dev"])
        == 0
    )
    out, err = capsys.readouterr()
    target = project / "stacks/dev/tenants/vision.yaml"
    assert "created stacks/dev/tenants/vision.yaml" in out and "next steps:" in out
    text = target.read_text()
    modeline = text.splitlines()[0]
    assert modeline == "# yaml-language-server: $schema=../../../schemas/tenant.schema.json"
    assert (target.parent / modeline.split("=", 1)[1]).resolve() == (project / "schemas/tenant.schema.json")
    data = yaml.safe_load(text)
    assert data["gpus"] == {"nvidia.com/gpu.shared": 2, "nvidia.com/mig-1g.10gb": 1}
    assert data["name"] == "vision" and data["tier"] == "standard"
    # exactly the two placeholders fail, located in the new file, with the rule id
    result = validate_file("stacks/dev/spec.yaml")
    errors = [d for d in result.report.sorted() if d.is_error]
    assert [(d.rule, d.location.file, d.path) for d in errors] == [
        ("GP590", "stacks/dev/tenants/vision.yaml", "tenants[vision].owners[0]"),
        ("GP590", "stacks/dev/tenants/vision.yaml", "tenants[vision].costCenter"),
    ]
    assert "GP590" in err
    # filled in, the stack is valid
    target.write_text(text.replace("TODO-owner-group", "vision-team").replace("TODO-cost-center", "cc-7000"))
    assert validate_file("stacks/dev/spec.yaml").ok


def test_refuses_to_overwrite(project, capsys):
    existing = project / "stacks/dev/tenants/research.yaml"
    before = existing.read_bytes()
    assert main(["tenant", "new", "research", "--tier", "batch", "--stack", "dev"]) == 2
    assert "already has a tenant 'research'" in capsys.readouterr().err
    # a stray file of that name (not a tenant of the spec) is not overwritten either
    stray = project / "stacks/dev/tenants/newbie.yaml"
    stray.write_text("# someone's draft\n")
    assert main(["tenant", "new", "newbie", "--tier", "batch", "--stack", "dev"]) == 2
    assert "already exists; gpupool does not overwrite it" in capsys.readouterr().err
    assert stray.read_text() == "# someone's draft\n" and existing.read_bytes() == before


@pytest.mark.parametrize(
    "argv,message",
    [
        (["Vision", "--tier", "standard"], "is not a tenant name"),
        (["../evil", "--tier", "standard"], "is not a tenant name"),
        (["vision", "--tier", "standrd"], "no tier 'standrd' (did you mean \"standard\"?)"),
        (["vision", "--tier", "standard", "--gpus", "gpu"], "--gpus takes RES=N"),
        (["vision", "--tier", "standard", "--gpus", "gpu=-1"], "must be a whole number"),
        (["vision", "--tier", "standard", "--gpus", "gpu=99999999999"], "must be a whole number"),
        (["vision", "--tier", "standard", "--gpus", "amd.com/gpu=1"], "is not a GPU resource name"),
        (["vision", "--tier", "standard", "--gpus", "gpu=1", "nvidia.com/gpu=2"], "given twice"),
    ],
)
def test_usage_errors_write_nothing(project, capsys, argv, message):
    before = sorted(p.name for p in (project / "stacks/dev/tenants").iterdir())
    assert main(["tenant", "new", *argv, "--stack", "dev"]) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in (project / "stacks/dev/tenants").iterdir()) == before


def test_quota_that_does_not_fit_is_written_and_exits_1(project, capsys):
    assert (
        main(["tenant", "new", "big", "--tier", "production", "--gpus", "1g.10gb=100", "stacks/dev/spec.yaml"]) == 1
    )  # the spec path after --gpus values is the SPEC
    out, err = capsys.readouterr()
    assert (project / "stacks/dev/tenants/big.yaml").is_file()
    assert "GP601" in err and "1 other error with big added" in err


def test_glob_tenant_files_and_missing_directory(project, capsys):
    spec = project / "stacks/dev/spec.yaml"
    spec.write_text(spec.read_text().replace("  - tenants/\n", "  - tenants/*.yaml\n"))
    assert main(["tenant", "new", "vision", "--tier", "standard", str(spec)]) == 0
    assert (project / "stacks/dev/tenants/vision.yaml").is_file()
    spec.write_text(spec.read_text().replace("tenantFiles:\n  - tenants/*.yaml\n", ""))
    assert main(["tenant", "new", "other", "--tier", "standard", str(spec)]) == 2
    assert "has no tenant directory" in capsys.readouterr().err


def test_spec_without_modeline_points_at_gpupools_schema(project):
    spec = project / "stacks/dev/spec.yaml"
    spec.write_text("\n".join(spec.read_text().splitlines()[1:]) + "\n")
    assert main(["tenant", "new", "vision", "--tier", "standard", str(spec)]) == 0
    line = (project / "stacks/dev/tenants/vision.yaml").read_text().splitlines()[0]
    target = (project / "stacks/dev/tenants" / line.split("=", 1)[1]).resolve()
    assert target == (SCHEMA_DIR / "tenant.schema.json").resolve()
