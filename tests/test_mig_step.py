"""One node's MIG reconfiguration (gpupool.k8s.mig_step) against an in-memory API server and a MIG Manager that
behaves as mig-parted v0.15.0 does (cmd/nvidia-mig-manager/main.go 436-446 and 569-577: a pod runs once for the
label it lists at start, afterwards only for a *changed* label; pkg/mig/reconfigure/reconfigure.go 137-158: a
name missing from the pod's mounted file is `failed`, a config already applied `success`, otherwise `pending`
then `success`). Time is the fake clock's: each sleep of the step is one tick of MIG Manager."""

from __future__ import annotations

import itertools
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from gpupool.k8s import drain, mig_step

OLD, NEW = "a100-80gb-all-balanced", "a100-80gb-all-1g.10gb"
NS, NODE = "gpu-operator", "n1"
CONFIGS = {OLD, NEW}  # the ConfigMap: the old name kept while a node carries it


class Cluster:
    def __init__(self, label=OLD, state="success", checked=OLD, pods=1, fail=False, respawn=True):
        self.labels = {"nvidia.com/mig.config": label, "nvidia.com/mig.config.state": state}
        if checked:
            self.labels["gpupool.dev/mig-config-checked"] = checked
        self.gpus = label if state == "success" else None  # what the GPUs have
        self.uids = itertools.count(1)
        self.pod: dict | None = None
        if pods:
            self._new_pod(initial=True)
        self.fail, self.respawn = fail, respawn
        self.log: list[str] = []  # what happened, in order
        self.now = 0.0

    # -- MIG Manager -------------------------------------------------------------------------------
    def _new_pod(self, initial=False):
        uid = f"uid-{next(self.uids)}"
        # An initial pod is idle after its run for the current label; a new one runs once for the label it lists.
        self.pod = {"uid": uid, "last": self.labels["nvidia.com/mig.config"] if initial else None, "mounted": CONFIGS}

    def tick(self):
        if self.pod is None:
            if self.respawn and self.deleted:
                self._new_pod()
                self.log.append("started")
            return
        label = self.labels["nvidia.com/mig.config"]
        if self.pod["last"] == label:
            return
        self.pod["last"] = label
        if label not in self.pod["mounted"] or self.fail:
            self.labels["nvidia.com/mig.config.state"] = "failed"
        else:
            if self.gpus != label:
                self.log.append(f"applied {label}")
            self.gpus = label
            self.labels["nvidia.com/mig.config.state"] = "success"
        self.log.append(f"run {label}: {self.labels['nvidia.com/mig.config.state']}")

    deleted = False

    # -- the API -----------------------------------------------------------------------------------
    def api(self, method, path, body=None, content_type="application/json"):
        url = urlparse(path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == f"/api/v1/nodes/{NODE}" and method == "GET":
            return 200, {"metadata": {"name": NODE, "labels": dict(self.labels)}}
        if url.path == f"/api/v1/nodes/{NODE}" and method == "PATCH":
            assert content_type == "application/merge-patch+json"
            self.labels.update(body["metadata"]["labels"])
            self.log.append(
                "patch " + ",".join(f"{k.split('/')[-1]}={v}" for k, v in body["metadata"]["labels"].items())
            )
            return 200, {}
        if url.path == f"/api/v1/namespaces/{NS}/pods" and method == "GET":
            assert q == {"labelSelector": "app=nvidia-mig-manager", "fieldSelector": f"spec.nodeName={NODE}"}
            items = (
                [{"metadata": {"name": f"mig-manager-{self.pod['uid']}", "uid": self.pod["uid"]}}] if self.pod else []
            )
            return 200, {"items": items}
        if url.path.startswith(f"/api/v1/namespaces/{NS}/pods/") and method == "DELETE":
            assert self.pod and body == {"preconditions": {"uid": self.pod["uid"]}}, unquote(url.path)
            self.pod, self.deleted = None, True
            self.log.append("deleted")
            return 200, {}
        if url.path == "/api/v1/pods" and method == "GET":  # the drain's listing: no GPU pods here
            return 200, {"items": []}
        raise AssertionError(f"unexpected {method} {path}")

    def sleep(self, seconds):
        self.now += seconds
        self.tick()

    def clock(self):
        return self.now


def _run(cluster: Cluster, *, timeout=60, drain_on=False):
    settings = mig_step.Settings(NODE, NEW, NS, timeout, drain_on, 30, drain.Care())
    return mig_step.run(cluster.api, settings, clock=cluster.clock, sleep=cluster.sleep)


def test_a_change_restarts_the_nodes_mig_manager_before_the_relabel_and_waits_for_its_answer():
    c = Cluster()
    assert _run(c) == "reconfigured"
    assert c.labels == {
        "nvidia.com/mig.config": NEW,
        "nvidia.com/mig.config.state": "success",
        "gpupool.dev/mig-config-checked": NEW,
    }
    assert c.gpus == NEW
    # pending, then the pod restarted and its start-up run for the old label (kept: success, nothing applied), and
    # only then the relabel, answered by the new pod, which mounts the new file.
    assert c.log == [
        "patch mig.config.state=pending",
        "deleted",
        "started",
        f"run {OLD}: success",
        f"patch mig.config={NEW},mig.config.state=pending",
        f"applied {NEW}",
        f"run {NEW}: success",
        f"patch mig-config-checked={NEW}",
    ]


@pytest.mark.parametrize("state", ["pending", "failed"])
def test_a_rerun_after_the_relabel_restarts_mig_manager_which_never_answers_an_unchanged_label(state):
    """The interrupted run left the target label with our `pending` (MIG Manager may already have answered, and
    a re-applied label changes nothing it watches) or with `failed` since fixed: the rerun restarts the pod,
    whose start-up run is the run for the target, instead of waiting for an answer that never comes."""
    c = Cluster(label=NEW, state=state, checked=OLD)
    assert _run(c, timeout=30) == "reconfigured"
    assert c.labels["nvidia.com/mig.config.state"] == "success" and c.gpus == NEW
    assert c.log[:3] == ["patch mig.config.state=pending", "deleted", "started"]
    assert f"patch mig.config={NEW},mig.config.state=pending" not in c.log


def test_a_node_already_done_is_left_alone_and_no_pending_is_written():
    c = Cluster(label=NEW, state="success", checked=None)
    assert _run(c) == "already"
    assert c.log == [f"patch mig-config-checked={NEW}"] and c.pod["uid"] == "uid-1"


def test_a_node_without_a_label_is_relabelled_after_the_restart_without_waiting_for_a_start_up_run():
    """A node gpupool meets first (no nvidia.com/mig.config yet) with a MIG Manager pod: its start-up run has no
    label to run for and writes no state, so the step does not wait for one; the label it then sets is the run."""
    c = Cluster(label=None, state=None, checked=None)
    c.labels = {}
    assert _run(c, timeout=30) == "reconfigured"
    assert c.labels["nvidia.com/mig.config.state"] == "success" and c.gpus == NEW
    assert c.log[0] == "deleted" and "patch mig.config.state=pending" not in c.log
    assert f"patch mig.config={NEW},mig.config.state=pending" in c.log


def test_a_node_without_mig_manager_is_labelled_without_pending_or_wait():
    c = Cluster(label=OLD, state="success", pods=0)
    assert _run(c) == "unmanaged"
    assert c.log == [f"patch mig.config={NEW}"] and c.now == 0


def test_a_node_without_mig_manager_is_drained_before_its_relabel():
    """Issue 37: a node whose MIG Manager pod is missing (the operator upgrading, its pod gone) still has its GPU
    pods drained before the relabel its MIG Manager applies once it starts; an unchanged label drains nothing."""
    c = Cluster(label=OLD, state="success", pods=0)
    seen = _listings(c)
    assert _run(c, drain_on=True) == "unmanaged"
    assert seen == [0] and c.log == [f"patch mig.config={NEW}"]
    d = Cluster(label=NEW, state="failed", checked=NEW, pods=0)
    seen = _listings(d)
    assert _run(d, drain_on=True) == "unmanaged" and seen == [] and d.log == []


def test_failed_stops_with_the_node_named_and_no_record():
    c = Cluster(fail=True)
    with pytest.raises(mig_step.MigStepError) as err:
        _run(c)
    assert "node n1" in str(err.value) and "nvidia.com/mig.config.state=failed" in str(err.value)
    assert c.labels.get("gpupool.dev/mig-config-checked") == OLD


def test_a_pod_that_never_comes_back_times_out_naming_the_node():
    c = Cluster(respawn=False)
    with pytest.raises(mig_step.MigStepError) as err:
        _run(c, timeout=5)
    assert "node n1" in str(err.value) and "5s" in str(err.value) and "'pending'" in str(err.value)
    assert c.labels["nvidia.com/mig.config"] == OLD  # never relabelled


def _listings(c: Cluster) -> list[int]:
    """Spy on the drain's pod listing: the number of log entries before each."""
    seen: list[int] = []
    api = c.api

    def spy(method, path, body=None, content_type="application/json"):
        if path.startswith("/api/v1/pods?"):
            seen.append(len(c.log))
        return api(method, path, body, content_type)

    c.api = spy  # type: ignore[method-assign]
    return seen


def test_the_drain_runs_before_anything_is_written_and_not_for_a_stale_state_of_a_config_already_there():
    c = Cluster()
    seen = _listings(c)
    _run(c, drain_on=True)
    assert seen == [0]
    # The label and gpupool's record are the target: the GPUs have it, only the state is stale. No drain.
    d = Cluster(label=NEW, state="pending", checked=NEW)
    d.gpus = NEW
    seen = _listings(d)
    assert _run(d, drain_on=True) == "reconfigured" and seen == []


def test_the_provider_passes_whole_node_to_the_drain(monkeypatch):
    """The mig step's input wholeNode (rollout.Reconfigure.whole_node) reaches the drain as Care.whole_node."""
    from gpupool.deploy.mig_step_provider import MigStepProvider
    from gpupool.k8s import kubeclient

    seen = {}
    monkeypatch.setattr(kubeclient, "Client", lambda *_a: "api")
    monkeypatch.setattr(mig_step, "run", lambda api, settings: seen.setdefault("care", settings.care) and "already")
    props = {"node": "n1", "config": NEW, "namespace": NS, "kubeconfig": "", "context": "", "timeoutSeconds": 5}
    for extra, whole in (({}, False), ({"wholeNode": True, "force": True}, True)):
        seen.clear()
        MigStepProvider()._step({**props, **extra})
        assert seen["care"] == drain.Care(force=bool(extra), whole_node=whole)
