"""The `queueing:` block's objects under the real Kueue controller (sigs.k8s.io/kueue v0.19.2) serving its
admission webhooks, with JobSet's controller (sigs.k8s.io/jobset v0.12.0), both built by toolchain/build.sh,
on a private local control plane with kube-controller-manager's job, ReplicaSet, Deployment and StatefulSet
controllers, so admitted workloads create pods that meet the ResourceQuota and gpupool's queue policy.

Kueue runs with gpupool's documented Configuration (gpupool.k8s.kueue.configuration) plus only the test's ports
and certificates; the API server calls its webhooks (Job, pod, Deployment, StatefulSet, JobSet, ClusterQueue,
Cohort, ResourceFlavor, Workload) at https://127.0.0.1:PORT (tests/e2e/kueue_harness.py). Every workload is
submitted by the tenant's own identity (impersonating a member of its owner group).

What it proves: admission within nominal quota, pending beyond it, borrowing from an idle tenant of the same
cohort, preemption when the lender reclaims, a lower tier preempted for a higher one in the same queue, MIG
resources admitted against the MIG pool's flavor, no admitted job's pods refused by the ResourceQuota (sized by
gpupool.model.queues.max_admitted), Kueue's ClusterQueue webhook accepting gpupool's queues, and the table of
attempts (test_attempts_by_the_tenant): what a tenant can and cannot do to reach GPUs around Kueue, and a
JobSet's child Jobs admitted. No scheduler or kubelet: pods stay Pending (or gated), which is all Kueue needs
(it admits by unsuspending Jobs and removing pods' scheduling gates); waitForPodsReady's 10 minutes outlast
the module.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from gpupool.k8s import kueue, manifests
from gpupool.model import queues
from gpupool.rules.engine import load_valid_spec
from tests.e2e import kueue_harness
from tests.e2e.cluster import ControlPlane, ControlPlaneError, _find_kubectl
from tests.e2e.conftest import _checked_bin_dir, _unavailable

pytestmark = pytest.mark.e2e

WAIT = 300  # seconds, generous for a loaded runner; every wait ends as soon as its condition holds
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kueue-manager", "jobset-manager")
CONTROLLERS = ("job-controller", "replicaset-controller", "deployment-controller", "statefulset-controller")
TENANT = {"serve": ("serve-alice", ["serve-team"]), "train": ("train-bob", ["train-team"])}

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: e2e}
nodePools:
  - {name: whole, gpu: L4, gpusPerNode: 2, nodes: [n-whole]}
  - {name: whole2, gpu: L4, gpusPerNode: 2, nodes: [n-whole2]}
  - {name: mig, gpu: A100-40GB, gpusPerNode: 1, nodes: [n-mig], sharing: {mig: {preset: all-1g.5gb}}}
tiers:
  - {name: inference, priority: 1000}
  - {name: batch, priority: 10}
tenants:
  - {name: serve, tier: inference, owners: [serve-team], gpus: {nvidia.com/gpu: 2}}
  - {name: train, tier: batch, owners: [train-team], gpus: {nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 4}}
queueing:
  tiers:
    inference: {reclaim: Any, withinQueue: LowerPriority}
    batch: {reclaim: Never, withinQueue: Never}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    bin_dir = _checked_bin_dir(BINARIES[:-1])
    for f in ("kueue-crds.yaml", "jobset-crds.yaml", "jobset-manager"):
        if not (bin_dir / f).is_file():
            _unavailable(f"missing {f} in {bin_dir} (toolchain/build.sh kueue-manager jobset-manager)")
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl(), extra_controllers=CONTROLLERS)
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"local control plane failed to start: {e}", pytrace=False)
    managers = []
    try:
        managers = kueue_harness.start(cp, bin_dir, WAIT)
        spec_path = tmp_path_factory.mktemp("kueue") / "spec.yaml"
        spec_path.write_text(SPEC)
        spec = load_valid_spec(spec_path)
        plan = manifests.build(spec)
        # Everything gpupool renders except node patches (the nodes do not exist) and the operator chart;
        # the ClusterQueues, Cohorts and ResourceFlavors pass Kueue's validating webhooks.
        items = [o.manifest for o in plan.objects if not o.patch]
        cp.kubectl(
            "apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
        for tenant in ("serve", "train"):
            cp.wait_for(
                lambda t=tenant: _active(cp, "clusterqueue", t) and _active(cp, "localqueue", "default", t),
                timeout=WAIT,
                what=f"ClusterQueue and LocalQueue of {tenant} active",
            )
        yield cp, spec, managers
    finally:
        for m in managers:
            m.stop()
        cp.stop()


def _active(cp: ControlPlane, kind: str, name: str, namespace: str | None = None) -> bool:
    args = [kind, name] + (["-n", namespace] if namespace else [])
    p = cp.kubectl("get", *args, "-o", "json", check=False)
    if p.returncode != 0:
        return False
    conditions = json.loads(p.stdout).get("status", {}).get("conditions", [])
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def _pod_spec(gpus: dict[str, int], priority_class: str | None = None) -> dict:
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"limits": {r: str(n) for r, n in gpus.items()}}}
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def _job(
    name: str,
    gpus: dict[str, int],
    priority: str | None = None,
    queue: str | None = queues.LOCAL_QUEUE,
    priority_class: str | None = None,
) -> dict:
    labels = {}
    if queue:
        labels[kueue.QUEUE_NAME_LABEL] = queue
    if priority:
        labels[kueue.PRIORITY_CLASS_LABEL] = priority
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {"spec": _pod_spec(gpus, priority_class)},
        },
    }


def _workload(cp: ControlPlane, ns: str, job: str) -> dict | None:
    items = cp.get_json("workloads", "-n", ns)["items"]
    return next((w for w in items if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


def _condition(wl: dict | None, kind: str) -> dict | None:
    if not wl:
        return None
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _admitted(cp, ns, job) -> dict | None:
    wl = _workload(cp, ns, job)
    c = _condition(wl, "Admitted")
    return wl if c and c["status"] == "True" else None


def _pending(cp, ns, job) -> dict | None:
    """Kueue looked at it and could not reserve quota (QuotaReserved False, reason Pending)."""
    wl = _workload(cp, ns, job)
    c = _condition(wl, "QuotaReserved")
    return wl if c and c["status"] == "False" and c.get("reason") == "Pending" else None


def _pods(cp, ns, job) -> list[dict]:
    return cp.get_json("pods", "-n", ns, "-l", f"job-name={job}")["items"]


def _unsuspended_with_pod(cp, ns, job) -> bool:
    j = cp.get_json("job", job, "-n", ns)
    return j["spec"].get("suspend") is False and len(_pods(cp, ns, job)) == 1


def _quota_refusals(cp, ns) -> list[str]:
    events = cp.get_json("events", "-n", ns)["items"]
    return [e["message"] for e in events if e.get("reason") == "FailedCreate" and "quota" in e.get("message", "")]


def _borrowed(cp, cq: str, flavor: str, resource: str) -> int:
    status = cp.get_json("clusterqueue", cq).get("status", {})
    for f in status.get("flavorsUsage", []):
        if f["name"] == flavor:
            for r in f["resources"]:
                if r["name"] == resource:
                    return int(r.get("borrowed", 0))
    return 0


def _as_tenant(cp: ControlPlane, ns: str, *args: str, input: str | None = None, check: bool = True):
    user, groups = TENANT[ns]
    return cp.kubectl(*args, as_user=user, as_groups=groups, input=input, check=check)


def _submit(cp, ns, obj, check: bool = True):
    """Create OBJ in NS as the tenant (a member of its owner group), through every admission step."""
    return _as_tenant(cp, ns, "create", "-n", ns, "-f", "-", input=json.dumps(obj), check=check)


def _delete(cp, ns, *jobs, kind: str = "job"):
    cp.kubectl("delete", kind, "-n", ns, "--cascade=foreground", "--wait=true", *jobs, timeout=WAIT)


def test_quota_sized_for_what_kueue_can_admit(env):
    """The ResourceQuota gpupool applied holds nominal + borrowable (serve lends all: train may use 4)."""
    cp, spec, _ = env
    most = queues.max_admitted(spec, spec.queueing)
    hard = cp.get_json("resourcequota", "gpu-quota", "-n", "train")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == str(most["train"]["nvidia.com/gpu"]) == "4"


def test_admission_borrowing_pending_and_reclaim(env):
    """train: within nominal, then borrowing serve's idle GPUs, then pending; serve reclaims by preemption."""
    cp, _, _ = env
    gpu = "nvidia.com/gpu"
    # within nominal (2 of train's 2)
    _submit(cp, "train", _job("within", {gpu: 2}))
    wl = cp.wait_for(lambda: _admitted(cp, "train", "within"), timeout=WAIT, what="within admitted")
    # Two flavors of nvidia.com/gpu: serve's 2 are nominal on `whole` (listed first, idle), train's on `whole2`.
    # flavorFungibility TryNextFlavor: train's own quota on the second flavor, not borrowing on the first
    # (Kueue's default MayStopSearch would stop at `whole`, where borrowing fits).
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"][gpu] == "whole2"
    assert _borrowed(cp, "train", "whole", gpu) == 0
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "train", "within"), timeout=WAIT, what="within's pod")
    _record(
        "Job, 2 GPUs, within train's grant (its nominal quota is on the second flavor, serve's idle on the first)",
        "Kueue admitted it on flavor whole2, its own quota, not borrowing on whole; its pod created",
    )
    # Of equal-priority candidates Kueue preempts the most recently admitted first (its Preemption docs), by
    # the QuotaReserved time, which has whole seconds: `borrow` must be admitted in a later second than
    # `within`, or the two tie and Kueue may take `within` (seen once in a full e2e run). A wait on the clock
    # the API server shares with this test, not a sleep.
    reserved = _condition(wl, "QuotaReserved")["lastTransitionTime"]
    after = datetime.fromisoformat(reserved.replace("Z", "+00:00")).timestamp() + 1
    cp.wait_for(lambda: time.time() >= after, timeout=WAIT, interval=0.1, what="a second after within's admission")
    # beyond nominal: borrows serve's idle 2
    _submit(cp, "train", _job("borrow", {gpu: 2}))
    cp.wait_for(lambda: _admitted(cp, "train", "borrow"), timeout=WAIT, what="borrow admitted")
    cp.wait_for(lambda: _borrowed(cp, "train", "whole", gpu) == 2, timeout=WAIT, what="train borrowing 2")
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "train", "borrow"), timeout=WAIT, what="borrow's pod")
    _record("Job, 2 more GPUs (borrowing)", "Kueue admitted it borrowing serve's idle 2 (borrowed: 2); its pod created")
    # the cohort is full: pending
    _submit(cp, "train", _job("beyond", {gpu: 1}))
    cp.wait_for(lambda: _pending(cp, "train", "beyond"), timeout=WAIT, what="beyond pending")
    assert cp.get_json("job", "beyond", "-n", "train")["spec"]["suspend"] is True
    _record("Job, 1 more GPU (cohort full)", "Kueue left it pending (QuotaReserved False); the Job stays suspended")
    # serve reclaims its nominal quota: the borrowing workload is preempted (serve: reclaim Any)
    _submit(cp, "serve", _job("reclaim", {gpu: 2}, priority="inference"))
    cp.wait_for(lambda: _admitted(cp, "serve", "reclaim"), timeout=WAIT, what="serve admitted by reclaiming")
    evicted = cp.wait_for(
        lambda: _condition(_workload(cp, "train", "borrow"), "Preempted"), timeout=WAIT, what="borrow preempted"
    )
    assert evicted["status"] == "True" and evicted["reason"] == "InCohortReclamation", evicted
    cp.wait_for(
        lambda: cp.get_json("job", "borrow", "-n", "train")["spec"]["suspend"] is True, timeout=WAIT, what="suspended"
    )
    assert _admitted(cp, "train", "within")  # within nominal: never preempted
    _record(
        "serve (inference) reclaims its 2 GPUs",
        "Kueue preempted train's borrowing Job (InCohortReclamation) and suspended it; the one within nominal kept",
    )
    assert _quota_refusals(cp, "train") == [] and _quota_refusals(cp, "serve") == []
    _delete(cp, "train", "within", "borrow", "beyond")
    _delete(cp, "serve", "reclaim")


