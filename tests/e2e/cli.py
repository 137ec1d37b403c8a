"""The user's path, end to end: a copy of the project directory driven with ``gpupool stacks``, the
console script of the project's virtualenv, as a user (and the workflow) runs it.

That command holds the CI recipe's pulumi commands (gpupool/deploy/stacks.py, on the Automation API), so
what these tests run is what CI runs: ``stack select --create``, ``config set``, ``preview --diff``,
``up --yes`` then ``preview --expect-no-changes``, through the pulumi CLI, the Python language host,
``Pulumi.yaml``'s runtime options, ``__main__.py`` and the components.

PATH holds the toolchain's bin dir and the system directories only, NOT the project venv: putting the
venv first is the command's job (see toolchain/README.md, the language host's caveat).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
# The console script `pip install` made in the project's virtualenv (the copy's .venv links to the repo's).
GPUPOOL = Path(".venv") / "bin" / "gpupool"
# Not part of the Pulumi project a user deploys (and large or machine-specific).
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".hypothesis",
    "tests",
    "bench",
    "out",
    "rendered",
    ".pulumi",
)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
MANAGED = "app.kubernetes.io/managed-by=gpupool"
MANAGED_KINDS = (
    "namespaces,resourcequotas,limitranges,rolebindings,configmaps,daemonsets,"
    "priorityclasses,clusterroles,validatingadmissionpolicies,validatingadmissionpolicybindings"
)


def provider_version() -> str:
    for line in (REPO / "toolchain" / "versions.env").read_text().splitlines():
        if line.startswith("PULUMI_K8S_PROVIDER_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("PULUMI_K8S_PROVIDER_VERSION missing from toolchain/versions.env")


class CliProject:
    """``root/project`` (the copy), ``root/state`` (file backend, unless ``backend_url``), ``root/home``
    (PULUMI_HOME)."""

    def __init__(
        self,
        bin_dir: Path,
        kubeconfig: Path,
        root: Path,
        *,
        stack: str = "dev",
        backend_query: str = "metadata=skip",
        backend_url: str | None = None,
        backend_env: dict[str, str] | None = None,
        spec: str | None = None,
    ):
        self.bin_dir, self.stack = bin_dir, stack
        self.dir = root / "project"
        shutil.copytree(REPO, self.dir, ignore=_NOT_COPIED)
        # The project's venv, as `make setup` / the workflow's install step leave it.
        os.symlink(REPO / ".venv", self.dir / ".venv")
        self.state = root / "state"
        self.state.mkdir()
        home = root / "home"
        plugin = home / "plugins" / f"resource-kubernetes-v{provider_version()}"
        plugin.mkdir(parents=True)
        os.symlink(bin_dir / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
        # The file backend in root/state, or BACKEND_URL (e.g. an s3:// bucket, with BACKEND_ENV's credentials).
        self.backend_url = backend_url or f"file://{self.state}" + (f"?{backend_query}" if backend_query else "")
        self.env = {
            "PATH": f"{bin_dir}:{SYSTEM_PATH}",
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "PULUMI_HOME": str(home),
            "PULUMI_BACKEND_URL": self.backend_url,
            "PULUMI_CONFIG_PASSPHRASE": "e2e",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "KUBECONFIG": str(kubeconfig),
            **(backend_env or {}),
        }
        # Engine settings to try a route with (e.g. the fault tests under PULUMI_SKIP_CHECKPOINTS=true).
        self.env.update({k: os.environ[k] for k in ("PULUMI_SKIP_CHECKPOINTS", "PULUMI_PARALLEL") if k in os.environ})
        self.config = [
            f"gpupool:kubeconfig={kubeconfig}",
            f"gpupool:operatorChartPath={STUB_CHART}",
            "gpupool:skipAwait=true",
        ] + ([f"gpupool:spec={spec}"] if spec else [])

    # ---------------------------------------------------------------- the recipe
    def _argv(self, op: str, all_stacks: bool = True) -> list[str]:
        """ALL_STACKS: `--all`, so preview and up take every stack as the tests written before gpupool
        skipped unchanged stacks expect (a test of the skip passes False)."""
        argv = [str(self.dir / GPUPOOL), "stacks", op, self.stack]
        if all_stacks and op in ("preview", "up"):
            argv.append("--all")
        for kv in self.config:
            argv += ["-c", kv]
        return argv

    def run(
        self, op: str, *, env: dict | None = None, timeout: float = 900, all_stacks: bool = True
    ) -> subprocess.CompletedProcess:
        """``gpupool stacks OP STACK --all -c ...`` (ALL_STACKS, see _argv); stdout and stderr merged into
        ``.stdout``, also kept in ``root/<op>-<n>.log`` under a line naming the test, the exit status and the
        wall time (the record docs/howto/ci.md's fault table is read from)."""
        started = time.monotonic()
        p = subprocess.run(
            self._argv(op, all_stacks),
            cwd=self.dir,
            env={**self.env, **(env or {})},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
        test = os.environ.get("PYTEST_CURRENT_TEST", "").removesuffix(" (call)")
        head = f"# {test}: gpupool stacks {op} exited {p.returncode} after {time.monotonic() - started:.1f} s\n"
        (self.dir.parent / f"{op}-{time.monotonic_ns()}.log").write_text(head + p.stdout)
        return p

    def start(self, op: str, *, env: dict | None = None) -> subprocess.Popen:
        """The same, in the background (own process group), output to ``root/<op>-<n>.log``."""
        log = open(self.dir.parent / f"{op}-{time.monotonic_ns()}.log", "w+")
        p = subprocess.Popen(
            self._argv(op),
            cwd=self.dir,
            env={**self.env, **(env or {})},
            text=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        p.log = log  # type: ignore[attr-defined]
        return p

    @staticmethod
    def output(p: subprocess.Popen) -> str:
        p.log.seek(0)  # type: ignore[attr-defined]
        return p.log.read()  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- plain CLI (no venv on PATH)
    def pulumi(
        self, *args: str, env: dict | None = None, timeout: float = 300, stack: str | None = None
    ) -> subprocess.CompletedProcess:
        """``pulumi ARGS --stack STACK`` (default: the project's stack)."""
        return subprocess.run(
            [str(self.bin_dir / "pulumi"), *args, "--stack", stack or self.stack],
            cwd=self.dir,
            env={**self.env, **(env or {})},
            text=True,
            capture_output=True,
            timeout=timeout,
        )

    def export(self, stack: str | None = None, *, show_secrets: bool = False) -> dict:
        """The stack's state. Secrets are ciphertexts with a fresh nonce at each write of the state (the drain
        step's pickled provider is one): compare states with show_secrets=True."""
        p = self.pulumi("stack", "export", *(["--show-secrets"] if show_secrets else []), stack=stack)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def lock_files(self) -> list[Path]:
        return sorted((self.state / ".pulumi" / "locks").rglob("*.json"))

    def write(self, relative: str, text: str) -> Path:
        path = self.dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.dir / relative
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new, 1))


def failed_run(p: subprocess.CompletedProcess, tail: int = 4000) -> str:
    """What a failed `gpupool stacks` run said, for an assertion message: its own verdict lines first (the
    outcome table and `gpupool: ...` errors name the stack and the planned steps that did not converge), then
    the output's tail. A bare tail can be all of one resource's diff, and CI shows only part of a message."""
    text = (p.stdout or "") + (p.stderr or "")  # (stderr is None when the run merged it into stdout)
    verdict = [
        line for line in text.splitlines() if line.startswith("gpupool") or " failed" in line or "converge" in line
    ]
    return "\n".join(["verdict:", *(line[:1500] for line in verdict[-12:]), "tail:", text[-tail:]])


def pulumi_pid(p: subprocess.Popen) -> int | None:
    """The pid of the ``pulumi`` CLI process the command started (same process group), if running."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        pgrp = int(stat[stat.rindex(")") + 2 :].split()[2])
        if comm == "pulumi" and pgrp == p.pid:
            return int(d.name)
    return None


def sigkill_pulumi(p: subprocess.Popen, timeout: float = 60) -> None:
    """SIGKILL the pulumi CLI (not gpupool, not the plugins: they notice the dead engine and exit)."""
    pid = pulumi_pid(p)
    assert pid, "no pulumi process to kill"
    os.kill(pid, signal.SIGKILL)
    p.wait(timeout=timeout)


# ---------------------------------------------------------------- what converged means


def state_objects(deployment: dict) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object the state says gpupool manages (its managed-by label)."""
    out = []
    for r in deployment["deployment"].get("resources") or []:
        outputs = r.get("outputs") or {}
        meta = outputs.get("metadata") or {}
        if (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") == "gpupool" and not r.get("delete"):
            out.append((outputs.get("kind", ""), meta.get("namespace", ""), meta.get("name", "")))
    return out


TENANT_KINDS = (
    "namespaces,resourcequotas,limitranges,rolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings"
)


def tenant_labelled(control_plane) -> list[dict]:
    """Every live object labelled with a tenant (gpupool.dev/tenant), of the kinds a tenant's stack holds; objects
    being deleted left out."""
    items = control_plane.get_json(TENANT_KINDS, "-A", "-l", "gpupool.dev/tenant", timeout=120)["items"]
    return [i for i in items if not i["metadata"].get("deletionTimestamp")]


def cluster_objects(control_plane) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object in the cluster that carries gpupool's managed-by label."""
    items = control_plane.get_json(MANAGED_KINDS, "-A", "-l", MANAGED, timeout=120)["items"]
    return [
        (i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"])
        for i in items
        if not i["metadata"].get("deletionTimestamp")
    ]
