"""A small Kubernetes API client from a kubeconfig (stdlib urllib + ssl): what the drain step calls.

The drain runs inside a Pulumi dynamic provider, outside pulumi-kubernetes, so it reads the same kubeconfig the
Kubernetes provider uses: a path or the kubeconfig's contents (as pulumi-kubernetes accepts either), None for
$KUBECONFIG or ~/.kube/config, and the context (None: current-context). Supported credentials: client
certificate and key (file or -data), bearer token (token or tokenFile), and exec credential plugins (what EKS,
GKE and AKS kubeconfigs use: the command prints an ExecCredential whose status holds a token or a client
certificate; client.authentication.k8s.io, as client-go's plugin/pkg/client/auth/exec runs it). The legacy
auth-provider entries are refused with a clear error rather than guessed.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gpupool import safe_write


class KubeAPIError(OSError):
    """The API server could not be reached (refused, unresolvable, timed out): said in one line, not a traceback."""


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used by the drain's client."""


def load(kubeconfig: str | None) -> tuple[dict[str, Any], Path]:
    """The parsed kubeconfig and the directory its relative paths are relative to."""
    if kubeconfig is None:
        kubeconfig = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(Path.home() / ".kube/config")
    path = Path(kubeconfig)
    if "\n" not in kubeconfig and path.is_file():
        return yaml.safe_load(path.read_text()) or {}, path.parent
    data = yaml.safe_load(kubeconfig)
    if not isinstance(data, dict):
        raise KubeconfigError("the kubeconfig is neither a readable file nor kubeconfig contents")
    return data, Path.cwd()


def _named(items: list[dict[str, Any]], name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return item.get(what, {})
    raise KubeconfigError(f"the kubeconfig has no {what} named {name!r}")


class Client:
    """`client(method, path, body) -> (status, parsed JSON)`: the `drain.Api` callable."""

    def __init__(self, kubeconfig: str | None, context: str | None = None, timeout: float = 30.0):
        data, base = load(kubeconfig)
        name = context or data.get("current-context")
        if not name:
            raise KubeconfigError("the kubeconfig has no current-context and no context was given")
        ctx = _named(data.get("contexts", []), name, "context")
        cluster = _named(data.get("clusters", []), ctx.get("cluster", ""), "cluster")
        user = _named(data.get("users", []), ctx.get("user", ""), "user") if ctx.get("user") else {}
        if "auth-provider" in user:
            raise KubeconfigError(
                f"context {name!r}: auth-provider credentials are not supported by the drain; use an exec "
                "plugin, a token or a client certificate, or set the pool's rollout.drain: false"
            )
        if "exec" in user:
            user = {**user, **exec_credential(user["exec"], name)}
        self.server = str(cluster.get("server", "")).rstrip("/")
        self.timeout = timeout
        self.token = user.get("token") or (
            _path(base, user["tokenFile"]).read_text().strip() if user.get("tokenFile") else ""
        )
        self.ssl = self._context(cluster, user, base)

    @staticmethod
    def _context(cluster: dict[str, Any], user: dict[str, Any], base: Path) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif cluster.get("certificate-authority-data"):
            ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif cluster.get("certificate-authority"):
            ctx.load_verify_locations(cafile=str(_path(base, cluster["certificate-authority"])))
        with tempfile.TemporaryDirectory() as tmp:  # ssl loads a client certificate from files only
            cert = _file(base, user, "client-certificate", Path(tmp) / "crt")
            key = _file(base, user, "client-key", Path(tmp) / "key")
            if cert:
                ctx.load_cert_chain(cert, key or None)
        return ctx

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, context=self.ssl, timeout=self.timeout) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _json(err.read())
        except OSError as err:  # URLError and timeouts; HTTPError (an answer, also an OSError) is caught above
            reason = getattr(err, "reason", None) or err
            raise KubeAPIError(f"{method} {self.server}{path.split('?')[0]}: {reason}") from None


def exec_credential(spec: dict[str, Any], context: str) -> dict[str, str]:
    """Run a kubeconfig's exec plugin; its ExecCredential status as kubeconfig user fields (token, or client
    certificate and key data)."""
    api_version = spec.get("apiVersion", "client.authentication.k8s.io/v1")
    env = {**os.environ, **{e["name"]: e["value"] for e in spec.get("env") or []}}
    info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    try:
        done = subprocess.run(
            [spec["command"], *(spec.get("args") or [])], env=env, capture_output=True, text=True, timeout=60
        )
    except (OSError, KeyError, subprocess.TimeoutExpired) as exc:
        raise KubeconfigError(f"context {context!r}: its exec credential plugin did not run: {exc}") from None
    if done.returncode != 0:
        raise KubeconfigError(f"context {context!r}: its exec credential plugin exited {done.returncode}")
    try:
        status = json.loads(done.stdout).get("status", {})
    except (ValueError, AttributeError):
        raise KubeconfigError(f"context {context!r}: its exec credential plugin printed no ExecCredential") from None
    out = {"token": status.get("token", "")}
    for field, key in (("clientCertificateData", "client-certificate"), ("clientKeyData", "client-key")):
        if status.get(field):
            out[f"{key}-data"] = base64.b64encode(status[field].encode()).decode()
    return out


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _file(base: Path, user: dict[str, Any], key: str, tmp: Path) -> str:
    if user.get(f"{key}-data"):
        # Through the one writer (gpupool.safe_write), into the private temporary directory (mode 0700).
        with safe_write.Directory.open(tmp.parent) as d:
            d.write_new(tmp.name, base64.b64decode(user[f"{key}-data"]))
        return str(tmp)
    return str(_path(base, user[key])) if user.get(key) else ""


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {"message": raw.decode(errors="replace")[:500]}
