"""A platform team's own repository, as a new user makes it: outside this repository, with the built wheel
installed (no -e, no gpupool source on any path), `gpupool init`, `gpupool validate`, then
`gpupool stacks up` and `gpupool stacks preview` against the local API server through the real pulumi CLI,
language host and provider. Proves that the wheel carries the whole deploy path (GpuPlatform, the
Automation API command) and that the scaffold deploys as written (only its node name and the offline chart
are set for this cluster)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from .cli import STUB_CHART, SYSTEM_PATH, provider_version

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gpupool", "components", "schemas")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel built from this checkout (third-party packages through a .pth line to the
    test venv's site-packages, so no network is needed)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)], check=True, env=env
    )
    (whl,) = dist.glob("gpupool-*.whl")
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [*pip, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(whl)], check=True, env=env
    )
    return home


def test_init_validate_and_stacks_up_from_the_wheel(installed, private_control_plane, cli_toolchain_bin, tmp_path):
    cluster = private_control_plane
    cluster.create_gpu_node("dev-gpu-1", {"nvidia.com/gpu.shared": "16"})
    team = tmp_path / "team-gpu"
    plugin = tmp_path / "pulumi-home" / "plugins" / f"resource-kubernetes-v{provider_version()}"
    plugin.mkdir(parents=True)
    os.symlink(cli_toolchain_bin / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
    (tmp_path / "state").mkdir()
    env = {
        "PATH": f"{cli_toolchain_bin}:{SYSTEM_PATH}",  # not the venv: gpupool stacks puts it first itself
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}?metadata=skip",
        "PULUMI_CONFIG_PASSPHRASE": "team",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    gpupool = str(installed / "bin" / "gpupool")
    transcript = tmp_path / "transcript.txt"  # what the user sees, command by command (docs/howto/first-deploy.md)

    def run(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        p = subprocess.run(
            [gpupool, *args],
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
        with transcript.open("a") as f:
            f.write(f"{cwd.name}$ gpupool {' '.join(args)}\n{p.stdout}[exit {p.returncode}]\n\n")
        return p

    init = run("init", str(team))
    assert init.returncode == 0, init.stdout
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import gpupool.pulumi as p; print(p.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert str(REPO) not in where  # the wheel's copy, not this checkout
    os.symlink(installed, team / ".venv")  # what `python3 -m venv .venv && pulumi install` leaves
    assert run("validate", "stacks/dev/spec.yaml", cwd=team).returncode == 0
    config = ["-c", f"gpupool:operatorChartPath={STUB_CHART}", "-c", "gpupool:skipAwait=true"]
    up = run("stacks", "up", "dev", *config, cwd=team)
    assert up.returncode == 0, up.stdout[-6000:]
    assert re.search(r"^dev: up succeeded \(.*converged\)$", up.stdout, re.M), up.stdout[-3000:]
    quota = cluster.get_json("resourcequota", "gpu-quota", "-n", "team-a")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "4"
    node = cluster.get_json("node", "dev-gpu-1")
    assert node["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "l4-shared"
    preview = run("stacks", "preview", "dev", *config, cwd=team)  # -c is per run: not saved by up
    assert preview.returncode == 0 and re.search(r"^dev: preview succeeded \(no changes\)$", preview.stdout, re.M), (
        preview.stdout[-3000:]
    )
