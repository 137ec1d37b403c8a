"""A stand-in for NVIDIA's MIG Manager on a kubelet-less control plane, plus a recorder of what nodes went through.

It follows NVIDIA/mig-parted v0.15.0 (paths and lines at tag v0.15.0) and the GPU Operator v26.7.0 that runs it:

- One pod per node, each with its own copy of the mounted `config.yaml`: a pod mounts the MIG ConfigMap's content
  when it starts (the operator mounts the ConfigMap as a directory, gpu-operator `assets/state-mig-manager/
  0600_daemonset.yaml` 80-81 and 110-112, `controllers/object_controls.go` TransformMIGManager sets
  CONFIG_FILE=/mig-parted-config/config.yaml), and kubelet refreshes a running pod's copy only on its own sync,
  `mount_lag` seconds after the ConfigMap changed (None: not within a test; nothing may depend on it).
- The label watch (`cmd/nvidia-mig-manager/main.go`): the informer's AddFunc hands the label it lists at start
  to the loop (569-571), UpdateFunc only a *changed* `nvidia.com/mig.config` (572-577), never the state label.
  The loop (436-446, with SyncableMigConfig 90-120) runs one reconfiguration at a time, each for the value it
  read when it began; a change that arrives meanwhile is picked up (only the newest) when it ends.
- One run (`pkg/mig/reconfigure/reconfigure.go` Run, 127-240), `pending_delay` after it began: the selected
  name missing from the pod's mounted file writes `failed` (137-140: `nvidia-mig-parted assert --valid-config`,
  assert.go "selected mig-config not present"); a config the GPUs already have writes `success` (142-146);
  otherwise `pending` (158), then after `apply_delay` the GPUs get the config and the state `success` (239),
  or `failed` for the nodes in `fail` (206-209).
- The config-hash roll: when the `nvidia-mig-manager` DaemonSet's pod template changes (the stub chart renders
  it from the values, as the operator does from the ClusterPolicy), pods are replaced one node at a time
  (RollingUpdate, maxUnavailable 1; the template has no readiness probe, so a new pod counts as available when
  it runs), `restart_delay` apart, in reverse node order (the controller promises no order; this one makes the
  first wave's nodes restart last). A replaced pod's run in flight is abandoned.
- The pods are objects of the API server (`pods=True`): one `nvidia-mig-manager-*` pod per node, labelled
  `app: nvidia-mig-manager` as the operator's DaemonSet template labels them (gpu-operator v26.7.0
  `assets/state-mig-manager/0600_daemonset.yaml` lines 7-15), bound to its node. No kubelet or DaemonSet
  controller runs here, so the simulator is both: a pod whose deletion started is removed (grace period 0,
  as kubelet does once its containers stopped) and its run in flight abandoned, and `restart_delay` after a
  node's pod is gone a new one is created, which mounts the ConfigMap as it is then and makes its start-up
  run for the label it lists (main.go 569-571, 436-446). This is how gpupool's mig step restarts one node's
  MIG Manager (gpupool.k8s.mig_step), and how the roll below replaces pods.
`restart(node)` replaces a node's pod at once, as deleting it by hand does.

The same thread samples every node (labels, unschedulable, reconfiguring) every `interval` seconds and keeps a
timeline of changes, so tests can assert on what happened when: how many nodes were unavailable at once, and in
which order nodes finished. No pytest import: usable from scripts too.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

MIG_CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"
CONFIGMAP = "gpupool-mig-config"
DAEMONSET = "nvidia-mig-manager"


@dataclass
class Event:
    t: float  # seconds since the simulator started
    node: str
    what: str  # "config=<value>", "state=<value>", "cordoned", "uncordoned", "sim:<action>"


@dataclass
class Sample:
    t: float
    states: dict[str, str]
    cordoned: frozenset[str]
    reconfiguring: frozenset[str] = frozenset()  # a run past its own `pending`: the GPUs are being changed


@dataclass
class _Run:
    config: str
    due: float
    phase: str = "validate"  # then "apply"


@dataclass
class _Pod:
    mounted: dict[str, str]  # config name -> its entries (canonical JSON), as this pod's file has them
    current: str | None  # SyncableMigConfig.current: the newest label the informer handed over
    last_read: str | None  # SyncableMigConfig.lastRead: the label the last run began with
    run: _Run | None = None


@dataclass
class MigManagerSim:
    cp: object  # tests.e2e.cluster.ControlPlane
    nodes: tuple[str, ...]
    pending_delay: float = 0.5
    apply_delay: float = 2.0
    fail: set[str] = field(default_factory=set)
    interval: float = 0.1
    restart_delay: float = 0.5
    mount_lag: float | None = None
    namespace: str = "gpu-operator"
    pods: bool = True  # the MIG Manager pods as API objects (see the module docstring)

    def __post_init__(self):
        self.events: list[Event] = []
        self.samples: list[Sample] = []
        self.gpus: dict[str, str | None] = {}  # node -> the entries its GPUs have (canonical JSON)
        self._gpus_named: dict[str, str] = {}  # node -> its config's name, while no ConfigMap says what it holds
        self._seen: dict[str, tuple] = {}
        self._pods: dict[str, _Pod | None] = {}
        self._template: str | None = None
        self._roll: list[str] = []  # nodes still to be replaced by the current roll
        self._rolling: str | None = None  # the node whose pod the roll deleted last
        self._config: dict[str, str] = {}
        self._config_changed_at = 0.0
        self._requests: list[str] = []  # restart(node) calls, handled by the loop
        self._due: dict[str, float] = {}  # node -> when its replacement pod is created (its old one is gone)
        self._generation = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="mig-manager-sim", daemon=True)

    # -- control ---------------------------------------------------------------------------------
    def __enter__(self) -> MigManagerSim:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Pods already running on every node, each idle after its last run for the node's label (whose config
        the GPUs have), mounting the current ConfigMap; the DaemonSet's current template is what they run."""
        self._config = self._read_config()
        self._template = self._read_template()
        labels = self._list()
        for node in self.nodes:
            # The initial sample, logged before start() returns: `timeline(now())` holds only what came after.
            config = self._observe(node, labels.get(node))[0]
            self._pods[node] = _Pod(dict(self._config), config, config)
            self.gpus[node] = self._config.get(config) if config else None
            if config and self.gpus[node] is None:
                self._gpus_named[node] = config  # the GPUs have this config; what it holds is read once it is there
        if self.pods:
            live = self._live_pods()
            for node in self.nodes:
                if node not in live and not self._create_pod(node):
                    self._pods[node] = None  # no pod until the namespace is there (the loop retries)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def delete_pods(self) -> None:
        """Remove the pod objects (a test module's end: the next simulator makes its own)."""
        for pod in self._live_pods(all_=True).values():
            self._delete_pod_object(pod)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def restart(self, node: str) -> None:
        """Delete the node's pod: its replacement mounts the current ConfigMap and runs for the label it lists."""
        with self._lock:
            self._requests.append(node)

    # -- queries ---------------------------------------------------------------------------------
    def max_at_once(self, state: str = "pending") -> int:
        return max((sum(1 for s in x.states.values() if s == state) for x in self.samples), default=0)

    def max_cordoned(self) -> int:
        return max((len(x.cordoned) for x in self.samples), default=0)

    def max_unavailable(self) -> int:
        """Nodes cordoned or having their GPUs changed, at once."""
        return max((len(x.cordoned | x.reconfiguring) for x in self.samples), default=0)

    def configs(self) -> dict[str, str]:
        """The MIG ConfigMap's configs as last read: name -> entries (canonical JSON, as in `gpus`)."""
        return dict(self._config)

    def first(self, node: str, what: str, after: float = 0.0) -> float | None:
        return next((e.t for e in self.events if e.node == node and e.what == what and e.t >= after), None)

    def timeline(self, since: float = 0.0) -> list[Event]:
        return [e for e in self.events if e.t >= since]

    # -- the API ---------------------------------------------------------------------------------
    def _list(self) -> dict[str, Any]:
        status, obj = self.cp.api("GET", "/api/v1/nodes")
        if status != 200:
            return {}
        return {n["metadata"]["name"]: n for n in obj.get("items", [])}

    def _read_config(self) -> dict[str, str]:
        status, obj = self.cp.api("GET", f"/api/v1/namespaces/{self.namespace}/configmaps/{CONFIGMAP}")
        if status != 200:
            return {}
        doc = yaml.safe_load(obj.get("data", {}).get("config.yaml", "")) or {}
        return {name: json.dumps(entries, sort_keys=True) for name, entries in doc.get("mig-configs", {}).items()}

    def _read_template(self) -> str | None:
        status, obj = self.cp.api("GET", f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets/{DAEMONSET}")
        if status != 200:
            return None
        return json.dumps(obj["spec"]["template"], sort_keys=True)

    def _live_pods(self, all_: bool = False) -> dict[str, dict]:
        """node -> its MIG Manager pod object (with all_, those being deleted too)."""
        status, obj = self.cp.api(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods", params={"labelSelector": f"app={DAEMONSET}"}
        )
        out: dict[str, dict] = {}
        for pod in obj.get("items", []) if status == 200 else []:
            node = pod.get("spec", {}).get("nodeName")
            if node in self.nodes and (all_ or not pod["metadata"].get("deletionTimestamp")):
                out[node] = pod
        return out

    def _deleting_pods(self) -> list[dict]:
        status, obj = self.cp.api(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods", params={"labelSelector": f"app={DAEMONSET}"}
        )
        items = obj.get("items", []) if status == 200 else []
        return [p for p in items if p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") in self.nodes]

    def _create_pod(self, node: str) -> bool:
        """False when the API server refuses (the operator namespace is not there yet): retried later."""
        self._generation += 1
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{DAEMONSET}-{node}-{self._generation}", "labels": {"app": DAEMONSET}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/mig-manager"}]},
        }
        status, _ = self.cp.api("POST", f"/api/v1/namespaces/{self.namespace}/pods", pod)
        return status == 201

    def _delete_pod_object(self, pod: dict) -> None:
        meta = pod["metadata"]
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        self.cp.api("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{meta['name']}", body)

    def _set_state(self, node: str, state: str) -> None:
        # reconfigure.go setNodeLabels (599-611): a JSON merge patch of the labels.
        self.cp.api(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"metadata": {"labels": {STATE: state}}},
            content_type="application/merge-patch+json",
        )

    # -- the loop --------------------------------------------------------------------------------
    def _log(self, node: str, what: str, t: float | None = None) -> None:
        with self._lock:
            self.events.append(Event(self.now() if t is None else t, node, what))

    def _observe(self, node: str, obj: dict | None) -> tuple[str | None, str | None, bool]:
        """Log what changed on NODE since the last read: (config, state, unschedulable)."""
        labels = (obj or {}).get("metadata", {}).get("labels", {})
        unschedulable = bool((obj or {}).get("spec", {}).get("unschedulable"))
        t = self.now()  # one time for all changes seen in one read: their order within it is unknown
        seen = (labels.get(MIG_CONFIG), labels.get(STATE), unschedulable)
        old = self._seen.get(node)
        if old is None or old[0] != seen[0]:
            self._log(node, f"config={seen[0]}", t)
        if old is None or old[1] != seen[1]:
            self._log(node, f"state={seen[1]}", t)
        if old is not None and old[2] != seen[2]:
            self._log(node, "cordoned" if unschedulable else "uncordoned", t)
        self._seen[node] = seen
        return seen

    def _gone(self, node: str, now: float) -> None:
        """NODE's pod is deleted: its run in flight, if any, ends with it; a replacement comes restart_delay later."""
        if self._pods.get(node) is not None:
            self._log(node, "sim:deleted")
        self._pods[node] = None
        self._due.setdefault(node, now + self.restart_delay)

    def _replace(self, node: str) -> None:
        """A new pod: it mounts the ConfigMap as it is now and lists the node (AddFunc: the label it starts with)."""
        self._log(node, "sim:started")
        config = self._seen.get(node, (None,))[0]
        self._pods[node] = _Pod(dict(self._read_config()), config, None)

    def _step(self, node: str, pod: _Pod, now: float) -> None:
        run = pod.run
        if run is None:
            if pod.current and pod.current != pod.last_read:  # SyncableMigConfig.Get returns
                pod.last_read = pod.current
                pod.run = _Run(pod.current, now + self.pending_delay)
            return
        if run.due > now:
            return
        if run.phase == "validate":
            if run.config not in pod.mounted:
                self._log(node, f"sim:missing {run.config}")
                self._set_state(node, "failed")
                pod.run = None
            elif pod.mounted[run.config] == self.gpus.get(node):
                self._set_state(node, "success")
                pod.run = None
            else:
                self._set_state(node, "pending")
                pod.run = _Run(run.config, now + self.apply_delay, "apply")
            return
        if node in self.fail:
            self._set_state(node, "failed")
        else:
            self.gpus[node] = pod.mounted[run.config]
            self._set_state(node, "success")
        pod.run = None

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.now()
            config = self._read_config()
            if config != self._config:
                self._config, self._config_changed_at = config, now
            for node, name in list(self._gpus_named.items()):
                if name in config:
                    self.gpus[node] = config[name]
                    del self._gpus_named[node]
            template = self._read_template()
            if template is not None and template != self._template:
                self._template = template  # every pod not of this template is replaced, one node at a time
                self._roll = [n for n in reversed(self.nodes) if n not in self._due]
            with self._lock:
                requests, self._requests = self._requests, []
            for node in requests:
                self._log(node, "sim:restart")
                pod = self._live_pods().get(node) if self.pods else None
                if pod is not None:
                    self._delete_pod_object(pod)
                self._gone(node, now)
            if self.pods:
                for pod in self._deleting_pods():  # kubelet: the containers stopped, the object goes
                    self._delete_pod_object(pod)
                live = self._live_pods()
                for node in self.nodes:
                    if node not in live and node not in self._due:
                        self._gone(node, now)
            for node, due in list(self._due.items()):
                if now >= due:  # the DaemonSet controller's replacement runs
                    if not self._read_config():
                        # its container starts only once its volumes mount, the MIG ConfigMap's included (kubelet's
                        # volume manager, WaitForAttachAndMount; inferred): after a destroy, not before the up
                        # has created the ConfigMap again, so no start-up run ever reads a config that is not there
                        self._due[node] = now + self.restart_delay
                        continue
                    if self.pods and not self._create_pod(node):
                        self._due[node] = now + self.restart_delay
                        continue
                    del self._due[node]
                    self._replace(node)
            if self._roll and (self._rolling is None or self._rolling not in self._due):
                self._rolling = self._roll.pop(0)
                if self.pods:
                    pod = self._live_pods().get(self._rolling)
                    if pod is not None:
                        self._delete_pod_object(pod)
                self._gone(self._rolling, now)
            nodes = self._list()
            states, cordoned, busy = {}, set(), set()
            for node in self.nodes:
                seen = self._observe(node, nodes.get(node))
                pod = self._pods.get(node)
                if pod is not None:
                    if self.mount_lag is not None and now - self._config_changed_at >= self.mount_lag:
                        pod.mounted = dict(self._config)  # kubelet's sync refreshed the mounted file
                    if seen[0] != pod.current and seen[0]:  # UpdateFunc: a changed mig.config label only
                        pod.current = seen[0]
                    self._step(node, pod, now)
                    if pod.run is not None and pod.run.phase == "apply":
                        busy.add(node)
                states[node] = seen[1] or ""
                if seen[2]:
                    cordoned.add(node)
            self.samples.append(Sample(round(now, 2), states, frozenset(cordoned), frozenset(busy)))
            self._stop.wait(self.interval)
