"""A stand-in for NVIDIA's MIG Manager on a kubelet-less control plane, plus a recorder of what nodes went through.

Like the real one (NVIDIA/mig-parted `cmd/nvidia-mig-manager`): it reacts to a *change* of a node's
`nvidia.com/mig.config` label (never to the state label alone), then writes `nvidia.com/mig.config.state`
with a JSON merge patch: `pending` after `pending_delay`, then `success` (or `failed` for the nodes in
`fail`) after `apply_delay`. `restart(node)` re-applies the node's current label, as a restarted MIG Manager
pod does at start-up. A slow simulator (large `pending_delay`) is how the stale-success race is provoked.

The same thread samples every node (labels, unschedulable) every `interval` seconds and keeps a timeline of
changes, so tests can assert on what happened when: how many nodes were pending or cordoned at once, and in
which order nodes finished. No pytest import: usable from scripts too.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

MIG_CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


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


@dataclass
class MigManagerSim:
    cp: object  # tests.e2e.cluster.ControlPlane
    nodes: tuple[str, ...]
    pending_delay: float = 0.5
    apply_delay: float = 2.0
    fail: set[str] = field(default_factory=set)
    interval: float = 0.1

    def __post_init__(self):
        self.events: list[Event] = []
        self.samples: list[Sample] = []
        self._seen: dict[str, tuple] = {}
        self._last_config: dict[str, str | None] = {}
        self._jobs: list[tuple[float, str, str, str]] = []  # (due, node, state, for config)
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
        for node in self.nodes:  # what is already there is not a change (MIG Manager applied it long ago)
            # The initial sample, logged before start() returns: `timeline(now())` holds only what came after.
            self._last_config[node] = self._observe(node)[0]
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def restart(self, node: str) -> None:
        """What a restarted MIG Manager pod does: apply the node's current config again."""
        config = self._node(node)[0].get(MIG_CONFIG)
        self._log(node, "sim:restart")
        self._schedule(node, config)

    # -- queries ---------------------------------------------------------------------------------
    def max_at_once(self, state: str = "pending") -> int:
        return max((sum(1 for s in x.states.values() if s == state) for x in self.samples), default=0)

    def max_cordoned(self) -> int:
        return max((len(x.cordoned) for x in self.samples), default=0)

    def first(self, node: str, what: str, after: float = 0.0) -> float | None:
        return next((e.t for e in self.events if e.node == node and e.what == what and e.t >= after), None)

    def timeline(self, since: float = 0.0) -> list[Event]:
        return [e for e in self.events if e.t >= since]

    # -- the loop --------------------------------------------------------------------------------
    def _node(self, name: str) -> tuple[dict, bool]:
        status, obj = self.cp.api("GET", f"/api/v1/nodes/{name}")
        if status != 200:
            return {}, False
        return obj["metadata"].get("labels", {}), bool(obj.get("spec", {}).get("unschedulable"))

    def _log(self, node: str, what: str, t: float | None = None) -> None:
        with self._lock:
            self.events.append(Event(self.now() if t is None else t, node, what))

    def _schedule(self, node: str, config: str | None) -> None:
        now = self.now()
        final = "failed" if node in self.fail else "success"
        with self._lock:
            self._jobs = [j for j in self._jobs if j[1] != node]  # a newer config supersedes an in-flight one
            self._jobs.append((now + self.pending_delay, node, "pending", config))
            self._jobs.append((now + self.pending_delay + self.apply_delay, node, final, config))

    def _set_state(self, node: str, state: str) -> None:
        self.cp.api(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"metadata": {"labels": {STATE: state}}},
            content_type="application/merge-patch+json",
        )

    def _observe(self, node: str) -> tuple[str | None, str | None, bool]:
        """Read the node and log what changed since the last read: (config, state, unschedulable)."""
        labels, unschedulable = self._node(node)
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

    def _run(self) -> None:
        while not self._stop.is_set():
            states, cordoned = {}, set()
            for node in self.nodes:
                seen = self._observe(node)
                if seen[0] != self._last_config.get(node):
                    self._last_config[node] = seen[0]
                    if seen[0]:
                        self._schedule(node, seen[0])
                states[node] = seen[1] or ""
                if seen[2]:
                    cordoned.add(node)
            self.samples.append(Sample(round(self.now(), 2), states, frozenset(cordoned)))
            now = self.now()
            with self._lock:
                due = [j for j in self._jobs if j[0] <= now]
                self._jobs = [j for j in self._jobs if j[0] > now]
            for _, node, state, _config in sorted(due):
                self._set_state(node, state)
            self._stop.wait(self.interval)