def test_lower_tier_preempted_for_higher_in_the_same_queue(env):
    """serve runs a batch-priority job on its nominal quota; an inference-priority one preempts it (train uses
    its own 2 on whole2, so there is nothing to borrow instead)."""
    cp, _, _ = env
    gpu = "nvidia.com/gpu"
    cp.wait_for(lambda: not cp.get_json("workloads", "-n", "train")["items"], timeout=WAIT, what="train drained")
    _submit(cp, "train", _job("busy", {gpu: 2}))
    cp.wait_for(lambda: _admitted(cp, "train", "busy"), timeout=WAIT, what="busy admitted")
    _submit(cp, "serve", _job("low", {gpu: 2}, priority="batch"))  # serve's nominal 2
    cp.wait_for(lambda: _admitted(cp, "serve", "low"), timeout=WAIT, what="low admitted")
    _submit(cp, "serve", _job("high", {gpu: 2}, priority="inference"))
    cp.wait_for(lambda: _admitted(cp, "serve", "high"), timeout=WAIT, what="high admitted")
    preempted = _condition(_workload(cp, "serve", "low"), "Preempted")
    assert preempted and preempted["status"] == "True" and preempted["reason"] == "InClusterQueue", preempted
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "serve", "high"), timeout=WAIT, what="high's pod")
    assert _quota_refusals(cp, "serve") == []
    _delete(cp, "serve", "low", "high")
    _delete(cp, "train", "busy")


