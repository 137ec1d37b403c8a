"""The package as a user installs it: a wheel, installed without -e into a fresh venv, run outside the repo.

An editable install (what `make setup` and CI use) reads schemas and catalogs from the source tree, so it
would hide a wheel that lacks them. This test builds the wheel from a copy of the sources, installs it
(no -e) into a new venv, and runs validate, plan, render and diff from a directory that holds no gpupool
source. To stay offline and fast, the new venv gets its third-party dependencies from the test venv's
site-packages through a .pth line (a plain path: the test venv's own .pth files, among them the editable
gpupool finder, are not run), and the wheel's declared requirements are checked to be what it needs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIP = (sys.executable, "-m", "pip")
PIP_ENV = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # no network round trip per pip call
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gpupool", "components", "schemas")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:  # a copy: building writes build/ and *.egg-info next to the sources
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    p = subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        env=PIP_ENV,
    )
    assert p.returncode == 0, p.stderr
    (whl,) = dist.glob("gpupool-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=False)  # the test venv's pip installs into it (`pip --python`)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "gpupool-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    p = subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        env=PIP_ENV,
    )
    assert p.returncode == 0, p.stderr
    check = subprocess.run([*PIP, "--python", str(python), "check"], capture_output=True, text=True, env=PIP_ENV)
    assert "gpupool" not in check.stdout, check.stdout  # every Requires-Dist of the wheel is importable
    return env / "bin"


def test_the_wheel_has_one_top_level_package_and_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"gpupool"}, top
    for data in (
        "gpupool/schemas/gpupool.schema.json",
        "gpupool/schemas/tenant.schema.json",
        "gpupool/gpu/mig.yaml",
        "gpupool/gpu/gpu-operator.yaml",
        "gpupool/pulumi/program.py",
        "gpupool/pulumi/platform.py",
        "gpupool/deploy/stacks.py",  # gpupool stacks
        "gpupool/py.typed",  # PEP 561: type checkers read gpupool's annotations in a user's program
        "gpupool/pulumi/py.typed",
    ):
        assert data in names, data


def _metadata(wheel: Path):
    from email.parser import Parser

    zf = zipfile.ZipFile(wheel)
    (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(zf.read(name).decode()), zf.namelist()


def test_the_wheel_carries_license_and_project_metadata(wheel):
    meta, names = _metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Author"] or meta["Author-email"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert meta["Description-Content-Type"] == "text/markdown" and "make demo" in meta.get_payload()


def test_runtime_dependencies_are_ranges_and_constraints_pin_every_one(wheel):
    """Exact pins in a library's metadata make it uninstallable next to another Pulumi version
    (`pip install "pulumi==3.270.0" "gpupool[pulumi]"`); the exact versions CI tests live in
    constraints.txt, which must cover every requirement (and pin it exactly)."""
    import re

    meta, _ = _metadata(wheel)
    requires = meta.get_all("Requires-Dist")
    assert requires
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line} is not an exact pin"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    for req in requires:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", req).group(0)).lower()
        if name == "gpupool":
            continue  # the test extra names the pulumi extra
        assert "==" not in req.split(";")[0], f"{req}: an exact pin in the package metadata; pin it in constraints.txt"
        assert name in pins, f"{req}: not pinned in constraints.txt"


def _run(bin_dir: Path, cwd: Path, *args: str, ok=(0,)) -> subprocess.CompletedProcess:
    p = subprocess.run([str(bin_dir / "gpupool"), *args], cwd=cwd, capture_output=True, text=True)
    assert p.returncode in ok, (args, p.returncode, p.stderr)
    assert "internal error" not in p.stderr
    return p


def test_the_installed_package_works_outside_the_repository(installed, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "stacks", work / "stacks")
    _run(installed, work, "validate", "stacks/dev/spec.yaml", "stacks/prod/spec.yaml")
    plan = json.loads(_run(installed, work, "plan", "stacks/prod/spec.yaml", "-o", "json").stdout)
    assert plan["resources"]
    _run(installed, work, "render", "stacks/dev/spec.yaml", "--output-dir", "out")
    assert (work / "out" / "tenant-research-gpu-quota.yaml").exists()
    head = work / "head"
    shutil.copytree(work / "stacks" / "dev", head)
    (head / "tenants" / "notebooks.yaml").unlink()
    diff = _run(installed, work, "diff", "stacks/dev/spec.yaml", str(head / "spec.yaml"), ok=(0, 1))
    assert "notebooks" in diff.stdout
    schema = json.loads(_run(installed, work, "schema").stdout)
    assert schema["properties"]["apiVersion"]
    version = _run(installed, work, "--version").stdout
    assert version.strip() == f"gpupool {_project_version()}"
    module = subprocess.run(
        [str(installed / "python"), "-m", "gpupool", "--version"], cwd=work, capture_output=True, text=True
    )
    assert module.stdout == version
    # the installed copy is what ran, not the repository's
    where = subprocess.run(
        [str(installed / "python"), "-c", "import gpupool.spec.schema as s; print(s.SCHEMA_DIR)"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert str(ROOT) not in where and where.endswith("gpupool/schemas")


def test_the_components_import_from_the_installed_package(installed, tmp_path):
    """A user's own Pulumi program imports them as gpupool.pulumi (the [pulumi] extra brings the SDK)."""
    probe = (
        "import importlib.util; from gpupool.pulumi.program import deploy, load_or_stop, provider; "
        "import gpupool.pulumi.program as p; print(p.__file__); print(importlib.util.find_spec('components'))"
    )
    out = subprocess.run([str(installed / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    origin, components = out.stdout.splitlines()
    assert origin.endswith("gpupool/pulumi/program.py") and str(ROOT) not in origin
    assert components == "None"  # no generic top-level `components` package


def _project_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_init_from_the_wheel_names_the_vendored_wheel_and_pip_reads_it(installed, wheel, tmp_path):
    """Installed from a wheel file, `gpupool init` pins that wheel as ./vendor/<its name>[pulumi] (no path
    outside the repository); with the wheel copied there, as the comment says, pip resolves the line."""
    _run(installed, tmp_path, "init", "team")
    team = tmp_path / "team"
    text = (team / "requirements.txt").read_text()
    (line,) = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert line == f"./vendor/{wheel.name}[pulumi]"
    assert str(wheel.parent) not in text
    (team / "vendor").mkdir()
    shutil.copy(wheel, team / "vendor" / wheel.name)
    p = subprocess.run(
        [
            *PIP,
            "install",
            "--dry-run",
            "--no-deps",
            "--no-index",
            "--target",
            str(tmp_path / "t"),
            "-r",
            "requirements.txt",
        ],
        cwd=team,
        capture_output=True,
        text=True,
        env=PIP_ENV,
    )
    assert p.returncode == 0 and f"gpupool-{_project_version()}" in p.stdout, p.stdout + p.stderr


def test_the_sdist_builds_the_same_wheel(wheel, tmp_path):
    """The release publishes an sdist too (.github/workflows/release.yml): built as `python -m build` does
    (setuptools' PEP 517 hooks), unpacked, and built into a wheel, it gives the files the direct wheel has."""
    import tarfile

    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    hook = "from setuptools import build_meta as b; import sys; print(b.build_sdist(sys.argv[1]))"
    p = subprocess.run([sys.executable, "-c", hook, str(tmp_path / "sdist")], cwd=src, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    sdist = tmp_path / "sdist" / p.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    dist = tmp_path / "from-sdist"
    p = subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(unpacked)],
        capture_output=True,
        text=True,
        env=PIP_ENV,
    )
    assert p.returncode == 0, p.stderr
    (again,) = dist.glob("gpupool-*.whl")
    assert sorted(zipfile.ZipFile(again).namelist()) == sorted(zipfile.ZipFile(wheel).namelist())
