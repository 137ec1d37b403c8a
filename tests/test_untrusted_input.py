"""Tenant files are untrusted input: what is refused is never read or quoted, and what is accepted
(8.0 as 8, .yml/.YAML files, a trailing ---, symlinks inside the stack, service-account owners) works
all the way to the rendered objects and the plan."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from gpupool.analysis import plan as planning
from gpupool.cli.main import main
from gpupool.k8s import manifests
from gpupool.rules.engine import validate_file

SECRET = "HUNTER2-do-not-print"

SPEC = """apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: dev}
nodePools:
  - name: l4
    gpu: L4
    gpusPerNode: 4.0
    nodes: [gpu-l4-1]
    sharing: {timeSlicing: {replicas: 2.0}}
tiers:
  - {name: standard, priority: 100.0}
oversubscription: {maxRatio: 1.0}
tenantFiles: [tenants/]
"""
TENANT = "name: {name}\ntier: standard\nowners: [team]\ngpus: {{nvidia.com/gpu.shared: 2.0}}\n"


def _stack(tmp_path: Path, tenants: dict[str, str | bytes], spec: str = SPEC) -> Path:
    (tmp_path / "tenants").mkdir(exist_ok=True)
    (tmp_path / "spec.yaml").write_text(spec)
    for name, text in tenants.items():
        path = tmp_path / "tenants" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return tmp_path / "spec.yaml"


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue() + err.getvalue()


def test_a_symlink_out_of_the_stack_is_never_opened_nor_quoted(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "credentials"
    secret.write_text(f"token: '{SECRET}\n")  # broken YAML: a parse error would have quoted it
    stack = tmp_path / "stack"
    stack.mkdir()
    spec = _stack(stack, {"team.yaml": TENANT.format(name="team")})
    os.symlink(secret, stack / "tenants" / "evil.yaml")
    os.symlink(outside, stack / "tenants-linked")
    spec.write_text(SPEC.replace("tenantFiles: [tenants/]", "tenantFiles: [tenants/, tenants-linked/, tenants/*.yaml]"))
    opened: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: opened.append(self.resolve()) or real(self))
    status, output = _cli("validate", str(spec))
    assert status == 1
    assert SECRET not in output
    assert str(outside) not in output  # neither where the link points
    assert secret.resolve() not in opened
    assert "tenants/evil.yaml resolves (through a symlink) to a file outside the stack directory" in output
    assert "[GP806]" in output


def test_a_symlink_inside_the_stack_is_read(tmp_path):
    spec = _stack(tmp_path, {"shared/team.yaml": TENANT.format(name="team")})
    os.symlink(tmp_path / "tenants" / "shared" / "team.yaml", tmp_path / "tenants" / "team.yaml")
    result = validate_file(spec, cwd=tmp_path)
    assert [t.name for t in result.spec.tenants] == ["team"]
    assert [d.rule for d in result.report.warnings if d.rule == "GP911"] == ["GP911"]  # the shared/ subdirectory


@pytest.mark.parametrize(
    "content",
    [
        f'name: team\ntier: "{SECRET}\n',  # unterminated quoted scalar
        f"name: team\ntier: standard\nx: !!int {SECRET}\n",  # a value its tag cannot read
        f"name: team\ntier: standard\nx: !secret {SECRET}\n",  # an unknown tag
        f"name: team\n{SECRET}: [\n",  # unclosed flow sequence
        f"name: team\ntier: standard\n\t{SECRET}: 1\n",  # a tab
        f"name: team\n- {SECRET}\n",  # a list item inside a mapping
        f"name: team\ntier: *{SECRET}\n",  # an undefined alias
    ],
)
def test_parse_errors_never_quote_the_file(tmp_path, content):
    spec = _stack(tmp_path, {"team.yaml": content})
    result = validate_file(spec, cwd=tmp_path)
    assert result.spec is None
    rendered = "\n".join(d.render() for d in result.report.sorted())
    assert SECRET not in rendered, rendered
    assert all(d.rule for d in result.report.diagnostics), rendered  # every problem is a rule, located


def test_whole_number_floats_are_integers_and_plan_and_render_work(tmp_path):
    spec = _stack(tmp_path, {"team.yaml": TENANT.format(name="team")})
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    pool = result.spec.pools[0]
    assert type(pool.gpus_per_node) is int and type(result.spec.tenants[0].gpus["nvidia.com/gpu.shared"]) is int
    assert pool.sharing.replicas == 2 and type(pool.sharing.replicas) is int
    assert planning.compute(result.spec)
    status, output = _cli("plan", str(spec))
    assert status == 0, output
    quota = next(o for o in manifests.build(result.spec).objects if o.name == "tenant-team-gpu-quota")
    assert quota.manifest["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "2"


def test_helm_values_keep_their_numbers_as_written(tmp_path):
    spec = _stack(
        tmp_path,
        {"team.yaml": TENANT.format(name="team")},
        SPEC.replace(
            "cluster: {name: dev}", "cluster:\n  name: dev\n  gpuOperator: {values: {dcgm: {interval: 30.0}}}"
        ),
    )
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok
    assert type(result.spec.cluster.operator.values["dcgm"]["interval"]) is float


@pytest.mark.parametrize("name", ["team.yml", "team.YAML", "team.Yml"])
def test_yml_and_upper_case_extensions_are_read(tmp_path, name):
    spec = _stack(tmp_path, {name: TENANT.format(name="team")})
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    assert [t.name for t in result.spec.tenants] == ["team"]


def test_a_leading_and_a_trailing_document_separator_are_accepted(tmp_path):
    spec = _stack(tmp_path, {"team.yaml": "---\n" + TENANT.format(name="team") + "---\n"})
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]


def test_skipped_files_are_warned_about_and_hidden_files_are_not(tmp_path):
    spec = _stack(
        tmp_path,
        {
            "team.yaml": TENANT.format(name="team"),
            "README.md": "# tenants\n",
            ".gitkeep": "",
            "archive/old.yaml": TENANT.format(name="old"),
        },
    )
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok
    skipped = sorted(d.message.split(" ", 1)[0] for d in result.report.warnings if d.rule == "GP911")
    assert skipped == ["tenants/README.md", "tenants/archive/"]
    status, output = _cli("validate", "--strict", str(spec))
    assert status == 1 and "tenants/archive/ is a subdirectory and is not read" in output


def test_owners_become_group_and_service_account_subjects_of_the_chosen_role(tmp_path):
    tenant = TENANT.format(name="team").replace(
        "owners: [team]", 'owners: [team, "group:oidc:ml", "serviceaccount:ci:deployer"]\nownerRole: admin'
    )
    spec = _stack(tmp_path, {"team.yaml": tenant})
    result = validate_file(spec, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    objects = manifests.build(result.spec).objects
    binding = next(o for o in objects if o.kind == "RoleBinding").manifest
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:ml"},
        {"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"},
    ]
    assert not [o for o in objects if o.kind == "ClusterRole"]  # Kubernetes' own aggregated roles, no hand-written one


def test_the_default_owner_role_is_edit(tmp_path):
    spec = _stack(tmp_path, {"team.yaml": TENANT.format(name="team")})
    binding = next(
        o for o in manifests.build(validate_file(spec, cwd=tmp_path).spec).objects if o.kind == "RoleBinding"
    )
    assert binding.manifest["roleRef"]["name"] == "edit"


def test_a_non_utf8_byte_is_located_at_its_line(tmp_path):
    spec = _stack(tmp_path, {"team.yaml": TENANT.format(name="team").encode() + b"costCenter: caf\xe9\n"})
    result = validate_file(spec, cwd=tmp_path)
    [d] = [d for d in result.report.errors if d.rule == "GP002"]
    assert (d.location.file, d.location.line, d.location.column) == ("tenants/team.yaml", 5, 16)
