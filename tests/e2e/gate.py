"""Faults triggered by the event they target: an admission webhook in the test process that the API server
calls on every matching write, before the write reaches storage.

A fault test arms the gate with the request it waits for (say the 8th LimitRange update, or the first
RoleBinding deletion in a namespace) and starts its run. When that request arrives, the gate holds it (the
API server waits for the webhook's answer, so the provider waits for the API server), and the test's
thread gets it from :meth:`Gate.wait`. The test then freezes the run's process group (SIGSTOP), checks that
the run is where the test says (for example that ``pulumi up`` of the right stack is the one running; if
not, :meth:`Gate.resume` lets it go on and the test waits for the next such request), decides whether the
held request lands, and kills the group (SIGKILL). Every matching request after the trigger is held and
refused once the run is dead, so nothing the dead run sent after the fault point lands: the fault point is
exact however fast or slow the machine is.

Faithful to the world users run: the API server, the provider and the engine are the real ones; the
webhook answers "allowed" to every request but the held ones, and a refused request is one the dead client
never saw answered (the same as a request it had not sent). Admission webhooks are called for CREATE,
UPDATE and DELETE, server-side apply included: an apply that creates the object is admitted as CREATE,
one that changes it as UPDATE (k8s.io/apiserver pkg/endpoints/handlers/patch.go, ``p.admissionCheck`` /
``createOrUpdate``). ``failurePolicy: Ignore``: a request the gate does not answer in time is let through,
as without the gate.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .cluster import ControlPlane

NAME = "gpupool-e2e-fault-gate"
PROBE = "gpupool-e2e-gate-probe"


@dataclass(eq=False)
class Held:
    """A request the gate holds: ``op`` (CREATE/UPDATE/DELETE), ``resource``, ``namespace``, ``name``."""

    op: str
    resource: str
    namespace: str
    name: str
    dry_run: bool = False
    _answer: threading.Event = field(default_factory=threading.Event, repr=False)
    _allowed: bool = False

    def answer(self, allowed: bool) -> None:
        self._allowed = allowed
        self._answer.set()

    def __str__(self) -> str:
        return f"{self.op} {self.resource} {self.namespace + '/' if self.namespace else ''}{self.name}"


Match = Callable[[Held], bool]


class Gate:
    """``with Gate(cluster, ["limitranges"]) as gate:`` installs the webhook for those resources (plural,
    any group) and removes it on exit."""

    def __init__(self, cluster: ControlPlane, resources: Iterable[str]):
        self.cluster = cluster
        self.resources = sorted(set(resources))
        self._lock = threading.Condition()
        self._match: Match | None = None
        self._skip = 0  # matching requests still to let through before the trigger
        # open: no matching; counting: let _skip through, then hold; holding: hold every matching request;
        # refusing: the run is dead, refuse every matching request
        self._mode = "open"
        self._held: list[Held] = []
        self.seen = 0  # matching requests seen since arm()
        self._server: ThreadingHTTPServer | None = None
        self._probed = threading.Event()

    # ---------------------------------------------------------------- the test's side
    def arm(self, match: Match, after: int = 0) -> None:
        """Hold the matching request that comes after AFTER matching ones were let through, and every
        matching request from then on."""
        with self._lock:
            self._match, self._skip, self._mode, self.seen = match, after, "counting", 0
            self._held = []

    def wait(self, timeout: float, proc=None) -> Held | None:
        """The triggering request once it is held; None if PROC ended first or TIMEOUT passed."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._held:
                if proc is not None and proc.poll() is not None:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(min(left, 0.2))
            return self._held[0]

    def resume(self, after: int = 0) -> None:
        """Not the point: let every held request through and hold the next matching one after AFTER more."""
        with self._lock:
            held, self._held, self._mode, self._skip = self._held, [], "counting", after
        for h in held:
            h.answer(True)

    def land(self, h: Held) -> None:
        """Let one held request through (the others stay held)."""
        with self._lock:
            self._held.remove(h)
        h.answer(True)

    def refuse(self) -> None:
        """The run is dead: refuse every held request and every matching one until :meth:`open`."""
        with self._lock:
            held, self._held, self._mode = self._held, [], "refusing"
        for h in held:
            h.answer(False)

    def open(self) -> None:
        """Let everything through (held requests too) and stop matching."""
        with self._lock:
            held, self._held, self._match, self._mode = self._held, [], None, "open"
        for h in held:
            h.answer(True)

    # ---------------------------------------------------------------- the API server's side
    def _decide(self, h: Held) -> bool:
        if h.name == PROBE:
            self._probed.set()
            return True
        if h.dry_run:  # the provider's diffs and `pulumi preview` apply with dryRun=All: not a step
            return True
        with self._lock:
            if self._match is None or not self._match(h):
                return True
            self.seen += 1
            if self._mode == "refusing":
                return False
            if self._mode == "counting" and self._skip > 0:
                self._skip -= 1
                return True
            self._mode = "holding"
            self._held.append(h)
            self._lock.notify_all()
        h._answer.wait(60)  # the API server gives up after timeoutSeconds (30) and lets it through
        return h._allowed

    def _handler(self):
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                req = review["request"]
                held = Held(
                    req["operation"],
                    req["resource"]["resource"],
                    req.get("namespace") or "",
                    req.get("name") or "",
                    bool(req.get("dryRun")),
                )
                allowed = gate._decide(held)
                response: dict[str, Any] = {"uid": req["uid"], "allowed": allowed}
                if not allowed:
                    response["status"] = {"code": 503, "message": "e2e fault gate: the client was killed here"}
                body = json.dumps(
                    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
                )
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body.encode())
                except OSError:
                    pass  # the API server went away (a crash-restart test)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> Gate:
        crt, key = self.cluster._pki.issue("fault-gate", "127.0.0.1", server=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        assert self.cluster.ca_file is not None
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": [
                {
                    "name": "fault-gate.e2e.gpupool.dev",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate",
                        "caBundle": base64.b64encode(self.cluster.ca_file.read_bytes()).decode(),
                    },
                    "rules": [
                        {
                            "operations": ["CREATE", "UPDATE", "DELETE"],
                            "apiGroups": ["*"],
                            "apiVersions": ["*"],
                            "resources": self.resources,
                            "scope": "*",
                        }
                    ],
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 30,
                }
            ],
        }
        self.cluster.apply(config)
        self._wait_active()
        return self

    def _wait_active(self, timeout: float = 60) -> None:
        """The API server loads webhook configurations asynchronously: write probes until one reaches us."""
        resource = self.resources[0]
        deadline = time.monotonic() + timeout
        while not self._probed.is_set():
            if time.monotonic() > deadline:
                raise AssertionError(f"the fault gate's webhook was never called for {resource}")
            # A dry-run create is admitted (webhooks with sideEffects None are called) and stores nothing.
            self.cluster.api("POST", _collection(resource), _probe_object(resource, PROBE), params={"dryRun": "All"})
            self._probed.wait(0.5)

    def __exit__(self, *exc) -> None:
        self.open()
        self.cluster.kubectl("delete", "validatingwebhookconfiguration", NAME, "--ignore-not-found", check=False)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


_PATHS = {
    "namespaces": ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace"}),
    "limitranges": ("/api/v1/namespaces/default/limitranges", {"apiVersion": "v1", "kind": "LimitRange"}),
    "rolebindings": (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "probe"}],
        },
    ),
}


def _collection(resource: str) -> str:
    return _PATHS[resource][0]


def _probe_object(resource: str, name: str) -> dict:
    obj = dict(_PATHS[resource][1])
    obj["metadata"] = {"name": name}
    if resource == "limitranges":
        obj["spec"] = {"limits": [{"type": "Container", "default": {"memory": "1Mi"}}]}
    return obj


# ---------------------------------------------------------------- the run's process group


def freeze(pgid: int) -> None:
    """SIGSTOP the run's whole process group (gpupool, pulumi, language host, provider)."""
    os.killpg(pgid, signal.SIGSTOP)


def thaw(pgid: int) -> None:
    os.killpg(pgid, signal.SIGCONT)


def kill(proc) -> None:
    """SIGKILL the run's process group (a cancelled CI job) and reap gpupool."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