def test_mig_admitted_against_the_mig_flavor(env):
    """MIG instances are quota of the MIG pool's flavor, and the pool's node selector reaches the pods."""
    cp, _, _ = env
    mig = "nvidia.com/mig-1g.5gb"
    _submit(cp, "train", _job("mig", {mig: 4}))
    wl = cp.wait_for(lambda: _admitted(cp, "train", "mig"), timeout=WAIT, what="mig admitted")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"][mig] == "mig"
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "train", "mig"), timeout=WAIT, what="mig's pod")
    pod = _pods(cp, "train", "mig")[0]
    assert pod["spec"]["nodeSelector"] == {manifests.LABEL_POOL: "mig"}
    # the fifth instance is beyond what exists (the pool has 7; train's nominal is 4, nobody else has any)
    _submit(cp, "train", _job("mig-more", {mig: 4}))
    cp.wait_for(lambda: _pending(cp, "train", "mig-more"), timeout=WAIT, what="mig-more pending")
    assert _quota_refusals(cp, "train") == []
    _delete(cp, "train", "mig", "mig-more")


ATTEMPTS: list[tuple[str, str]] = []  # (attempt, what Kueue and the API server did): printed at the end


def _record(attempt: str, outcome: str) -> None:
    ATTEMPTS.append((attempt, outcome))
    print(f"| {attempt} | {outcome} |")


