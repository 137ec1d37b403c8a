"""A platform team's own repository, as a new user makes it on day one (issue 41's "Done when"): outside this
repository, from an empty directory, with the wheel built from this checkout installed into a fresh venv
(no -e, no gpupool source on any path), `gpupool init` with a project name other than `gpupool`, the
team's own `.venv` installed from the requirements.txt init wrote (the vendored wheel, as its comment says),
the GPU Operator chart shipped beside the spec (air-gapped: no chart repository), `gpupool stacks up`
against the local API server through the real pulumi CLI, language host and provider, a tenant onboarded
with `gpupool tenant new --stack`, a namespace deleted behind gpupool's back that a `--refresh` preview shows
and the next `up` restores, and a mistyped node name refused by `up` with no Node created.

Proves: the wheel carries the whole deploy path; the requirement init writes installs; `--stack` reads the
settings in a repository whose project is not `gpupool`; `up` repairs drift and "converged" is about the
cluster; gpupool creates no Node. Each step's time goes into the transcript (GPUPOOL_TRANSCRIPT=FILE keeps
a copy), which docs/howto/first-deploy.md quotes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import venv
from pathlib import Path

import pytest

from .cli import STUB_CHART, SYSTEM_PATH, provider_version

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gpupool", "components", "schemas")
PIP_ENV = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _venv_with_test_deps(home: Path) -> Path:
    """A fresh venv whose third-party packages come from the test venv's site-packages through a .pth line
    (so no network is needed; gpupool itself is installed into it from a wheel, never from this checkout)."""
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(a fresh venv with the wheel built from this checkout installed as `pip install WHEEL` does, the wheel)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)], check=True, env=PIP_ENV
    )
    (whl,) = dist.glob("gpupool-*.whl")
    home = tmp_path_factory.mktemp("venv")
    python = _venv_with_test_deps(home)
    subprocess.run(
        [*pip, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(whl)], check=True, env=PIP_ENV
    )
    return home, whl


class Transcript:
    """What the user typed and saw, with each step's time (the issue's "first hour")."""

    def __init__(self, path: Path, env: dict[str, str], gpupool: str):
        self.path, self.env, self.gpupool = path, env, gpupool
        self.steps: list[tuple[str, float]] = []

    def run(self, *args: str, cwd: Path, shown: str = "") -> subprocess.CompletedProcess:
        argv = [self.gpupool, *args] if args[0] != "!" else list(args[1:])
        start = time.monotonic()
        p = subprocess.run(
            argv, cwd=cwd, env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900
        )
        took = time.monotonic() - start
        command = shown or ("gpupool " + " ".join(args) if args[0] != "!" else " ".join(args[1:]))
        self.note(command, p.stdout, p.returncode, took, cwd)
        return p

    def note(self, command: str, output: str, status: int, took: float, cwd: Path) -> None:
        self.steps.append((command, took))
        with self.path.open("a") as f:
            f.write(f"{cwd.name}$ {command}\n{output}[exit {status}; {took:.1f} s]\n\n")


def _pulumi_env(tmp_path: Path, cluster, bin_dir: Path) -> dict[str, str]:
    plugin = tmp_path / "pulumi-home" / "plugins" / f"resource-kubernetes-v{provider_version()}"
    plugin.mkdir(parents=True)
    os.symlink(bin_dir / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
    (tmp_path / "state").mkdir()
    return {
        "PATH": f"{bin_dir}:{SYSTEM_PATH}",  # not the venv: gpupool stacks puts it first itself
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}?metadata=skip",
        "PULUMI_CONFIG_PASSPHRASE": "team",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": str(cluster.kubeconfig),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _summary(p: subprocess.CompletedProcess, op: str = "up") -> str:
    """The summary line of the dev stack's OP (the run's last lines: one per stack, then the sweep's)."""
    lines = [line for line in p.stdout.splitlines() if line.startswith(f"dev: {op} ")]
    return lines[-1] if lines else ""


