"""Rolling MIG re-layout end to end: gpupool's program through the real engine, a simulated MIG Manager.

A 4-node MIG pool with `rollout: {maxUnavailable: 2}`. The tests run in order on one stack: the first `up`
(new nodes: no wait, no MIG Manager running at all), a re-layout (waves of 2, each node's own MIG Manager pod
restarted in its turn and no fleet-wide roll, each node waiting for success, with a slow simulator so a stale
`success` could not be mistaken for the new one, and MIG Manager's own timing: mounted files that kubelet never
refreshes within the test, a missing config name failing the node, and the old config kept in the ConfigMap
until no node carries it), the next up dropping it (rolling nothing), a re-layout where one node
fails (the rollout stops, later nodes keep their old label), the rerun after the fix (it continues, with no
MIG Manager restarted by hand), a re-layout
with GPU pods on the nodes (drained through the real Eviction API before the relabel; a PodDisruptionBudget that
allows no disruption stops the rollout), an
unchanged layout, and fresh stacks adopting the nodes (after a destroy, and as after an upgrade from a gpupool
without rollouts), where nothing waits. The spec turns queueing on (Kueue's CRDs installed, no Kueue manager
needed): the re-layout's ClusterQueue changes only after the last node has its new layout (issue 35 item 5).
Set GPUPOOL_E2E_REPORT_DIR=DIR to have the timelines written there as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml
from pulumi import automation as auto

from components.program import PLATFORM_NAME
from gpupool.analysis import plan
from gpupool.cli.main import main as cli_main
from gpupool.rules.engine import load_valid_spec

from .kubelet_sim import Kubelet, running_pod
from .mig_manager_sim import MIG_CONFIG, STATE, MigManagerSim
from .stack import E2EStack

pytestmark = pytest.mark.e2e
# The disruption controller computes PodDisruptionBudgets' status, which the eviction subresource reads
# (Kubernetes v1.36.3 pkg/registry/core/pod/storage/eviction.go, checkAndDecrement).
EXTRA_CONTROLLERS = ("disruption-controller",)

REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
NODES = ("roll-1", "roll-2", "roll-3", "roll-4")
OLD_LAYOUT = "a100-80gb-all-balanced"  # the first up's config; the first re-layout leaves it
AT_ONCE = 2
PENDING_DELAY, APPLY_DELAY = 2.0, 1.5  # slow: MIG Manager writes pending 2 s after the relabel
DRAIN_TIMEOUT = 15  # a blocked pod is retried this long; the pods that can go are gone in about a second
DRAIN_NS, GPU = "drain-test", "nvidia.com/mig-1g.10gb"
# The drain test's pods are bare (no controller runs here to own them): `force: true` in SPEC is kubectl drain's
# --force, without which the drain refuses them before evicting anything (gpupool.k8s.drain, tests/test_drain.py).

SPEC = textwrap.dedent(f"""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {{name: roll, gpuOperator: {{namespace: gpu-operator}}}}
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 2
        nodes: [{", ".join(NODES)}]
        rollout: {{maxUnavailable: {AT_ONCE}, nodeTimeoutSeconds: 90, drainTimeoutSeconds: {DRAIN_TIMEOUT}, force: true}}
        sharing: {{mig: {{preset: all-balanced}}}}
    tiers: [{{name: batch, priority: 1000}}]
    tenants:
      - {{name: team-r, tier: batch, gpus: {{nvidia.com/mig-1g.10gb: 4}}, owners: [team-r]}}
    queueing: {{}}
    """)
REPORT: dict = {}

P = f"{PLATFORM_NAME}-"  # the program's GpuPlatform names every child after itself


@pytest.fixture(scope="module")
def control_plane(private_control_plane):
    """Its own API server: other modules' stacks leave retained objects (PriorityClasses, nodes) behind."""
    return private_control_plane


