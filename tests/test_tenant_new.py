"""`gpupool tenant new`: scaffolds a tenant file that validates except for its placeholders (GP590)."""

from __future__ import annotations

import os
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


def test_quota_that_does_not_fit_writes_nothing_and_blames_the_new_tenant(project, capsys):
    assert (
        main(["tenant", "new", "big", "--tier", "production", "--gpus", "1g.10gb=100", "stacks/dev/spec.yaml"]) == 1
    )  # the spec path after --gpus values is the SPEC
    out, err = capsys.readouterr()
    assert not (project / "stacks/dev/tenants/big.yaml").exists()
    assert "stacks/dev/tenants/big.yaml:" in err and "GP601" in err
    assert "stacks/dev/tenants/big.yaml: not written: 1 error with big added" in err


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


def _outside(project: Path) -> Path:
    outside = project / "outside"
    outside.mkdir()
    return outside


@pytest.mark.parametrize("entries", ["[../../outside/, tenants/]", "[ABS, tenants/]"])
def test_writes_only_where_the_loader_reads(project, entries, capsys):
    """An entry the loader refuses (GP805: `..`, absolute) is no place to write: the file lands in tenants/."""
    outside = _outside(project)
    spec = project / "stacks/dev/spec.yaml"
    text = spec.read_text()
    assert "tenantFiles:\n  - tenants/\n" in text
    spec.write_text(
        text.replace("tenantFiles:\n  - tenants/\n", f"tenantFiles: {entries.replace('ABS', str(outside))}\n")
    )
    main(["tenant", "new", "vision", "--tier", "standard", str(spec)])
    assert os.listdir(outside) == []
    assert (project / "stacks/dev/tenants/vision.yaml").is_file()


@pytest.mark.parametrize("link", ["stacks/dev/tenants", "stacks/dev"])
def test_never_writes_through_a_link(project, link, capsys):
    """`tenants` (or the stack directory on the way to it) a symlink leaving the stack: refused, exit 1."""
    outside = _outside(project)
    shutil.rmtree(project / link)
    os.symlink(outside, project / link)
    (outside / "tenants").mkdir()
    (outside / "spec.yaml").write_text((ROOT / "stacks/dev/spec.yaml").read_text())
    assert main(["tenant", "new", "vision", "--tier", "standard", "stacks/dev/spec.yaml"]) == 1
    assert f"{link}: is a symbolic link" in capsys.readouterr().err
    assert not any(p.name == "vision.yaml" for p in outside.rglob("*"))


@pytest.mark.parametrize(
    "gpus,rule",
    [
        ("h100=1", "GP503"),  # no pool offers it
        ("3g.20gb=1", "GP503"),  # a MIG profile no pool is cut into
        ("1g.10gb=3", "GP601"),  # beyond capacity together with notebooks' 6
    ],
)
def test_a_tenant_that_would_add_an_error_is_not_written(project, gpus, rule, capsys):
    """Validated before writing: the problem is shown, located in the file tenant new would have written, and
    nothing is written (exit 1). A capacity overrun is blamed on the new tenant, not on the bigger holder
    whose file did not change."""
    before = sorted(p.name for p in (project / "stacks/dev/tenants").iterdir())
    assert main(["tenant", "new", "vision", "--tier", "production", "--gpus", gpus, "--stack", "dev"]) == 1
    err = capsys.readouterr().err
    blamed = [line for line in err.splitlines() if f"[{rule}]" in line]
    assert blamed and all(line.startswith("stacks/dev/tenants/vision.yaml:") for line in blamed), err
    assert "tenants[vision].gpus" in blamed[0]
    assert "stacks/dev/tenants/vision.yaml: not written" in err
    assert sorted(p.name for p in (project / "stacks/dev/tenants").iterdir()) == before


def test_owner_and_cost_center_make_a_tenant_that_validates(project, capsys):
    argv = ["tenant", "new", "vision", "--tier", "standard", "--gpus", "gpu.shared=2", "--stack", "dev"]
    assert main([*argv, "--owner", "vision-admins", "--owner", "group:ml", "--cost-center", "cc-7000"]) == 0
    data = yaml.safe_load((project / "stacks/dev/tenants/vision.yaml").read_text())
    assert data["owners"] == ["vision-admins", "group:ml"] and data["costCenter"] == "cc-7000"
    assert validate_file("stacks/dev/spec.yaml").ok
    assert "edit stacks/dev/tenants/vision.yaml" not in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--owner", "--cost-center"])
def test_a_refused_owner_or_cost_center_writes_nothing_and_is_not_echoed(project, flag, capsys):
    hostile = "system:masters" if flag == "--owner" else "cc 7000\n::error::forged"
    assert (
        main(
            ["tenant", "new", "vision", "--tier", "standard", "--gpus", "gpu.shared=1", flag, hostile, "--stack", "dev"]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "not written" in err and "forged" not in err
    assert not (project / "stacks/dev/tenants/vision.yaml").exists()


@pytest.mark.parametrize("name", ["vision\n", "vision\nx", "\nvision"])
def test_names_are_matched_whole(project, name, capsys):
    assert main(["tenant", "new", name, "--tier", "standard", "--stack", "dev"]) == 2
    assert "is not a tenant name" in capsys.readouterr().err
    assert not any("vision" in p.name for p in (project / "stacks/dev/tenants").iterdir())


def test_usage_line(project, capsys):
    with pytest.raises(SystemExit):
        main(["tenant", "new", "--help"])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("usage: gpupool tenant new NAME --tier TIER [--gpus RES=N ...]")
    assert first.endswith("[--stack NAME | SPEC]")