def _refused(p, *words: str) -> bool:
    return p.returncode != 0 and kueue.POLICY in p.stderr and all(w in p.stderr for w in words)


def _gated(pod: dict) -> bool:
    return any(g["name"] == "kueue.x-k8s.io/admission" for g in pod["spec"].get("schedulingGates", []))


def _pod_workload(cp, ns, pod: str) -> dict | None:
    return _workload(cp, ns, pod)


def _drained(cp, ns) -> bool:
    return not cp.get_json("workloads", "-n", ns)["items"]


def _deployment(name: str, gpus: dict[str, int]) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {**_pod_spec(gpus), "restartPolicy": "Always"},
            },
        },
    }


def test_attempts_kueue_managed_kinds_go_through_kueue(env):
    """The attempts table: each way a tenant (impersonating a member of train-team) might reach GPUs, and what
    Kueue and the API server did. Kueue-managed kinds (a Job without a queue name, a Deployment, a StatefulSet,
    a bare pod) go through Kueue: held by its gate or suspend until it admits them on train's ClusterQueue, and
    the tenant cannot release a held pod itself; no pod is refused by the ResourceQuota."""
    cp, _, _ = env
    gpu, ns = "nvidia.com/gpu", "train"
    cp.wait_for(lambda: _drained(cp, ns) and _drained(cp, "serve"), timeout=WAIT, what="queues drained")

    # A Job without a queue name: Kueue's webhook gives it the LocalQueue `default` and suspends it.
    _submit(cp, ns, _job("plain", {gpu: 1}, queue=None))
    job = cp.get_json("job", "plain", "-n", ns)
    assert job["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == queues.LOCAL_QUEUE
    cp.wait_for(lambda: _admitted(cp, ns, "plain"), timeout=WAIT, what="plain admitted")
    cp.wait_for(lambda: _unsuspended_with_pod(cp, ns, "plain"), timeout=WAIT, what="plain's pod")
    _record(
        "Job without a queue name",
        "Kueue's webhook labelled it `default` and suspended it; admitted on train's quota, then its pod created",
    )

    # Deployment and StatefulSet: their pods are created held by Kueue's gate, released when admitted.
    dep = _deployment("serving", {gpu: 1})
    _submit(cp, ns, dep)
    pod = cp.wait_for(
        lambda: next(iter(cp.get_json("pods", "-n", ns, "-l", "app=serving")["items"]), None),
        timeout=WAIT,
        what="serving's pod",
    )
    wl = cp.wait_for(lambda: _admitted(cp, ns, pod["metadata"]["name"]), timeout=WAIT, what="serving's pod admitted")
    assert wl["status"]["admission"]["clusterQueue"] == ns
    cp.wait_for(
        lambda: not _gated(cp.get_json("pod", pod["metadata"]["name"], "-n", ns)), timeout=WAIT, what="gate removed"
    )
    _record(
        "Deployment (1 replica, 1 GPU, no queue name)",
        "its pod was created with Kueue's scheduling gate; Kueue admitted the pod's Workload on train's ClusterQueue and removed the gate",
    )
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 1,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {**_pod_spec({gpu: 1}), "restartPolicy": "Always"},
            },
        },
    }
    _submit(cp, ns, sts)
    wl = cp.wait_for(lambda: _admitted(cp, ns, "db-0"), timeout=WAIT, what="db-0 admitted")
    cp.wait_for(lambda: not _gated(cp.get_json("pod", "db-0", "-n", ns)), timeout=WAIT, what="db-0 ungated")
    # The Job and the Deployment's pod hold train's nominal 2 (on whole2): db-0 is admitted by borrowing one of
    # serve's idle GPUs on `whole`, and its pod is not refused by the ResourceQuota (sized for borrowing).
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"][gpu] == "whole"
    cp.wait_for(lambda: _borrowed(cp, "train", "whole", gpu) == 1, timeout=WAIT, what="train borrowing 1 on whole")
    _record(
        "StatefulSet (1 replica, 1 GPU), beyond train's nominal 2 (the Job and the Deployment hold it)",
        "pod db-0 created gated; Kueue admitted it borrowing 1 of serve's idle GPUs (flavor whole, borrowed: 1) "
        "and removed the gate",
    )

    # A bare pod: Kueue's pod webhook gates it and queues it. It names a LocalQueue that does not exist, so it
    # waits for good (a pod that waits for quota would count against the ResourceQuota all the same).
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "labels": {kueue.QUEUE_NAME_LABEL: "nowhere"}},
        "spec": _pod_spec({gpu: 1}),
    }
    _submit(cp, ns, bare)
    assert _gated(cp.get_json("pod", "bare", "-n", ns))

    def waiting():
        c = _condition(_workload(cp, ns, "bare"), "QuotaReserved")
        return c if c and c["status"] == "False" else None

    cp.wait_for(waiting, timeout=WAIT, what="bare's Workload waiting in Kueue")
    assert _gated(cp.get_json("pod", "bare", "-n", ns))
    _record(
        "bare pod, 1 GPU (naming a LocalQueue that does not exist)",
        "created held by Kueue's gate; its Workload not admitted (QuotaReserved False); the pod stays gated",
    )

    # ... and the tenant cannot release it itself.
    p = _as_tenant(
        cp,
        ns,
        "patch",
        "pod",
        "bare",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/schedulingGates"}]',
        check=False,
    )
    assert _refused(p, "scheduling gate"), p.stderr
    _record(
        "the tenant removes the scheduling gate of its waiting pod",
        "refused by gpupool-queue-policy (only Kueue removes the gate)",
    )
    assert _quota_refusals(cp, ns) == []
    for kind, names in (("deployment", ["serving"]), ("statefulset", ["db"]), ("pod", ["bare"])):
        _delete(cp, ns, *names, kind=kind)