@pytest.fixture(scope="module")
def stack(control_plane, toolchain_bin, tmp_path_factory):
    # Kueue's CRDs (the pinned release's, toolchain/build.sh), so the ClusterQueues the spec asks for exist; nothing
    # here needs Kueue's manager: the test reads what gpupool wrote and when.
    crds = toolchain_bin / "kueue-crds.yaml"
    if not crds.is_file():
        pytest.fail(f"missing {crds} (toolchain/build.sh kueue-manager)", pytrace=False)
    control_plane.kubectl("apply", "--server-side", "-f", str(crds))
    control_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")
    for node in NODES:
        control_plane.create_gpu_node(node, {"nvidia.com/mig-1g.10gb": "4"})
    work = tmp_path_factory.mktemp("gpupool-roll")
    (work / "spec.yaml").write_text(SPEC)
    s = E2EStack(
        toolchain_bin, control_plane.kubeconfig, work, spec=work / "spec.yaml", chart=STUB_CHART, stack_name="roll"
    )
    yield s
    s.close()
    if os.environ.get("GPUPOOL_E2E_REPORT_DIR"):
        (Path(os.environ["GPUPOOL_E2E_REPORT_DIR"]) / "mig-rollout.json").write_text(json.dumps(REPORT, indent=2))


def _labels(cp, node: str) -> dict:
    return cp.get_json("node", node)["metadata"].get("labels", {})


def _cordoned(cp, node: str) -> bool:
    return bool(cp.get_json("node", node).get("spec", {}).get("unschedulable"))