def test_a_new_team_repository_day_one(installed, private_control_plane, cli_toolchain_bin, tmp_path):
    home, wheel = installed
    cluster = private_control_plane
    cluster.create_gpu_node("dev-gpu-1", {"nvidia.com/gpu.shared": "16"})
    team = tmp_path / "team-gpu"
    env = _pulumi_env(tmp_path, cluster, cli_toolchain_bin)
    log = Transcript(tmp_path / "transcript.txt", env, str(home / "bin" / "gpupool"))

    # 1. init, in an empty directory, with the gpupool installed from the wheel file
    init = log.run("init", str(team.name), cwd=tmp_path)
    assert init.returncode == 0, init.stdout
    assert "name: team-gpu" in (team / "Pulumi.yaml").read_text()  # not `gpupool`: --stack must still work
    where = subprocess.run(
        [str(home / "bin" / "python"), "-c", "import gpupool.pulumi as p; print(p.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert str(REPO) not in where  # the wheel's copy, not this checkout

    # 2. the team's .venv from the requirements.txt init wrote: the vendored wheel, as its comment says
    requirement = [ln for ln in (team / "requirements.txt").read_text().splitlines() if ln and ln[0] != "#"]
    assert requirement == [f"./vendor/{wheel.name}[pulumi]"], requirement
    start = time.monotonic()
    (team / "vendor").mkdir()
    shutil.copy(wheel, team / "vendor" / wheel.name)
    python = _venv_with_test_deps(team / ".venv")  # python3 -m venv .venv (its deps from the test venv: offline)
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-r",
            "requirements.txt",
        ],
        cwd=team,
        env={**PIP_ENV, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
    )
    log.note(
        f"cp {wheel.name} vendor/ && python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
        pip.stdout[-400:],
        pip.returncode,
        time.monotonic() - start,
        team,
    )
    assert pip.returncode == 0, pip.stderr
    gpupool = str(team / ".venv" / "bin" / "gpupool")
    log.gpupool = gpupool
    where = subprocess.run(
        [str(python), "-c", "import gpupool.pulumi as p; print(p.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=team,
    ).stdout
    assert where.startswith(str(team / ".venv")), where  # the vendored wheel's copy is what the program runs

    # 3. the operator chart shipped beside the spec (air-gapped, docs/howto/chart-upgrade.md): the archive
    # `helm pull --version v26.7.0` writes (here the tests' stand-in chart, packaged at the pinned version)
    chart = tmp_path / "gpu-operator"
    shutil.copytree(STUB_CHART, chart)
    meta = (chart / "Chart.yaml").read_text()
    (chart / "Chart.yaml").write_text(re.sub(r"(?m)^version: .*$", "version: v26.7.0", meta))
    (team / "vendor" / "charts").mkdir()
    with tarfile.open(team / "vendor" / "charts" / "gpu-operator-v26.7.0.tgz", "w:gz") as tar:
        tar.add(chart, arcname="gpu-operator")
    spec = team / "stacks" / "dev" / "spec.yaml"
    spec.write_text(
        spec.read_text().replace(
            "    namespace: gpu-operator\n",
            "    namespace: gpu-operator\n    chartPath: ../../vendor/charts/gpu-operator-v26.7.0.tgz\n",
        )
    )
    valid = log.run("validate", "stacks/dev/spec.yaml", cwd=team)
    assert valid.returncode == 0 and "warning" not in valid.stdout, valid.stdout  # GP102/GP103 content

    # 4. the first deploy
    run_config = ["-c", "gpupool:skipAwait=true"]  # the stub chart's DaemonSets never become ready
    up = log.run("stacks", "up", "dev", *run_config, cwd=team)
    assert up.returncode == 0, up.stdout[-6000:]
    assert re.fullmatch(r"dev: up succeeded \(\d+ create; converged\)", _summary(up)), up.stdout[-3000:]
    # the label sweep ends the run: nothing labelled for the platform that no stack holds
    assert _summary(up, "sweep") == "dev: sweep succeeded (no changes; nothing labelled that no stack holds)", (
        up.stdout[-3000:]
    )
    quota = cluster.get_json("resourcequota", "gpu-quota", "-n", "team-a")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "4"
    node = cluster.get_json("node", "dev-gpu-1")
    assert node["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "l4-shared"
    assert cluster.get_json("configmap", "cluster-policy", "-n", "gpu-operator")  # the vendored chart rendered

    # 5. onboarding: tenant new --stack (the settings read the way the program reads them)
    new = log.run(
        "tenant", "new", "vision", "--tier", "standard", "--gpus", "gpu.shared=4", "--owner", "vision-admins",
        "--cost-center", "cc-0002", "--stack", "dev", cwd=team,
    )  # fmt: skip
    assert new.returncode == 0, new.stdout
    assert (team / "stacks" / "dev" / "tenants" / "vision.yaml").is_file()

    # 6. drift: team-a's namespace deleted behind gpupool's back before the onboarding's deploy; a --refresh
    # preview shows it (a plain one compares the program with the state only), and that one up restores it
    start = time.monotonic()
    cluster.kubectl("delete", "namespace", "team-a", "--wait=false")
    cluster.wait_for(
        lambda: cluster.kubectl("get", "namespace", "team-a", check=False).returncode != 0,
        timeout=300,
        what="namespace team-a to be gone",
    )
    log.note("kubectl delete namespace team-a   (and wait until it is gone)", "", 0, time.monotonic() - start, team)
    drift = log.run("stacks", "preview", "dev", "--refresh", *run_config, cwd=team)
    assert drift.returncode == 0, drift.stdout[-3000:]
    # the drift section (a refresh preview: team-a's namespace is gone from the cluster), then the plan, which
    # creates the onboarded tenant's
    # (pulumi refresh --preview-only prints a vanished object as `(delete[retain])`, its [id=...] line first)
    gone = re.compile(
        r"- kubernetes:core/v1:Namespace: \(delete[^)]*\)\n(?:\s+\[id=\S+\]\n)?\s+\[urn=\S+Namespace::gpu-tenant-(\S+)-ns\]"
    )
    created = re.compile(r"\+ kubernetes:core/v1:Namespace: \(create\)\n\s+\[urn=\S+Namespace::gpu-tenant-(\S+)-ns\]")
    drift_part, plan_part = drift.stdout.split("The update (program against the state):", 1)
    assert set(gone.findall(drift_part)) == {"team-a"}, drift.stdout[-3000:]
    assert set(created.findall(plan_part)) == {"vision"}, drift.stdout[-3000:]
    up = log.run("stacks", "up", "dev", *run_config, cwd=team)
    assert up.returncode == 0 and _summary(up).endswith("; converged)"), up.stdout[-3000:]
    for tenant in ("team-a", "vision"):  # restored, and onboarded
        quota = cluster.get_json("resourcequota", "gpu-quota", "-n", tenant)
        assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "4"

    # 7. a mistyped node name: refused by up, naming the node and its pool; no Node is created
    spec.write_text(spec.read_text().replace("nodes: [dev-gpu-1]", "nodes: [dev-gpu1]"))
    typo = log.run("stacks", "up", "dev", *run_config, cwd=team)
    assert typo.returncode == 1, typo.stdout[-3000:]
    assert "dev-gpu1" in typo.stdout and "l4-shared" in typo.stdout
    assert cluster.kubectl("get", "node", "dev-gpu1", check=False).returncode != 0

    total = sum(t for _, t in log.steps)
    with log.path.open("a") as f:
        f.write("steps:\n" + "".join(f"  {t:6.1f} s  {c}\n" for c, t in log.steps) + f"  {total:6.1f} s  in all\n")
    keep = os.environ.get("GPUPOOL_TRANSCRIPT")
    if keep:
        shutil.copy(log.path, keep)


def test_pulumi_install_through_the_pinned_host_makes_the_root_a_venv_and_gpupool_stacks_refuses_it(
    installed, cli_toolchain_bin, tmp_path
):
    """Issue 41's last papercut, through the real CLI and the v3.79 language host the toolchain builds: that host
    never sees Pulumi.yaml's `virtualenv: .venv` (toolchain/README.md), so `pulumi install` runs `python -m venv`
    on the repository's root (InstallDependenciesWithWriters, sdk/python/python.go of sdk v3.79.0: the empty
    virtualenv name joined to the root). Proves the documented install does not go that way, and that
    `gpupool stacks` then refuses with the command that does, removing nothing. The index is off (offline): the
    host's `pip install --upgrade pip setuptools wheel` fails after the venv is made, as it would for a user only
    after a slow download."""
    home, _ = installed
    env = {
        "PATH": f"{cli_toolchain_bin}:{SYSTEM_PATH}",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_BACKEND_URL": f"file://{tmp_path}?metadata=skip",
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    init = subprocess.run(
        [str(home / "bin" / "gpupool"), "init", "ml-platform"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    repo = tmp_path / "ml-platform"
    # What the scaffold tells a new user to run never involves `pulumi install`.
    documented = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"
    assert documented in init.stdout and "pulumi install" not in init.stdout, init.stdout
    assert documented in (repo / "README.md").read_text()
    assert "virtualenv: .venv" in (repo / "Pulumi.yaml").read_text()

    subprocess.run(["pulumi", "install"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    made = {p.name for p in repo.iterdir()} - {"Pulumi.yaml", "README.md", "__main__.py", "requirements.txt"}
    assert {"pyvenv.cfg", "bin", "lib"} <= made, made  # the root itself became the venv
    assert not (repo / ".venv").exists()

    refused = subprocess.run(
        [str(home / "bin" / "gpupool"), "stacks", "preview", "dev"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{repo} is itself a virtualenv" in refused.stderr and documented in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert made <= {p.name for p in repo.iterdir()}  # nothing removed: those files are not gpupool's
