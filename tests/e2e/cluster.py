"""A throw-away local Kubernetes control plane for end-to-end tests.

etcd + kube-apiserver + kube-controller-manager, all on 127.0.0.1 with random free ports, certificates
generated at start time with the ``openssl`` CLI, RBAC authorization, and an admin identity in group
``system:masters`` (client certificate in the kubeconfig, plus a bearer token for plain HTTP).
No kubelet, scheduler or network: pods are stored and admitted (quota, LimitRange) but never run.

No pytest import here: usable from scripts too::

    from tests.e2e.cluster import ControlPlane
    with ControlPlane(bin_dir) as cp:
        print(cp.kubeconfig)
        cp.kubectl("get", "ns")
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")

# Admission plugins enabled on top of the defaults. ServiceAccount is disabled (see DISABLED_ADMISSION):
# it rejects pods until the serviceaccount controller created "default" in a fresh namespace, a race
# that only adds flakiness for tests that merely store pods.
ADMISSION_PLUGINS = ("NamespaceLifecycle", "LimitRanger", "Priority", "ResourceQuota")
DISABLED_ADMISSION = ("ServiceAccount",)
# Controllers: namespace deletion/finalisation, quota status, default service accounts, GC of
# dependents (ownerReferences), aggregated ClusterRoles.
CONTROLLERS = (
    "namespace-controller",
    "resourcequota-controller",
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
    "garbage-collector-controller",
)


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: Sequence[str], cwd: Path | None = None, timeout: float = 60) -> None:
    p = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise ControlPlaneError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")


class _PKI:
    """A CA plus server/client certificates made with the openssl CLI."""

    def __init__(self, directory: Path):
        if not shutil.which("openssl"):
            raise ControlPlaneError("the 'openssl' CLI is needed to generate test certificates")
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_crt, self.ca_key = self.dir / "ca.crt", self.dir / "ca.key"
        _run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=gpupool-e2e-ca",
                "-keyout",
                str(self.ca_key),
                "-out",
                str(self.ca_crt),
            ]
        )

    def issue(self, name: str, cn: str, orgs: Iterable[str] = (), server: bool = False) -> tuple[Path, Path]:
        key, csr, crt, ext = (self.dir / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
        subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
        _run(
            [
                "openssl",
                "req",
                "-new",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                subj,
                "-keyout",
                str(key),
                "-out",
                str(csr),
            ]
        )
        lines = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
        if server:
            lines += [
                "extendedKeyUsage=serverAuth",
                "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default",
            ]
        else:
            lines += ["extendedKeyUsage=clientAuth"]
        ext.write_text("\n".join(lines) + "\n")
        _run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(self.ca_crt),
                "-CAkey",
                str(self.ca_key),
                "-CAcreateserial",
                "-days",
                "2",
                "-sha256",
                "-extfile",
                str(ext),
                "-out",
                str(crt),
            ]
        )
        return crt, key


class ControlPlane:
    """Start with :meth:`start` (or ``with``), stop with :meth:`stop`. Attributes after start:
    ``kubeconfig`` (admin), ``server`` (https URL), ``token`` (admin bearer token), ``ca_file``,
    ``workdir``, ``bin_dir``, ``log_dir``."""

    def __init__(
        self,
        bin_dir: str | os.PathLike,
        *,
        kubectl: str | None = None,
        workdir: str | os.PathLike | None = None,
        keep_workdir: bool = False,
        start_timeout: float = 120.0,
        extra_apiserver_args: Sequence[str] = (),
        extra_controllers: Sequence[str] = (),
    ):
        self.bin_dir = Path(bin_dir)
        for b in BINARIES:
            if not os.access(self.bin_dir / b, os.X_OK):
                raise ControlPlaneError(f"missing binary {self.bin_dir / b}")
        self.kubectl_bin = kubectl or _find_kubectl()
        self._workdir_arg = workdir
        self.keep_workdir = keep_workdir
        self.start_timeout = start_timeout
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.controllers = CONTROLLERS + tuple(extra_controllers)  # e.g. job-controller, for Jobs' pods
        self._procs: dict[str, subprocess.Popen] = {}
        self._argv: dict[str, list[str]] = {}
        self._probes: dict[str, Any] = {}
        self._logs: dict[str, Any] = {}
        self.workdir: Path | None = None
        self.kubeconfig: Path | None = None
        self.server = ""
        self.token = ""
        self.ca_file: Path | None = None
        self._ssl: ssl.SSLContext | None = None
        self._atexit_registered = False
        # Set on the session-wide control plane the e2e modules share: restarting it would break the others.
        self.shared = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, attempts: int = 3) -> ControlPlane:
        """Start etcd, kube-apiserver, kube-controller-manager; retried if a picked port got taken."""
        for attempt in range(1, attempts + 1):
            try:
                self._start()
                return self
            except ControlPlaneError as e:
                self.stop()
                if attempt == attempts or "address already in use" not in str(e):
                    raise
            except BaseException:
                self.stop()
                raise
        return self

    def _start(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        if self._workdir_arg:
            self.workdir = Path(self._workdir_arg)
            self.workdir.mkdir(parents=True, exist_ok=True)
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="gpupool-e2e-"))
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        pki = _PKI(self.workdir / "pki")
        self.ca_file = pki.ca_crt
        self._pki = pki
        srv_crt, srv_key = pki.issue("apiserver", "kube-apiserver", server=True)
        adm_crt, adm_key = pki.issue("admin", "gpupool-e2e-admin", ["system:masters"])
        kcm_crt, kcm_key = pki.issue("kcm", "system:kube-controller-manager", ["system:masters"])
        sa_key, sa_pub = self.workdir / "pki/sa.key", self.workdir / "pki/sa.pub"
        _run(["openssl", "genrsa", "-out", str(sa_key), "2048"])
        _run(["openssl", "rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub)])
        self.token = os.urandom(16).hex()
        tokens = self.workdir / "pki/tokens.csv"
        tokens.write_text(f'{self.token},gpupool-e2e-admin-token,uid-admin,"system:masters"\n')
        tokens.chmod(0o600)

        # etcd
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._probes["etcd"] = lambda: self._http_ok(f"{etcd_url}/health", tls=False)
        self._wait("etcd", self._probes["etcd"], deadline)

        # kube-apiserver
        api_port = free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={srv_crt}",
                f"--tls-private-key-file={srv_key}",
                f"--client-ca-file={pki.ca_crt}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--anonymous-auth=true",
                # As kubeadm runs it (v1.36.3 cmd/kubeadm/app/phases/controlplane/manifests.go 200); the default
                # (false) refuses privileged containers, which the GPU stack's DaemonSets have (the DRA driver's
                # kubelet plugin: tests/e2e/test_dra_driver.py).
                "--allow-privileged=true",
                f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
                f"--disable-admission-plugins={','.join(DISABLED_ADMISSION)}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--profiling=false",
                "--v=1",
                *self.extra_apiserver_args,
            ],
        )
        self._ssl = ssl.create_default_context(cafile=str(pki.ca_crt))
        self._probes["kube-apiserver"] = lambda: self._http_ok(f"{self.server}/readyz")
        self._wait("kube-apiserver", self._probes["kube-apiserver"], deadline)

        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self._write_kubeconfig(self.kubeconfig, "gpupool-e2e-admin", adm_crt, adm_key)
        kcm_kubeconfig = self.workdir / "kcm.kubeconfig"
        self._write_kubeconfig(kcm_kubeconfig, "kube-controller-manager", kcm_crt, kcm_key)

        # kube-controller-manager
        kcm_port = free_port()
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kcm_kubeconfig}",
                f"--authentication-kubeconfig={kcm_kubeconfig}",
                f"--authorization-kubeconfig={kcm_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                f"--controllers={','.join(self.controllers)}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--resource-quota-sync-period=15s",
                "--concurrent-resource-quota-syncs=2",
                "--v=1",
            ],
        )
        self._probes["kube-controller-manager"] = lambda: self._http_ok(
            f"https://127.0.0.1:{kcm_port}/healthz", verify=False
        )
        self._wait("kube-controller-manager", self._probes["kube-controller-manager"], deadline)

    def start_scheduler(self, timeout: float = 60) -> None:
        """Start kube-scheduler (the toolchain's, same version as the API server) with its default profile, as
        `system:kube-scheduler` with no other group: it acts with exactly the bootstrap ClusterRoles a real
        scheduler has (`system:kube-scheduler`, `system:volume-scheduler`), so an admission policy or RBAC rule
        that would stop a real scheduler stops this one. Not started with the plane: a scheduler binds every
        pending pod, which the modules sharing a plane do not expect."""
        assert self.workdir is not None, "control plane not started"
        binary = self.bin_dir / "kube-scheduler"
        if not os.access(binary, os.X_OK):
            raise ControlPlaneError(f"missing binary {binary} (toolchain/build.sh kube-scheduler)")
        crt, key = self._pki.issue("scheduler", "system:kube-scheduler")
        kubeconfig = self.workdir / "scheduler.kubeconfig"
        self._write_kubeconfig(kubeconfig, "system:kube-scheduler", crt, key)
        port = free_port()
        self._spawn(
            "kube-scheduler",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--v=2",
            ],
        )
        self._probes["kube-scheduler"] = lambda: self._http_ok(f"https://127.0.0.1:{port}/healthz", verify=False)
        self._wait("kube-scheduler", self._probes["kube-scheduler"], time.monotonic() + timeout)

    def stop(self) -> None:
        """Stop in reverse start order (kcm, apiserver, etcd: the apiserver shuts down fast only while etcd
        is still up), each process group with TERM then KILL after 10 s; remove the workdir."""
        for _name, proc in reversed(list(self._procs.items())):
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                if proc.poll() is not None:
                    break
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue
        self._procs.clear()
        for f in self._logs.values():
            f.close()
        self._logs.clear()
        if self.workdir and not self.keep_workdir and not self._workdir_arg:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None if not self.keep_workdir else self.workdir

    def restart(self, name: str = "kube-apiserver", *, down_seconds: float = 0, timeout: float = 120) -> None:
        """Stop one process (SIGKILL: a crash, not a graceful shutdown) and start it again with the same
        arguments, ports and data; returns once it is ready again."""
        if self.shared:
            raise ControlPlaneError("the shared control plane is not restarted; use private_control_plane")
        proc = self._procs[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        self._logs.pop(name).close()
        time.sleep(down_seconds)
        self._spawn(name, self._argv[name])
        self._wait(name, self._probes[name], time.monotonic() + timeout)

    # ------------------------------------------------------------------ process helpers
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")
        self._logs[name] = log
        self._argv[name] = argv
        self._procs[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            start_new_session=True,
        )

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join((self.log_dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _wait(self, name: str, probe, deadline: float) -> None:
        while True:
            proc = self._procs[name]
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            if probe():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{name} not ready in time:\n{self.log_tail(name)}")
            time.sleep(0.25)

    def _http_ok(self, url: str, tls: bool = True, verify: bool = True) -> bool:
        req = urllib.request.Request(url)
        ctx = None
        if tls:
            if verify:
                ctx = self._ssl
                req.add_header("Authorization", f"Bearer {self.token}")
            else:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(req, timeout=3, context=ctx) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def _write_kubeconfig(
        self, path: Path, user: str, crt: Path | None = None, key: Path | None = None, token: str | None = None
    ) -> None:
        creds: dict[str, str] = {}
        if crt and key:
            creds = {"client-certificate": str(crt), "client-key": str(key)}
        if token:
            creds["token"] = token
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {"name": "gpupool-e2e", "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": user, "user": creds}],
            "contexts": [{"name": f"{user}@gpupool-e2e", "context": {"cluster": "gpupool-e2e", "user": user}}],
            "current-context": f"{user}@gpupool-e2e",
        }
        path.write_text(json.dumps(cfg, indent=2))  # JSON is valid YAML
        path.chmod(0o600)

    # ------------------------------------------------------------------ identities
    def user_kubeconfig(self, user: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig authenticating as ``user`` (client certificate, O=groups): a real, non-impersonated
        identity for RBAC tests. Without RBAC bindings it can do almost nothing."""
        assert self.workdir is not None, "control plane not started"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        crt, key = self._pki.issue(f"user-{safe}", user, list(groups))
        path = self.workdir / f"user-{safe}.kubeconfig"
        self._write_kubeconfig(path, user, crt, key)
        return path

    # ------------------------------------------------------------------ clients
    def kubectl(
        self,
        *args: str,
        as_user: str | None = None,
        as_groups: Iterable[str] = (),
        kubeconfig: str | os.PathLike | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess:
        """Run kubectl against this control plane (admin unless ``as_user``/``as_groups`` impersonate or
        ``kubeconfig`` points elsewhere). Returns the CompletedProcess (text); raises on failure if check."""
        argv = [self.kubectl_bin, f"--kubeconfig={kubeconfig or self.kubeconfig}", f"--request-timeout={int(timeout)}s"]
        if as_user:
            argv.append(f"--as={as_user}")
        argv += [f"--as-group={g}" for g in as_groups]
        argv += list(args)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout + 15, env=env)
        if check and p.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        return p

    def as_user(self, user: str, groups: Iterable[str] = ()):
        """A kubectl-like callable acting as ``user``/``groups`` via impersonation."""
        groups = list(groups)
        return lambda *args, **kw: self.kubectl(*args, as_user=user, as_groups=groups, **kw)

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        as_user: str | None = None,
        as_groups: Iterable[str] = (),
        params: Mapping[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """Plain HTTP call with the admin token (optionally impersonating). Returns (status, parsed JSON);
        does not raise on HTTP errors (the Status object is returned instead)."""
        url = self.server + path + (("?" + urllib.parse.urlencode(params)) if params else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if as_user:
            req.add_header("Impersonate-User", as_user)
        for g in as_groups:
            req.add_header("Impersonate-Group", g)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def apply(
        self, manifest: str | Mapping | Sequence[Mapping], namespace: str | None = None, check: bool = True, **kw
    ) -> subprocess.CompletedProcess:
        """``kubectl apply -f -`` (server-side validation)."""
        text = (
            manifest
            if isinstance(manifest, str)
            else json.dumps(
                manifest
                if isinstance(manifest, Mapping)
                else {"apiVersion": "v1", "kind": "List", "items": list(manifest)}
            )
        )
        args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
        return self.kubectl(*args, input=text, check=check, **kw)

    def get_json(self, *args: str, **kw) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json", **kw).stdout)

    def wait_for(self, predicate, timeout: float = 60, interval: float = 0.5, what: str = "condition"):
        """Poll ``predicate()`` until it returns a truthy value (returned) or time out (ControlPlaneError)."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(interval)

    # ------------------------------------------------------------------ simulated nodes
    def create_gpu_node(
        self,
        name: str,
        resources: Mapping[str, str | int] | None = None,
        labels: Mapping[str, str] | None = None,
        *,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: str = "110",
        ready: bool = True,
    ) -> dict:
        """Create a Node object (no kubelet behind it) and set ``status.capacity``/``status.allocatable``
        to cpu/memory/pods plus the given extended resources (e.g. ``{"nvidia.com/gpu": "8"}``) through
        the ``nodes/status`` subresource. Returns the node as stored."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **dict(labels or {})}},
        }
        status, obj = self.api("POST", "/api/v1/nodes", node)
        if status not in (200, 201):
            raise ControlPlaneError(f"creating node {name}: HTTP {status}: {obj}")
        self.set_node_resources(name, resources or {}, cpu=cpu, memory=memory, pods=pods, ready=ready)
        status, obj = self.api("GET", f"/api/v1/nodes/{name}")
        return obj

    def make_schedulable(self, *names: str) -> None:
        """Take `node.kubernetes.io/not-ready:NoSchedule` off NAMES. The TaintNodesByCondition admission plugin puts
        it on every new Node and only the node-lifecycle controller takes it off (v1.36.3 plugin/pkg/admission/
        nodetaint/admission.go 63-95); that controller is not run (no kubelet heartbeats here), so a test that
        schedules pods does this itself."""
        for name in names:
            self.kubectl("taint", "nodes", name, "node.kubernetes.io/not-ready:NoSchedule-")

    def quota_synced(self, namespace: str, name: str = "gpu-quota") -> bool:
        """Whether the quota controller has written the quota's status.hard: until then the ResourceQuota admission
        plugin refuses what the quota covers ("status unknown for quota")."""
        status, q = self.api("GET", f"/api/v1/namespaces/{namespace}/resourcequotas/{name}")
        return status == 200 and bool(q.get("status", {}).get("hard"))

    def set_node_resources(
        self,
        name: str,
        resources: Mapping[str, str | int],
        *,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: str = "110",
        ready: bool = True,
    ) -> dict:
        res = {"cpu": cpu, "memory": memory, "pods": pods, **{k: str(v) for k, v in resources.items()}}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        patch = {
            "status": {
                "capacity": res,
                "allocatable": res,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "GpupoolE2E",
                        "message": "simulated node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        }
        status, obj = self.api(
            "PATCH", f"/api/v1/nodes/{name}/status", patch, content_type="application/merge-patch+json"
        )
        if status != 200:
            raise ControlPlaneError(f"patching node {name}/status: HTTP {status}: {obj}")
        return obj


def _find_kubectl() -> str:
    import sys

    cand = Path(sys.executable).parent / "kubectl"
    if os.access(cand, os.X_OK):
        return str(cand)
    found = shutil.which("kubectl")
    if found:
        return found
    return "kubectl"  # resolved (and failing clearly) at first use
