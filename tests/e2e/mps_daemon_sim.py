"""A stand-in for one node's MPS control daemon pod: its config-manager sidecar and the daemon it signals.

The real pod cannot run here (it needs NVML). Both parts behave as their source does, k8s-device-plugin
v0.20.0 (commit 1b826acc6af3) and the pod as the GPU Operator v26.7.0 builds it:

- The pod (gpu-operator assets/state-mps-control-daemon/0400_daemonset.yaml): the sidecar watches the node
  label `nvidia.com/device-plugin.config`, picks `/available-configs/<label>` (the device-plugin ConfigMap,
  mounted, so seen as kubelet last synced it) and signals `/usr/bin/mps-control-daemon` with SIGHUP (SIGNAL=1).
  The operator gives the daemon container neither the device plugin's env nor a restart on a ConfigMap change
  (controllers/object_controls.go, TransformMPSControlDaemon, lines 1632-1703).
- config-manager (cmd/config-manager/main.go): at start the informer's Add sets the label's value (lines
  270-272); afterwards only an Update whose label *value differs* does (lines 273-279): a new ConfigMap
  content under the same key reaches nobody. updateConfig (lines 296-333): a label naming a key the mounted
  directory lacks is an error, "specified config %v does not exist" (lines 351-357), which ends `start`
  (lines 246-255) and the process (lines 207-210): kubelet restarts the container after a back-off. A
  symlink already resolving to the same file is left alone, with no signal (updateSymlink, lines 395-420);
  otherwise the link is replaced and the signal sent.
- mps-control-daemon (cmd/mps-control-daemon/main.go): loads its config at start and on every SIGHUP
  (lines 108-162, `goto restart` -> startDaemons -> loadConfig, lines 164-171), and at no other time.

The label and the ConfigMap come from callables, so the same code runs against the real API server (the e2e
test) or against plain values (tests/test_mps_reload.py). Waits are bounded and end as soon as the condition
holds; the mount lag and the back-off are seconds, scaled down from kubelet's (about a minute's sync, a 10 s
back-off doubling), which changes the timing and not the order of events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

LABEL = "nvidia.com/device-plugin.config"


class MountedConfigMap:
    """The ConfigMap as a pod's volume shows it: a change becomes visible LAG seconds after a read first found
    it (kubelet's periodic sync; its real lag is about a minute, so a label written right after the ConfigMap
    arrives first), as a new generation (the `..<timestamp>` directory the key links resolve to)."""

    def __init__(self, read: Callable[[], dict[str, str]], lag: float) -> None:
        self._read, self._lag = read, lag
        self._shown: dict[str, str] = dict(read())
        self.generation = 0
        self._pending: tuple[dict[str, str], float] | None = None

    def synced(self) -> int:
        """The generation shown now (a read, as kubelet's sync would make one)."""
        self.files()
        return self.generation

    def files(self) -> dict[str, str]:
        latest = dict(self._read())
        if latest != self._shown:
            if self._pending is None or self._pending[0] != latest:
                self._pending = (latest, time.monotonic())
            elif time.monotonic() - self._pending[1] >= self._lag:
                self._shown, self._pending = latest, None
                self.generation += 1
        return dict(self._shown)


@dataclass
class MpsDaemon:
    """What the daemon runs with: the replicas of the config it last loaded (None: no file, no sharing)."""

    config_file: Callable[[], str | None]
    replicas: int | None = None
    starts: int = 0

    def start(self) -> None:  # main.go start/restart: startDaemons -> loadConfig of CONFIG_FILE
        self.starts += 1
        text = self.config_file()
        doc = yaml.safe_load(text) if text else None
        resources = (((doc or {}).get("sharing") or {}).get("mps") or {}).get("resources") or []
        self.replicas = resources[0]["replicas"] if resources else None

    def sighup(self) -> None:
        self.start()


@dataclass
class MpsPod:
    """config-manager + daemon of one node; run() in a thread until stop()."""

    node_label: Callable[[], str | None]
    mounted: MountedConfigMap
    backoff: float = 1.0
    link: tuple[str, int] | None = None  # /config/config.yaml -> (key, mount generation): an emptyDir, kept
    crashes: int = 0
    signals: int = 0
    log: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.daemon = MpsDaemon(self._config_file)

    def _config_file(self) -> str | None:
        if self.link is None:
            return None
        return self.mounted.files().get(self.link[0])

    def _update_config(self, label: str) -> None:
        files = self.mounted.files()
        if label and label not in files:  # updateConfigName: lines 351-357
            raise FileNotFoundError(f"specified config {label} does not exist")
        target = (label, self.mounted.generation) if label else None  # "" -> /dev/null (lines 396-399)
        if target == self.link:  # updateSymlink: realpaths equal, lines 416-418
            self.log.append("Already configured. Skipping update...")
            return
        self.link = target
        self.signals += 1  # lines 323-330: SIGHUP to /usr/bin/mps-control-daemon
        self.daemon.sighup()

    def run(self) -> None:
        # config-manager-init (ONESHOT, SEND_SIGNAL=false in the DaemonSet) links the labelled key before the
        # daemon container starts; a key it cannot find keeps the pod in Init, which this stand-in refuses.
        label = self.node_label() or ""
        if label and label not in self.mounted.files():
            raise AssertionError(f"config-manager-init: specified config {label} does not exist")
        self.link = (label, self.mounted.generation) if label else None
        self.daemon.start()
        while not self._stop.is_set():
            try:
                seen = self.node_label() or ""  # informer Add at (re)start: lines 270-272
                self._update_config(seen)
                while not self._stop.wait(0.1):
                    now = self.node_label() or ""
                    if now != seen:  # Update, only on a changed value: lines 273-279
                        seen = now
                        self._update_config(seen)
            except FileNotFoundError as exc:  # start returns the error; main exits 1 (lines 207-210, 250-252)
                self.crashes += 1
                self.log.append(f"config-manager exited: {exc}")
                self._stop.wait(self.backoff * 2 ** min(self.crashes - 1, 4))  # kubelet's restart back-off

    def start(self) -> MpsPod:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the pod's loop: a read still under way when the test then deletes the node would
        raise in the thread (seen once as a PytestUnhandledThreadExceptionWarning)."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(timeout=30)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll until PREDICATE holds (returned) or fail after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
