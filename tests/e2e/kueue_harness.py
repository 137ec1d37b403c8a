"""Kueue's manager and JobSet's controller against a local control plane, with their admission webhooks on.

The API server reaches each webhook server at https://127.0.0.1:PORT through a `url` clientConfig (it cannot
resolve the release's Service names), with certificates this harness issues from the control plane's own CA
(openssl, tests/e2e/cluster.py). The webhook configurations are the releases' (kueue v0.19.2
config/components/webhook/manifests.yaml and the namespaceSelector its kustomization adds; jobset v0.12.0
config/components/webhook/manifests.yaml), restricted to the kinds gpupool's Kueue configuration enables.
Certificates: one CA and one server certificate (SANs 127.0.0.1 and Kueue's Service name), made with openssl.
Kueue's manager cannot run without its internal cert management (without it, it insists on metrics
certificates at the fixed path /etc/kueue/metrics/certs, cmd/kueue/main.go:216-229), so its Secret is created
already holding them: its cert rotator keeps a CA and certificate that are valid for its names beyond its
90-day lookahead (open-policy-agent/cert-controller v0.16.0 pkg/rotator/rotator.go:325-356, 628-646), and only
injects that CA into the webhook configurations and the CRDs' conversion webhooks (pkg/util/cert/cert.go:85-125).
JobSet's manager runs with its internal cert management off, the same certificate in its cert dir.

Each manager runs as a service-account identity (a client certificate whose user name is
`system:serviceaccount:<ns>:<name>`, bound to cluster-admin), as in a cluster, not as `system:masters`: the
queue policy's "controller" test (gpupool.k8s.kueue_policy) is then exercised the way it is in production.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import urllib.request
from pathlib import Path

import yaml

from gpupool.k8s import kueue, manifests
from tests.e2e.cluster import ControlPlane, ControlPlaneError, free_port

KUEUE_NS, JOBSET_NS = "kueue-system", "jobset-system"
KUEUE_USER = f"system:serviceaccount:{KUEUE_NS}:kueue-controller-manager"
JOBSET_USER = f"system:serviceaccount:{JOBSET_NS}:jobset-controller-manager"

# (name, path, API group, version, resources, operations) of the releases' webhooks, for the kinds enabled.
_KUEUE_MUTATING = (
    ("mjob.kb.io", "/mutate-batch-v1-job", "batch", "v1", ["jobs"], ["CREATE"]),
    ("mpod.kb.io", "/mutate--v1-pod", "", "v1", ["pods"], ["CREATE"]),
    ("mdeployment.kb.io", "/mutate-apps-v1-deployment", "apps", "v1", ["deployments"], ["CREATE", "UPDATE"]),
    ("mstatefulset.kb.io", "/mutate-apps-v1-statefulset", "apps", "v1", ["statefulsets"], ["CREATE", "UPDATE"]),
    (
        "mjobset.kb.io",
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "jobset.x-k8s.io",
        "v1alpha2",
        ["jobsets"],
        ["CREATE"],
    ),
    (
        "mclusterqueue.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "kueue.x-k8s.io",
        "v1beta2",
        ["clusterqueues"],
        ["CREATE"],
    ),
    (
        "mresourceflavor.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        "kueue.x-k8s.io",
        "v1beta2",
        ["resourceflavors"],
        ["CREATE"],
    ),
    (
        "mworkload.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        "kueue.x-k8s.io",
        "v1beta2",
        ["workloads"],
        ["CREATE"],
    ),
)
_CU = ["CREATE", "UPDATE"]
_KUEUE_VALIDATING = (
    ("vjob.kb.io", "/validate-batch-v1-job", "batch", "v1", ["jobs"], _CU),
    ("vpod.kb.io", "/validate--v1-pod", "", "v1", ["pods"], _CU),
    ("vdeployment.kb.io", "/validate-apps-v1-deployment", "apps", "v1", ["deployments"], _CU),
    ("vstatefulset.kb.io", "/validate-apps-v1-statefulset", "apps", "v1", ["statefulsets"], _CU),
    ("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io", "v1alpha2", ["jobsets"], _CU),
    (
        "vclusterqueue.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "kueue.x-k8s.io",
        "v1beta2",
        ["clusterqueues"],
        _CU,
    ),
    ("vcohort.kb.io", "/validate-kueue-x-k8s-io-v1beta2-cohort", "kueue.x-k8s.io", "v1beta2", ["cohorts"], _CU),
    (
        "vresourceflavor.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        "kueue.x-k8s.io",
        "v1beta2",
        ["resourceflavors"],
        _CU,
    ),
    (
        "vworkload.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        "kueue.x-k8s.io",
        "v1beta2",
        ["workloads", "workloads/status"],
        _CU,
    ),
)
# The workload kinds' webhooks skip Kueue's and the system's namespaces (kueue config/components/webhook/
# kustomization.yaml); Kueue's own objects have no selector.
_SKIP_SYSTEM = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", KUEUE_NS]}
    ]
}
_JOBSET_MUTATING = (
    (
        "mjobset.kb.io",
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "jobset.x-k8s.io",
        "v1alpha2",
        ["jobsets"],
        ["CREATE"],
    ),
)
_JOBSET_VALIDATING = (
    ("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io", "v1alpha2", ["jobsets"], _CU),
)


def _webhooks(rows, port: int, ca: bytes, system_selector: bool) -> list[dict]:
    out = []
    for name, path, group, version, resources, ops in rows:
        hook = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 30,
            "rules": [{"apiGroups": [group], "apiVersions": [version], "resources": resources, "operations": ops}],
        }
        if system_selector and group != "kueue.x-k8s.io":
            hook["namespaceSelector"] = _SKIP_SYSTEM
        out.append(hook)
    return out


def webhook_configurations(prefix: str, mutating, validating, port: int, ca: bytes) -> list[dict]:
    api = "admissionregistration.k8s.io/v1"
    system = prefix == "kueue"
    return [
        {
            "apiVersion": api,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": f"{prefix}-mutating-webhook-configuration"},
            "webhooks": _webhooks(mutating, port, ca, system),
        },
        {
            "apiVersion": api,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": f"{prefix}-validating-webhook-configuration"},
            "webhooks": _webhooks(validating, port, ca, system),
        },
    ]


class Manager:
    """One controller-runtime manager process (Kueue's or JobSet's) with its webhook server."""

    def __init__(
        self, cp: ControlPlane, name: str, binary: Path, config: dict, user: str, cert_dir: Path, port: int, *flags: str
    ):
        self.cp, self.name = cp, name
        self.health, self.port = free_port(), port
        config = {
            "internalCertManagement": {"enable": False},
            **config,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": self.port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
        }
        path = cp.workdir / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(config))
        kubeconfig = cp.user_kubeconfig(user)
        self.log_path = cp.log_dir / f"{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [str(binary), f"--config={path}", "--zap-log-level=2", *flags],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise ControlPlaneError(f"{self.name} exited {self.proc.returncode}: {self.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz", timeout=2) as r:
                if r.status != 200:
                    return False
            # Ready can come before the webhook server listens (it starts once the certificates are in place).
            with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                return True
        except OSError:
            return False

    def tail(self, lines: int = 40) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _apply(cp: ControlPlane, items: list[dict]) -> None:
    cp.kubectl(
        "apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )


# The CRDs the release serves through Kueue's conversion webhook (config/components/crd/kustomization.yaml,
# patches webhook_in_*.yaml): the rotator injects its CA into each and reports ready only then.
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
SERVICE, SECRET = "kueue-webhook-service", "kueue-webhook-server-cert"


def _crds(path: Path, convert_port: int | None = None) -> list[dict]:
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and convert_port and doc["metadata"]["name"].split(".")[0] in CONVERTED:
            doc["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"https://127.0.0.1:{convert_port}/convert"},
                    "conversionReviewVersions": ["v1"],
                },
            }
        if doc:
            out.append(doc)
    return out


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def webhook_pki(d: Path) -> dict[str, bytes]:
    """ca.crt, ca.key, tls.crt, tls.key: a CA named as Kueue's rotator names its own (`kueue-ca`) and a server
    certificate for 127.0.0.1 and Kueue's Service, both valid for ten years (beyond the rotator's lookahead)."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt, key, csr, crt, ext = (
        d / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt", "tls.ext")
    )
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=kueue-ca",
        "-addext", "subjectAltName=DNS:kueue-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment",
        "-keyout", str(ca_key), "-out", str(ca_crt),
    )  # fmt: skip
    dns = f"{SERVICE}.{KUEUE_NS}.svc"
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={dns}", "-keyout", str(key), "-out", str(csr)
    )
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName=DNS:{dns},IP:127.0.0.1\n"
    )
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "3650", "-extfile", str(ext), "-out", str(crt),
    )  # fmt: skip
    for k in (ca_key, key):  # PKCS#1: the rotator parses the CA key with ParsePKCS1PrivateKey (rotator.go:809)
        _openssl("rsa", "-in", str(k), "-traditional", "-out", str(k))
    return {p.name: p.read_bytes() for p in (ca_crt, ca_key, crt, key)}