def _destroy(stack, cp) -> None:
    """`pulumi destroy`, after removing the simulator's MIG Manager pods: no kubelet runs here to finish a pod's
    deletion, so the operator namespace's deletion would wait on them for ever."""
    status, obj = cp.api(
        "GET", "/api/v1/namespaces/gpu-operator/pods", params={"labelSelector": "app=nvidia-mig-manager"}
    )
    for pod in obj.get("items", []) if status == 200 else []:
        meta = pod["metadata"]
        cp.api(
            "DELETE",
            f"/api/v1/namespaces/gpu-operator/pods/{meta['name']}",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
    stack.stack.destroy(on_output=lambda _: None, color="never")


def _queue_profiles(cp) -> list[str]:
    """The resources team-r's ClusterQueue covers, as the API server holds it."""
    obj = cp.api("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-r")[1]
    return sorted(r for g in obj["spec"]["resourceGroups"] for r in g["coveredResources"])


class _QueueWatch:
    """Samples (time, nodes, team-r's ClusterQueue profiles, nodes again) during an `up`, on the simulator's clock;
    nodes as node -> (mig.config, mig.config.state, cordoned)."""

    def __init__(self, cp, now) -> None:
        self.cp, self.now = cp, now
        self.samples: list[tuple[float, dict, list[str], dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _nodes(self) -> dict[str, tuple]:
        items = self.cp.api("GET", "/api/v1/nodes")[1]["items"]
        out = {}
        for n in items:
            if n["metadata"]["name"] in NODES:
                labels = n["metadata"].get("labels", {})
                out[n["metadata"]["name"]] = (
                    labels.get(MIG_CONFIG),
                    labels.get(STATE),
                    bool(n.get("spec", {}).get("unschedulable")),
                )
        return out

    def _sample(self) -> None:
        t, before = self.now(), self._nodes()
        profiles = _queue_profiles(self.cp)
        self.samples.append((t, before, profiles, self._nodes()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.2)

    def __enter__(self) -> _QueueWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _record(name: str, sim: MigManagerSim, since: float) -> None:
    REPORT[name] = [{"t": round(e.t - since, 2), "node": e.node, "event": e.what} for e in sim.timeline(since)]


def test_new_nodes_are_labelled_at_once_without_waiting(stack, control_plane):
    """No MIG Manager runs at all: nodes gpupool never labelled have no workloads, so nothing waits."""
    start = time.monotonic()
    assert stack.up().summary.result == "succeeded"
    took = time.monotonic() - start
    for node in NODES:
        labels = _labels(control_plane, node)
        assert labels[MIG_CONFIG] == "a100-80gb-all-balanced" and labels["gpupool.dev/pool"] == "a100"
        assert not _cordoned(control_plane, node)
    assert took < 60, f"first up took {took:.0f}s: new nodes must not wait for MIG Manager"


def test_a_relayout_rolls_in_waves_and_each_node_waits_for_its_own_success(stack, control_plane):
    cp = control_plane
    # MIG Manager starts on the nodes and applies their current label (what the first up left "pending").
    for node in NODES:
        cp.api(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"metadata": {"labels": {STATE: "success"}}},
            content_type="application/merge-patch+json",
        )
    old_profiles = _queue_profiles(cp)
    assert old_profiles == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]
    with MigManagerSim(cp, NODES, pending_delay=PENDING_DELAY, apply_delay=APPLY_DELAY, restart_delay=1.0) as sim:
        stack.edit("spec.yaml", "preset: all-balanced", "preset: all-1g.10gb")
        t0 = sim.now()
        with _QueueWatch(cp, sim.now) as queue:
            assert stack.up().summary.result == "succeeded"
        time.sleep(0.5)
    _record("relayout", sim, t0)
    new = "a100-80gb-all-1g.10gb"
    # Quotas follow the hardware (issue 35 item 5): Kueue's ClusterQueue lists the old layout's profiles while any
    # node still carries it, and the new layout's only once every node has it. Each sample reads the nodes, the
    # ClusterQueue, then the nodes again; relabels only go forward, so no timing between two pollers is compared:
    # a ClusterQueue already changed must be followed by nodes all done, and an unchanged one between two mixed
    # readings was unchanged while the nodes were mixed.
    done = lambda nodes: all(v == (new, "success", False) for v in nodes.values())  # noqa: E731
    mixed = lambda nodes: 0 < sum(v[0] == new for v in nodes.values()) < len(nodes)  # noqa: E731
    changed_samples = [x for x in queue.samples if x[2] != old_profiles]
    assert changed_samples and changed_samples[-1][2] == ["nvidia.com/mig-1g.10gb"], queue.samples[-1]
    for t, _, profiles, after in changed_samples:
        assert done(after), (t, profiles, after)
    assert any(mixed(before) and mixed(after) for _, before, p, after in queue.samples if p == old_profiles), [
        (t, p) for t, _, p, _ in queue.samples
    ]
    assert sim.max_unavailable() <= AT_ONCE, sim.samples  # cordoned or having its GPUs changed
    assert sim.max_cordoned() == AT_ONCE  # the two nodes of a wave really are out together
    # No node was relabelled before its MIG Manager restarted with the new file (the mig step restarts the node's
    # own pod first), so none asserted the new name against its old file; each node's GPUs have the new layout.
    # Nor did that restart's start-up run, for the old config, turn a node failed: the old name stays in the
    # ConfigMap while a node carries it (gpupool.k8s.mig_in_use), so the run found its GPUs already so
    # configured and wrote success (reconfigure.go 142-146).
    assert not [e for e in sim.timeline(t0) if e.what.startswith("sim:missing")], sim.timeline(t0)
    assert not [e for e in sim.timeline(t0) if e.what == "state=failed"], sim.timeline(t0)
    for n in NODES:
        # Exactly one restart per node (no fleet-wide roll), in its turn: after the cordon, before the relabel.
        starts = [e.t for e in sim.timeline(t0) if e.node == n and e.what == "sim:started"]
        assert len(starts) == 1, (n, sim.timeline(t0))
        assert sim.first(n, "cordoned", t0) <= starts[0] <= sim.first(n, f"config={new}", t0), (n, sim.timeline(t0))
        assert sim.gpus[n] == sim.configs()[new], n
    changed = {n: sim.first(n, f"config={new}", t0) for n in NODES}
    success = {n: sim.first(n, "state=success", changed[n]) for n in NODES}
    uncordoned = {n: sim.first(n, "uncordoned", changed[n]) for n in NODES}
    cordoned = {n: sim.first(n, "cordoned", t0) for n in NODES}
    for n in NODES:
        assert None not in (changed[n], success[n], uncordoned[n], cordoned[n]), (n, sim.timeline(t0))
        assert cordoned[n] <= changed[n] <= success[n] <= uncordoned[n], (n, "\n".join(map(str, sim.timeline(t0))))
        # The stale-success race: MIG Manager writes pending only PENDING_DELAY after the relabel; had the wait
        # passed on the previous layout's success, the node would have been uncordoned before that.
        assert uncordoned[n] - changed[n] >= PENDING_DELAY + APPLY_DELAY - 0.3, (n, sim.timeline(t0))
    # The order `gpupool plan` prints: each wave relabelled after every node of the previous one succeeded.
    (rollout,) = plan.compute(load_valid_spec(stack.work / "spec.yaml")).rollouts
    assert rollout.at_once == AT_ONCE and len(rollout.waves) == 2, rollout
    first_wave, second_wave = rollout.waves
    assert set(first_wave) | set(second_wave) == set(NODES)
    assert min(changed[n] for n in second_wave) >= max(success[n] for n in first_wave), sim.timeline(t0)
    # ... and restarted only then: a later wave's MIG Manager is left alone until its turn.
    restarted = {n: sim.first(n, "sim:started", t0) for n in NODES}
    assert min(restarted[n] for n in second_wave) >= max(success[n] for n in first_wave), sim.timeline(t0)
    for n in NODES:
        labels = _labels(cp, n)
        assert labels[MIG_CONFIG] == new and labels[STATE] == "success" and not _cordoned(cp, n)
    # The ConfigMap the up wrote kept the old config (nodes carried it when the program read them).
    assert _mig_configmap(cp)[1] == {OLD_LAYOUT, new}


def test_old_configs_leave_the_configmap_once_no_node_carries_them_and_that_rolls_nothing(stack, control_plane):
    """Proves: the next up after a completed re-layout drops the old config, as an in-place ConfigMap update
    alone (the config hash leaves kept configs out): no MIG Manager restarts, no node is armed, cordoned or
    relabelled."""
    _prune(stack, control_plane, OLD_LAYOUT)


def _mig_configmap(cp) -> tuple[str, set[str]]:
    """The MIG ConfigMap's kept-configs annotation and the gpupool config names it holds (presets left out)."""
    obj = cp.api("GET", "/api/v1/namespaces/gpu-operator/configmaps/gpupool-mig-config")[1]
    names = set(yaml.safe_load(obj["data"]["config.yaml"])["mig-configs"])
    kept = obj["metadata"].get("annotations", {}).get("gpupool.dev/kept-mig-configs", "")
    return kept, {n for n in names if n.startswith("a100-80gb-")}


def _ours(annotations: dict) -> dict:
    return {k: v for k, v in annotations.items() if k.startswith("gpupool.dev/")}


def _live_mig_config(cp) -> dict:
    obj = cp.api("GET", "/api/v1/namespaces/gpu-operator/configmaps/gpupool-mig-config")[1]
    return {"annotations": _ours(obj["metadata"].get("annotations", {})), "data": obj["data"]}


def _rendered_mig_config(spec: Path, kubeconfig: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["render", str(spec), "--output-dir", "-", "--kubeconfig", str(kubeconfig)]) == 0
    (cm,) = [
        d
        for d in yaml.safe_load_all(out.getvalue())
        if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpupool-mig-config"
    ]
    return {"annotations": _ours(cm["metadata"].get("annotations", {})), "data": cm["data"]}


def _prune(stack, cp, old: str) -> None:
    assert _mig_configmap(cp)[0] == old
    with MigManagerSim(cp, NODES) as sim:
        t0 = sim.now()
        ops = stack.preview_ops()
        changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
        assert changed == {"mig-config": "update"}, changed
        assert stack.up().summary.result == "succeeded"
        time.sleep(1.0)  # a roll the up had started would have deleted a pod by now (restart_delay 0.5 s)
    assert not sim.timeline(t0), sim.timeline(t0)
    kept, names = _mig_configmap(cp)
    assert kept == "" and old not in names and len(names) == 1, names


def test_a_failed_node_stops_the_rollout_and_a_rerun_after_the_fix_continues(stack, control_plane):
    cp = control_plane
    old, new = "a100-80gb-all-1g.10gb", "a100-80gb-all-balanced"
    with MigManagerSim(cp, NODES, pending_delay=0.5, apply_delay=1.0, fail={"roll-2"}) as sim:
        stack.edit("spec.yaml", "preset: all-1g.10gb", "preset: all-balanced")
        t0 = sim.now()
        with pytest.raises(auto.CommandError) as failure:
            stack.up()
        took = sim.now() - t0
        message = str(failure.value)
        lines = [line.strip() for line in message.splitlines()]
        REPORT["failure-message"] = [line for line in lines if "mig.config.state=failed" in line][:3]
        assert "node roll-2" in message and "nvidia.com/mig.config.state=failed" in message, message
        assert "Traceback" not in message and "mig_step_provider.py" not in message, message
        assert took < 80, f"the failure took {took:.0f}s to surface: it must not wait for the node timeout"
        time.sleep(1.5)  # the next wave must stay untouched, not merely not yet touched
        # roll-1, in roll-2's wave, is done (it may still be cordoned: after a failure Pulumi starts no further
        # step, its uncordon included; the rerun uncordons it).
        assert _labels(cp, "roll-1")[MIG_CONFIG] == new and _labels(cp, "roll-1")[STATE] == "success"
        assert _labels(cp, "roll-2")[MIG_CONFIG] == new and _labels(cp, "roll-2")[STATE] == "failed"
        assert _cordoned(cp, "roll-2"), "a failed node must stay cordoned"
        for n in ("roll-3", "roll-4"):
            assert _labels(cp, n)[MIG_CONFIG] == old and not _cordoned(cp, n), n
            assert sim.first(n, "cordoned", t0) is None, n
            # Not restarted at all (no roll), still on the old config, which the ConfigMap keeps.
            assert sim.first(n, "sim:started", t0) is None and _labels(cp, n)[STATE] == "success", n
        assert _mig_configmap(cp)[0] == old
        # `gpupool render --kubeconfig` reads the cluster as the program did: its MIG ConfigMap is the live one.
        assert _rendered_mig_config(stack.work / "spec.yaml", cp.kubeconfig) == _live_mig_config(cp)
        # The fix: whatever broke roll-2 is repaired. Nobody restarts its MIG Manager: the rerun does (MIG Manager
        # would not answer the unchanged label), and its start-up run applies the config.
        sim.fail.clear()
        t1 = sim.now()
        assert stack.up().summary.result == "succeeded"
        time.sleep(0.5)
    _record("failure-and-rerun", sim, t0)
    for n in NODES:
        labels = _labels(cp, n)
        assert labels[MIG_CONFIG] == new and labels[STATE] == "success" and not _cordoned(cp, n), n
    # The rerun went on from roll-2 (restarted by the rerun, uncordoned now) to the next wave, and left roll-1 alone.
    assert sim.first("roll-2", "sim:started", t1) <= sim.first("roll-2", "uncordoned", t1)
    assert sim.first("roll-1", "cordoned", t1) is None and sim.first("roll-1", f"config={new}", t1) is None
    for n in ("roll-3", "roll-4"):
        assert sim.first(n, f"config={new}", t1) >= sim.first("roll-2", "uncordoned", t1), sim.timeline(t1)


def _budget_counted(cp, allowed: int):
    obj = cp.api("GET", f"/apis/policy/v1/namespaces/{DRAIN_NS}/poddisruptionbudgets/keep-guarded")[1]
    s = obj.get("status", {})
    return s.get("observedGeneration") == obj["metadata"]["generation"] and s.get("disruptionsAllowed") == allowed


def _pods(cp) -> set[str]:
    return {p["metadata"]["name"] for p in cp.api("GET", f"/api/v1/namespaces/{DRAIN_NS}/pods")[1]["items"]}


def test_gpu_pods_are_evicted_before_the_relabel_and_a_blocking_budget_stops_the_rollout(stack, control_plane):
    """Proves (rollout step 1c): after the cordon and before the relabel, a node's GPU pods are evicted through the
    real eviction subresource and gone (a CPU-only pod stays); a PodDisruptionBudget that allows no disruption (the
    disruption controller's own count) stops `up` with an error naming the pod and the budget, after the drain
    timeout, with that node cordoned, its old config label kept and never relabelled; once the budget allows it,
    the rerun evicts the pod first, then relabels, and the rollout completes."""
    cp = control_plane
    old, new = "a100-80gb-all-balanced", "a100-80gb-all-1g.10gb"
    assert cp.api("POST", "/api/v1/namespaces", {"metadata": {"name": DRAIN_NS}})[0] == 201
    running_pod(cp, DRAIN_NS, "free", "roll-1", app="free", gpu=GPU)
    running_pod(cp, DRAIN_NS, "cpu", "roll-1", app="cpu", gpu=None)
    running_pod(cp, DRAIN_NS, "guarded", "roll-3", app="guarded", gpu=GPU)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-guarded", "namespace": DRAIN_NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    assert cp.api("POST", f"/apis/policy/v1/namespaces/{DRAIN_NS}/poddisruptionbudgets", budget)[0] == 201
    cp.wait_for(lambda: _budget_counted(cp, 0), timeout=120, what="the disruption controller to count the budget")
    with MigManagerSim(cp, NODES, pending_delay=0.5, apply_delay=0.5) as sim, Kubelet(cp, NODES, sim.now) as kubelet:
        stack.edit("spec.yaml", "preset: all-balanced", "preset: all-1g.10gb")
        t0 = sim.now()
        with pytest.raises(auto.CommandError) as failure:
            stack.up()
        message = str(failure.value)
        REPORT["drain-message"] = [line.strip() for line in message.splitlines() if "cannot be evicted" in line][:2]
        assert f"pod {DRAIN_NS}/guarded cannot be evicted within {DRAIN_TIMEOUT}s" in message, message
        assert f"PodDisruptionBudget {DRAIN_NS}/keep-guarded allows no disruption" in message, message
        # Said as the drain's own line, not a Python traceback from the dynamic provider's host.
        assert "Traceback" not in message and "mig_step_provider.py" not in message, message
        # roll-1 (wave 1): its GPU pod was gone before its relabel; the CPU-only pod was left alone.
        relabelled = sim.first("roll-1", f"config={new}", t0)
        assert relabelled is not None and kubelet.gone[f"{DRAIN_NS}/free"] <= relabelled, sim.timeline(t0)
        assert _pods(cp) == {"cpu", "guarded"}
        # roll-3 (wave 2): stopped at its drain, cordoned, with the old config, never relabelled.
        assert _cordoned(cp, "roll-3") and _labels(cp, "roll-3")[MIG_CONFIG] == old
        assert sim.first("roll-3", f"config={new}", t0) is None, sim.timeline(t0)
        # The fix: the budget allows the disruption.
        status, obj = cp.api(
            "PATCH",
            f"/apis/policy/v1/namespaces/{DRAIN_NS}/poddisruptionbudgets/keep-guarded",
            {"spec": {"minAvailable": 0}},
            content_type="application/merge-patch+json",
        )
        assert status == 200, obj
        cp.wait_for(lambda: _budget_counted(cp, 1), timeout=120, what="the budget to allow a disruption")
        t1 = sim.now()
        assert stack.up().summary.result == "succeeded"
        time.sleep(0.5)
    _record("drain", sim, t0)
    relabelled = sim.first("roll-3", f"config={new}", t1)
    assert relabelled is not None and kubelet.gone[f"{DRAIN_NS}/guarded"] <= relabelled, sim.timeline(t1)
    assert _pods(cp) == {"cpu"}
    for n in NODES:
        labels = _labels(cp, n)
        assert labels[MIG_CONFIG] == new and labels[STATE] == "success" and not _cordoned(cp, n), n


def test_an_unchanged_layout_neither_waits_nor_touches_a_node(stack, control_plane):
    _prune(stack, control_plane, OLD_LAYOUT)  # the drain test's re-layout left the old config kept
    with MigManagerSim(control_plane, NODES) as sim:
        t0 = sim.now()
        ops = stack.preview_ops()
        changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
        assert not changed, changed
        assert stack.up().summary.result == "succeeded"
    assert not sim.timeline(t0), sim.timeline(t0)


def test_a_fresh_stack_adopting_the_nodes_neither_waits_nor_relabels(stack, control_plane):
    """State lost, or `pulumi destroy` (node patches are retained) and `up` again: every chain is *created*, and
    a created patch cannot see the value it replaced. The nodes' `mig-config-checked` record says the config is
    the one gpupool last checked, so nothing waits for a MIG Manager that would never answer."""
    cp = control_plane
    before = {n: _labels(cp, n)[MIG_CONFIG] for n in NODES}
    _destroy(stack, cp)
    with MigManagerSim(cp, NODES) as sim:
        t0 = sim.now()
        assert stack.up().summary.result == "succeeded"
        took = sim.now() - t0
    # Nothing waited for MIG Manager: gpupool writes `pending` only where it waits, and no node was set
    # `pending` (a wall-clock bound would depend on the machine's load).
    waited = [e for e in sim.timeline(t0) if e.what == "state=pending"]
    assert not waited, (f"the up took {took:.0f}s", waited)
    assert not [e for e in sim.timeline(t0) if e.what.startswith("config=")], sim.timeline(t0)
    for n in NODES:
        labels = _labels(cp, n)
        assert labels[MIG_CONFIG] == before[n] and labels["gpupool.dev/mig-config-checked"] == before[n]
        assert not _cordoned(cp, n), n


def test_nodes_labelled_by_a_gpupool_without_rollouts_are_adopted_without_waiting(stack, control_plane):
    """The upgrade: nodes carry gpupool's labels but no `mig-config-checked` record (nothing to tell a change by)."""
    cp = control_plane
    _destroy(stack, cp)
    for n in NODES:
        cp.api(
            "PATCH",
            f"/api/v1/nodes/{n}",
            {"metadata": {"labels": {"gpupool.dev/mig-config-checked": None}}},
            content_type="application/merge-patch+json",
        )
    with MigManagerSim(cp, NODES) as sim:
        t0 = sim.now()
        assert stack.up().summary.result == "succeeded"
        took = sim.now() - t0
    # Nothing waited for MIG Manager: gpupool writes `pending` only where it waits, and no node was set
    # `pending` (a wall-clock bound would depend on the machine's load).
    waited = [e for e in sim.timeline(t0) if e.what == "state=pending"]
    assert not waited, (f"the up took {took:.0f}s", waited)
    assert not [e for e in sim.timeline(t0) if e.what.startswith("config=")], sim.timeline(t0)
    # A created chain still cordons each node in its turn (it cannot know nothing changes), and uncordons it.
    assert not any(_cordoned(cp, n) for n in NODES)
    assert all("gpupool.dev/mig-config-checked" in _labels(cp, n) for n in NODES)
