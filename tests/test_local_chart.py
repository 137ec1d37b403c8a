"""An air-gapped chart (issue 41 item 6): the GPU Operator chart shipped beside the spec, as a directory or
the .tgz `helm pull`/`helm package` writes. GP102: `chartPath` is relative to the spec and stays inside the
repository (the nearest directory above holding .git or Pulumi.yaml), links followed; nothing outside is
read. GP103 (a warning): the chart has the real chart's structure where gpupool relies on it: Chart.yaml
named gpu-operator, and values.yaml with mig.strategy, migManager.config and devicePlugin.config (the keys
deployments/gpu-operator/values.yaml has at v26.7.0, ../shared/reference/gpu-operator-v26.md), at the
spec's chartVersion. The end-to-end test (tests/e2e/test_team_repository.py) deploys a vendored chart."""

from __future__ import annotations

import copy
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from gpupool.rules.engine import validate_file

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "charts" / "gpu-operator-stub"
BASE = yaml.safe_load((REPO / "stacks" / "dev" / "spec.yaml").read_text())


@pytest.fixture
def repo(tmp_path) -> Path:
    """A team repository: Pulumi.yaml at its root, the spec in stacks/dev/, a vendored chart at the pinned
    version in vendor/charts/gpu-operator."""
    root = tmp_path / "team"
    (root / "stacks" / "dev").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text("name: team\nruntime: python\n")
    for name in ("tenants",):
        shutil.copytree(REPO / "stacks" / "dev" / name, root / "stacks" / "dev" / name)
    chart = root / "vendor" / "charts" / "gpu-operator"
    shutil.copytree(STUB, chart)
    _set_version(chart, "v26.7.0")
    return root


def _set_version(chart: Path, version: str) -> None:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = version
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))


def _diagnostics(root: Path, chart_path: str, version: str = "v26.7.0") -> list[tuple[str, str, str]]:
    spec = copy.deepcopy(BASE)
    spec["cluster"]["gpuOperator"] = {"chartVersion": version, "chartPath": chart_path}
    path = root / "stacks" / "dev" / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    report = validate_file(path, cwd=root).report
    return [(d.severity, d.rule, d.message) for d in report.sorted() if d.rule.startswith("GP10")]


def test_a_vendored_chart_at_the_pinned_version_is_clean(repo):
    assert _diagnostics(repo, "../../vendor/charts/gpu-operator") == []


def test_an_archive_as_helm_pull_writes_it_is_read_too(repo):
    archive = repo / "vendor" / "charts" / "gpu-operator-v26.7.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(repo / "vendor" / "charts" / "gpu-operator", arcname="gpu-operator")
    assert _diagnostics(repo, "../../vendor/charts/gpu-operator-v26.7.0.tgz") == []
    _set_version(repo / "vendor" / "charts" / "gpu-operator", "v25.3.0")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(repo / "vendor" / "charts" / "gpu-operator", arcname="gpu-operator")
    (found,) = _diagnostics(repo, "../../vendor/charts/gpu-operator-v26.7.0.tgz")
    assert found[:2] == ("warning", "GP103") and "v25.3.0" in found[2] and "v26.7.0" in found[2]


@pytest.mark.parametrize("where", ["/opt/charts/gpu-operator", "../../../outside-chart"])
def test_a_chart_outside_the_repository_is_refused_and_not_read(repo, where):
    outside = repo.parent / "outside-chart"
    shutil.copytree(STUB, outside)  # not a chart at the pin: GP103 would say so if it were read
    found = [d for d in _diagnostics(repo, where) if d[1] != "GP101"]  # /opt/... does not exist here either
    assert [(s, r) for s, r, _ in found] == [("error", "GP102")], found
    assert "repository" in found[0][2] or "absolute" in found[0][2]