def start(cp: ControlPlane, bin_dir: Path, wait: float, configuration: dict | None = None) -> list[Manager]:
    """CRDs, identities, certificates, both managers ready, then their webhook configurations (registered only
    once the servers answer: failurePolicy Fail). Kueue runs with `configuration` (gpupool's documented one by
    default; a platform's as `gpupool render` writes it) plus the test's namespace and certificates."""
    kueue_port, jobset_port = free_port(), free_port()
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"e2e-{ns}-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        for ns, user in ((KUEUE_NS, KUEUE_USER), (JOBSET_NS, JOBSET_USER))
    ]
    # What the JobSet release's aggregated role gives namespace editors (tenants' owner role is `edit`).
    edit_jobsets = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "e2e-jobset-edit", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["*"]}],
    }
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in (KUEUE_NS, JOBSET_NS)]
    pki = webhook_pki(cp.workdir / "webhook-pki")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": KUEUE_NS},
        "data": {k: base64.b64encode(v).decode() for k, v in pki.items()},
    }
    # One apply (each kubectl run costs seconds on a loaded runner). No wait for the CRDs to be established:
    # each manager reports ready only once its informers on them have synced.
    crds = _crds(bin_dir / "kueue-crds.yaml", kueue_port) + _crds(bin_dir / "jobset-crds.yaml")
    _apply(cp, crds + namespaces + bindings + [edit_jobsets, secret])
    cert_dir = cp.workdir / "webhook-certs"  # what the release's secret volume mounts
    cert_dir.mkdir(exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (cert_dir / name).write_bytes(pki[name])
        (cert_dir / name).chmod(0o600)
    kueue_config = {
        **(configuration or kueue.configuration(manifests.LABEL_TENANT)),
        "namespace": KUEUE_NS,
        "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE, "webhookSecretName": SECRET},
    }
    jobset_config = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration"}
    managers: list[Manager] = []
    try:
        managers.append(
            # The visibility API server needs in-cluster delegated authentication (kueue main.go:433-436).
            Manager(
                cp,
                "kueue-manager",
                bin_dir / "kueue-manager",
                kueue_config,
                KUEUE_USER,
                cert_dir,
                kueue_port,
                "--feature-gates=VisibilityOnDemand=false",
            )
        )
        managers.append(
            Manager(cp, "jobset-manager", bin_dir / "jobset-manager", jobset_config, JOBSET_USER, cert_dir, jobset_port)
        )
        for m in managers:
            try:
                cp.wait_for(m.ready, timeout=wait, interval=0.5, what=f"{m.name} ready")
            except ControlPlaneError as e:
                raise ControlPlaneError(f"{e}\n{m.tail()}") from None
        ca = pki["ca.crt"]
        _apply(
            cp,
            webhook_configurations("kueue", _KUEUE_MUTATING, _KUEUE_VALIDATING, kueue_port, ca)
            + webhook_configurations("jobset", _JOBSET_MUTATING, _JOBSET_VALIDATING, jobset_port, ca),
        )
    except BaseException:
        for m in managers:
            m.stop()
        raise
    return managers