def test_attempts_around_kueue_are_refused(env):
    """The attempts table, continued: what would bypass Kueue or escape the tenant's tier (train is batch, 10)
    is refused by gpupool's queue policy. Runs after the test above, whose admitted Job `plain` it names."""
    cp, _, _ = env
    gpu, ns = "nvidia.com/gpu", "train"
    dep = _deployment("serving", {gpu: 1})
    # A pod whose owner reference names the tenant's own admitted Job: Kueue's webhook takes it for the Job's
    # and does not gate it; the policy refuses it (not made by the job controller).
    uid = cp.get_json("job", "plain", "-n", ns)["metadata"]["uid"]
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "forged",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "plain", "uid": uid, "controller": True}
            ],
        },
        "spec": _pod_spec({gpu: 1}),
    }
    p = _submit(cp, ns, forged, check=False)
    assert _refused(p, "goes through Kueue"), p.stderr
    _record(
        "bare pod with an owner reference to the tenant's admitted Job",
        "Kueue did not gate it (owner is its Job); refused by gpupool-queue-policy",
    )

    # A held Job the tenant unsuspends itself.
    _submit(cp, ns, _job("held", {gpu: 1}, queue="nowhere"))
    p = _as_tenant(
        cp, ns, "patch", "job", "held", "-n", ns, "--type=merge", "-p", '{"spec": {"suspend": false}}', check=False
    )
    assert _refused(p, "suspend"), p.stderr
    assert cp.get_json("job", "held", "-n", ns)["spec"]["suspend"] is True
    _record(
        "the tenant sets suspend: false on its queued Job", "refused by gpupool-queue-policy (only Kueue unsuspends)"
    )

    # Priorities above the tier (train is batch, 10).
    for name, job, words, attempt in (
        (
            "sys",
            _job("sys", {gpu: 1}, priority_class="system-node-critical"),
            ("priorityClassName",),
            "Job with priorityClassName system-node-critical",
        ),
        (
            "vip",
            _job("vip", {gpu: 1}, priority_class="inference"),
            ("priorityClassName",),
            "Job with priorityClassName inference (higher tier)",
        ),
        (
            "wpc",
            _job("wpc", {gpu: 1}, priority="inference"),
            (kueue.PRIORITY_CLASS_LABEL,),
            "Job with WorkloadPriorityClass inference (higher tier)",
        ),
    ):
        p = _submit(cp, ns, job, check=False)
        assert _refused(p, *words), (name, p.stderr)
        _record(attempt, "refused by gpupool-queue-policy; no Workload")
    high_dep = json.loads(json.dumps(dep))
    high_dep["metadata"] = {"name": "vip-serving", "labels": {kueue.PRIORITY_CLASS_LABEL: "inference"}}
    p = _submit(cp, ns, high_dep, check=False)
    assert _refused(p, kueue.PRIORITY_CLASS_LABEL), p.stderr
    _record("Deployment with WorkloadPriorityClass inference", "refused by gpupool-queue-policy")
    critical = json.loads(json.dumps(dep))
    critical["metadata"] = {"name": "critical-serving"}
    critical["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    p = _submit(cp, ns, critical, check=False)
    assert _refused(p, "priorityClassName"), p.stderr
    _record("Deployment with priorityClassName system-node-critical", "refused by gpupool-queue-policy")

    assert _quota_refusals(cp, ns) == []
    _delete(cp, ns, "plain", "held")


def test_jobset_child_jobs_admitted(env):
    """A tenant's JobSet (two replicated Jobs of 1 GPU): Kueue suspends and admits it as one workload, the
    JobSet controller creates its child Jobs (no queue name: the policy lets them through as the controller's),
    unsuspends them after admission, and the job controller creates their pods within the quota."""
    cp, _, _ = env
    ns, gpu = "train", "nvidia.com/gpu"
    cp.wait_for(lambda: _drained(cp, ns), timeout=WAIT, what="train drained")
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "trainer"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": _pod_spec({gpu: 1})}}
                    },
                }
            ]
        },
    }
    # The object as the API server stored it, after every mutating webhook: read back later, Kueue may already
    # have admitted and unsuspended it (a full run under load did).
    created = json.loads(_as_tenant(cp, ns, "create", "-n", ns, "-o", "json", "-f", "-", input=json.dumps(js)).stdout)
    assert (
        created["spec"].get("suspend") is True
        and created["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == queues.LOCAL_QUEUE
    )
    wl = cp.wait_for(lambda: _admitted(cp, ns, "trainer"), timeout=WAIT, what="the JobSet admitted")
    assert wl["status"]["admission"]["clusterQueue"] == ns

    def children():
        jobs = cp.get_json("jobs", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name=trainer")["items"]
        return jobs if len(jobs) == 2 and all(j["spec"].get("suspend") is False for j in jobs) else None

    jobs = cp.wait_for(children, timeout=WAIT, what="two child Jobs unsuspended")
    assert all(kueue.QUEUE_NAME_LABEL not in j["metadata"].get("labels", {}) for j in jobs)
    for j in jobs:
        cp.wait_for(lambda n=j["metadata"]["name"]: len(_pods(cp, ns, n)) == 1, timeout=WAIT, what="a child Job's pod")
    assert _quota_refusals(cp, ns) == []
    _record(
        "JobSet, 2 child Jobs of 1 GPU",
        "Kueue suspended and admitted it on train's ClusterQueue; the JobSet controller's child Jobs (no queue name) let through and unsuspended; their pods created",
    )
    # A Job the tenant writes as the JobSet's child (controller owner reference, no queue name): Kueue's webhook
    # takes it for the JobSet's and leaves it alone; the policy refuses it (not the JobSet controller's).
    forged = _job("forged-child", {gpu: 1}, queue=None)
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "trainer", "controller": True}
    forged["metadata"]["ownerReferences"] = [{**owner, "uid": created["metadata"]["uid"]}]
    p = _submit(cp, ns, forged, check=False)
    assert _refused(p, kueue.QUEUE_NAME_LABEL), p.stderr
    _record(
        "Job with an owner reference to the tenant's admitted JobSet, no queue name",
        "Kueue's webhook did not queue it (child of a managed JobSet); refused by gpupool-queue-policy",
    )
    p = _submit(
        cp, ns, {**js, "metadata": {"name": "vip", "labels": {kueue.PRIORITY_CLASS_LABEL: "inference"}}}, check=False
    )
    assert _refused(p, kueue.PRIORITY_CLASS_LABEL), p.stderr
    _record("JobSet with WorkloadPriorityClass inference", "refused by gpupool-queue-policy")
    _delete(cp, ns, "trainer", kind="jobset")
