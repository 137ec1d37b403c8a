"""The `queueing:` block's objects under the real Kueue controller (sigs.k8s.io/kueue v0.19.2, built by
toolchain/build.sh as `kueue-manager`, its CRDs from the same module), on a private local control plane with
kube-controller-manager's job controller, so admitted Jobs create pods that meet the ResourceQuota.

What it proves, with Jobs submitted to the tenants' LocalQueue `default`:
admission within nominal quota, pending beyond it, borrowing from an idle tenant of the same cohort,
preemption when the lender reclaims, a lower tier preempted for a higher one in the same queue, MIG resources
admitted against the MIG pool's flavor (and the pool's node selector injected), no admitted job's pods refused
by the tenant's ResourceQuota (sized by gpupool.model.queues.max_admitted), and the queue policy refusing a
Job that names no queue or a higher tier's priority.

Kueue's webhooks are deliberately off: the API server calls none (no webhook configurations), since it cannot
reach a webhook server outside the cluster network by Service name. Kueue's manager still runs its webhook
server, with the certificates its internal cert management makes (that also injects the CA into the CRDs'
conversion webhook, which the API server never calls: v1beta2 is the only stored version). What that skips,
and how the test stands in for it:
- the Job defaulting webhook (pkg/controller/jobs/job/job_webhook.go) would suspend new Jobs and give an
  unlabelled one the LocalQueue `default` (LocalQueueDefaulting): the Jobs here are created suspended and
  labelled, as the webhook would leave them;
- the ClusterQueue/Cohort validating webhooks (pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go): the
  CRDs' own schema and CEL still run on apply; the webhook's checks are the GP52x rules (tests/test_queueing.py);
- Workload webhooks: Kueue creates the Workloads itself, from Jobs it reads.
Classic preemption (no fairSharing in the Configuration). No scheduler or kubelet: pods stay Pending, which is
all Kueue needs (it admits by unsuspending Jobs).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from gpupool.k8s import kueue, manifests
from gpupool.model import queues
from gpupool.rules.engine import load_valid_spec
from tests.e2e.cluster import ControlPlane, ControlPlaneError, _find_kubectl, free_port
from tests.e2e.conftest import _checked_bin_dir, _unavailable

pytestmark = pytest.mark.e2e

WAIT = 300  # seconds, generous for a loaded runner; every wait ends as soon as its condition holds
MANAGER = "kueue-manager"
CRDS = "kueue-crds.yaml"
# The CRDs the release installs with a conversion webhook (config/components/crd/kustomization.yaml, patches
# webhook_in_*.yaml; kustomize's namePrefix "kueue-" and namespace "kueue-system", config/default). Kueue's
# cert rotator refuses to report ready until it injected its CA into each (pkg/util/cert/cert.go:130-175).
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
SYSTEM_NS = "kueue-system"

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: e2e}
nodePools:
  - {name: whole, gpu: L4, gpusPerNode: 4, nodes: [n-whole]}
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


def _config(workdir: Path) -> tuple[Path, int]:
    health = free_port()
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": SYSTEM_NS,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": free_port(), "host": "127.0.0.1", "certDir": str(workdir / "kueue-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "kueue-webhook-service",
            "webhookSecretName": "kueue-webhook-server-cert",
        },
        "integrations": {"frameworks": ["batch/job"]},
        # gpupool's ClusterQueues cover GPUs only (docs/queueing.md, "Kueue's configuration").
        "resources": {"excludeResourcePrefixes": ["cpu", "memory"]},
    }
    path = workdir / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, health


def _crds(bin_dir: Path) -> list[dict]:
    out = []
    for doc in yaml.safe_load_all((bin_dir / CRDS).read_text()):
        if not doc:
            continue
        if doc["metadata"]["name"].split(".")[0] in CONVERTED:
            doc["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "service": {"namespace": SYSTEM_NS, "name": "kueue-webhook-service", "path": "/convert"}
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(doc)
    return out


SECRET = "kueue-webhook-server-cert"


def _mount_secret(cp: ControlPlane, manager: Kueue) -> None:
    """Do what the kubelet's secret volume does in the release's Deployment: put the Secret's keys, as the
    rotator wrote them, as files into the webhook server's cert dir. The rotator only waits for them to
    appear (ensureCertsMounted, cert-controller v0.16.0 pkg/rotator/rotator.go:877-898)."""

    def filled():
        manager.ready()  # raises if the manager died
        data = cp.get_json("secret", SECRET, "-n", SYSTEM_NS).get("data") or {}
        return data if "tls.crt" in data and "tls.key" in data else None

    data = cp.wait_for(filled, timeout=WAIT, what="the webhook certificate Secret filled by Kueue's rotator")
    manager.cert_dir.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        path = manager.cert_dir / key
        path.write_bytes(base64.b64decode(value))
        path.chmod(0o600)


class Kueue:
    """The manager process against one control plane."""

    def __init__(self, cp: ControlPlane, bin_dir: Path):
        self.cp = cp
        config, self.health = _config(cp.workdir)
        self.cert_dir = cp.workdir / "kueue-certs"
        self.log = open(cp.log_dir / "kueue-manager.log", "w")  # noqa: SIM115 (closed in stop)
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
        self.proc = subprocess.Popen(
            [
                str(bin_dir / MANAGER),
                f"--config={config}",
                "--feature-gates=VisibilityOnDemand=false",
                "--zap-log-level=2",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise ControlPlaneError(f"kueue-manager exited {self.proc.returncode}: {self.tail()}")
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def tail(self, lines: int = 40) -> str:
        self.log.flush()
        return "\n".join((self.cp.log_dir / "kueue-manager.log").read_text().splitlines()[-lines:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    bin_dir = _checked_bin_dir(("etcd", "kube-apiserver", "kube-controller-manager", MANAGER))
    if not (bin_dir / CRDS).is_file():
        _unavailable(f"missing {CRDS} next to {MANAGER} (toolchain/build.sh {MANAGER})")
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl(), extra_controllers=("job-controller",))
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"local control plane failed to start: {e}", pytrace=False)
    manager = None
    try:
        cp.kubectl(
            "apply",
            "--server-side",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": _crds(bin_dir)}),
        )
        cp.kubectl("wait", "--for=condition=Established", "crd", "--all", f"--timeout={WAIT}s", timeout=WAIT)
        cp.kubectl("create", "namespace", SYSTEM_NS)
        # The release's empty Secret, which Kueue's cert rotator fills (config/components/internalcert/secret.yaml;
        # cert-controller v0.16.0 pkg/rotator/rotator.go:489-492 updates it, never creates it).
        cp.kubectl("create", "secret", "generic", SECRET, "-n", SYSTEM_NS)
        manager = Kueue(cp, bin_dir)
        try:
            _mount_secret(cp, manager)
            cp.wait_for(manager.ready, timeout=WAIT, interval=0.5, what="kueue-manager ready")
        except ControlPlaneError as e:
            raise ControlPlaneError(f"{e}\n{manager.tail()}") from None
        spec_path = tmp_path_factory.mktemp("kueue") / "spec.yaml"
        spec_path.write_text(SPEC)
        spec = load_valid_spec(spec_path)
        plan = manifests.build(spec)
        # Everything gpupool renders except node patches (the nodes do not exist) and the operator chart.
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
        yield cp, spec, manager
    finally:
        if manager is not None:
            manager.stop()
        cp.stop()


def _active(cp: ControlPlane, kind: str, name: str, namespace: str | None = None) -> bool:
    args = [kind, name] + (["-n", namespace] if namespace else [])
    p = cp.kubectl("get", *args, "-o", "json", check=False)
    if p.returncode != 0:
        return False
    conditions = json.loads(p.stdout).get("status", {}).get("conditions", [])
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def _job(name: str, gpus: dict[str, int], priority: str | None = None, queue: str | None = queues.LOCAL_QUEUE) -> dict:
    labels = {}
    if queue:
        labels[kueue.QUEUE_NAME_LABEL] = queue
    if priority:
        labels[kueue.PRIORITY_CLASS_LABEL] = priority
    limits = {r: str(n) for r, n in gpus.items()}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,  # what Kueue's Job webhook sets (webhooks are off, see the module docstring)
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
                }
            },
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


def _submit(cp, ns, job):
    cp.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(job))


def _delete(cp, ns, *jobs):
    cp.kubectl("delete", "job", "-n", ns, "--cascade=foreground", "--wait=true", *jobs, timeout=WAIT)


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
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"][gpu] == "whole"
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "train", "within"), timeout=WAIT, what="within's pod")
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
    # the cohort is full: pending
    _submit(cp, "train", _job("beyond", {gpu: 1}))
    cp.wait_for(lambda: _pending(cp, "train", "beyond"), timeout=WAIT, what="beyond pending")
    assert cp.get_json("job", "beyond", "-n", "train")["spec"]["suspend"] is True
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
    assert _quota_refusals(cp, "train") == [] and _quota_refusals(cp, "serve") == []
    _delete(cp, "train", "within", "borrow", "beyond")
    _delete(cp, "serve", "reclaim")


def test_lower_tier_preempted_for_higher_in_the_same_queue(env):
    """serve runs a batch-priority job on its nominal quota; an inference-priority one preempts it."""
    cp, _, _ = env
    gpu = "nvidia.com/gpu"
    cp.wait_for(lambda: not cp.get_json("workloads", "-n", "train")["items"], timeout=WAIT, what="train drained")
    _submit(cp, "serve", _job("low", {gpu: 4}, priority="batch"))  # nominal 2 + train's idle 2
    cp.wait_for(lambda: _admitted(cp, "serve", "low"), timeout=WAIT, what="low admitted")
    _submit(cp, "serve", _job("high", {gpu: 2}, priority="inference"))
    cp.wait_for(lambda: _admitted(cp, "serve", "high"), timeout=WAIT, what="high admitted")
    preempted = _condition(_workload(cp, "serve", "low"), "Preempted")
    assert preempted and preempted["status"] == "True" and preempted["reason"] == "InClusterQueue", preempted
    cp.wait_for(lambda: _unsuspended_with_pod(cp, "serve", "high"), timeout=WAIT, what="high's pod")
    assert _quota_refusals(cp, "serve") == []
    _delete(cp, "serve", "low", "high")


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


def test_queue_policy_refuses_bypass_and_higher_priority(env):
    cp, _, _ = env
    p = cp.kubectl(
        "apply",
        "-n",
        "train",
        "-f",
        "-",
        input=json.dumps(_job("noqueue", {"nvidia.com/gpu": 1}, queue=None)),
        check=False,
    )
    assert p.returncode != 0 and kueue.QUEUE_NAME_LABEL in p.stderr, p.stderr
    p = cp.kubectl(
        "apply",
        "-n",
        "train",
        "-f",
        "-",
        input=json.dumps(_job("vip", {"nvidia.com/gpu": 1}, priority="inference")),
        check=False,
    )
    assert p.returncode != 0 and kueue.PRIORITY_CLASS_LABEL in p.stderr, p.stderr