def test_a_link_inside_the_repository_to_a_chart_outside_is_refused(repo):
    outside = repo.parent / "elsewhere"
    shutil.copytree(repo / "vendor" / "charts" / "gpu-operator", outside)
    os.symlink(outside, repo / "vendor" / "charts" / "linked")
    found = _diagnostics(repo, "../../vendor/charts/linked")
    assert [(s, r) for s, r, _ in found] == [("error", "GP102")], found


def test_a_chart_that_is_not_the_operator_is_a_warning_naming_what_is_missing(repo):
    chart = repo / "vendor" / "charts" / "gpu-operator"
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["name"] = "my-operator"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    values = yaml.safe_load((chart / "values.yaml").read_text())
    del values["devicePlugin"]["config"]
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    found = _diagnostics(repo, "../../vendor/charts/gpu-operator")
    assert {(s, r) for s, r, _ in found} == {("warning", "GP103")}
    text = " ".join(m for _, _, m in found)
    assert "not the gpu-operator chart" in text and "devicePlugin.config" in text
    assert "mig.strategy" not in text and "migManager.config" not in text  # those are there


def test_a_directory_without_chart_yaml_is_a_warning(repo):
    (repo / "vendor" / "empty").mkdir()
    found = _diagnostics(repo, "../../vendor/empty")
    assert [(s, r) for s, r, _ in found] == [("warning", "GP103")] and "no Chart.yaml" in found[0][2]


def test_the_stub_chart_has_the_real_charts_value_keys():
    """The keys gpupool writes, written out from the reference (deployments/gpu-operator/values.yaml at
    v26.7.0): mig.strategy, migManager.config, devicePlugin.config; the tests' stub keeps them."""
    from gpupool.gpu import local_chart

    assert {".".join(k) for k, _ in local_chart.VALUES_KEYS} == {
        "mig.strategy",
        "migManager.config",
        "devicePlugin.config",
    }
    assert local_chart.problems(STUB, None) == []


# ---------------------------------------------------------------- the stack config's chart, at `gpupool stacks`

pulumi = pytest.importorskip("pulumi")

from tests.test_stacks_platform import World, _platform, project  # noqa: E402,F401


def _run(project: Path, tmp_path: Path, value: str, op: str = "up"):
    from gpupool.deploy import stacks

    world = World({"dev": []})
    p, logs = _platform(project, world, tmp_path, config={"gpupool:operatorChartPath": value})
    try:
        p.run(op)
        error = None
    except stacks.StackError as exc:
        error = str(exc)
    return p, logs, world, error


@pytest.mark.parametrize("op", ["preview", "up"])
def test_a_relative_config_chart_outside_the_project_stops_before_pulumi(project, tmp_path, op):
    shutil.copytree(STUB, tmp_path / "elsewhere")
    p, _, world, error = _run(project, tmp_path, "../elsewhere", op)
    assert error and "gpupool:operatorChartPath: resolves outside the project directory" in error
    assert not [c for c in world.calls if c[0] in ("preview", "up")]  # pulumi never ran
    assert p.outcomes[-1].result == "failed"


def test_a_link_in_the_project_to_a_chart_outside_is_refused(project, tmp_path):
    shutil.copytree(STUB, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", project / "chart")
    _, _, world, error = _run(project, tmp_path, "chart")
    assert error and "outside the project directory" in error


def test_a_vendored_config_chart_runs_and_an_absolute_one_is_the_machines_own(project, tmp_path):
    chart = project / "vendor" / "charts" / "gpu-operator"
    shutil.copytree(STUB, chart)
    _set_version(chart, "v26.7.0")
    _, logs, world, error = _run(project, tmp_path, "vendor/charts/gpu-operator")
    assert error is None and [c for c in world.calls if c[0] == "up"]
    assert not [ln for ln in logs if "warning" in ln]
    # absolute: taken as given (a mirror on the runner), and still checked for what gpupool relies on
    _, logs, world, error = _run(project, tmp_path, str(STUB))
    assert error is None and [c for c in world.calls if c[0] == "up"]
    assert [ln for ln in logs if ln.startswith("warning: gpupool:operatorChartPath: the chart holds chart version")]
