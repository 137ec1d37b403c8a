"""A small Kubernetes API client from a kubeconfig (stdlib urllib + ssl): what the drain step and the live MIG
read call.

The drain runs inside a Pulumi dynamic provider, outside pulumi-kubernetes, so it reads the same kubeconfig the
Kubernetes provider uses: a path or the kubeconfig's contents (as pulumi-kubernetes accepts either), None for
$KUBECONFIG or ~/.kube/config, and the context (None: current-context). gpupool.k8s.kubeconfig reads it as
client-go does (client certificate and key, bearer token or tokenFile, username and password, exec credential
plugins per client.authentication.k8s.io v1/v1beta1); legacy auth-provider entries are refused.

The credential is sent to the kubeconfig's server and nowhere else. urllib's redirect handler would re-send
every header, Authorization included, to whatever host a redirect names; Go's net/http, which client-go and
kubectl use, copies Authorization only to the same domain or a subdomain of it (net/http/client.go,
shouldCopyHeaderOnRedirect). gpupool is stricter: it follows a redirect to the same origin (scheme, host and
port) and refuses one to any other origin, naming both, without sending anything there.

Every failure is a KubeconfigError (the kubeconfig) or a KubeAPIError (the request) in one line that names no
credential.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from gpupool import redact
from gpupool.k8s.kubeconfig import KubeconfigError, connect

__all__ = ["Client", "KubeAPIError", "KubeconfigError"]

MAX_ANSWER_BYTES = 256 * 1024 * 1024  # a page of 500 nodes is a few MiB; an endless body is refused


class KubeAPIError(OSError):
    """The API server could not be reached (refused, unresolvable, timed out, a redirect elsewhere): said in
    one line, not a traceback."""


class Client:
    """`client(method, path, body) -> (status, parsed JSON object)`: the `drain.Api` callable."""

    def __init__(self, kubeconfig: str | None, context: str | None = None, timeout: float = 30.0):
        conn = connect(kubeconfig, context)
        self.server = conn.server
        self.where = conn.where
        self.timeout = timeout
        self.ssl = conn.ssl
        self.token = conn.token
        self._authorization = conn.authorization
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=conn.ssl), _SameOriginRedirects(self)
        )

    def __repr__(self) -> str:
        return f"<kubeclient.Client {redact.url_for_display(self.server)}>"

    def __call__(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """CONTENT_TYPE: a PATCH names its kind (application/merge-patch+json for a JSON merge patch)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self._authorization:
            req.add_header("Authorization", self._authorization)
        try:
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    return resp.status, _json(self._read(resp, method, path))
            except urllib.error.HTTPError as err:
                with err:
                    return err.code, _json(self._read(err, method, path))
        except KubeAPIError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as err:
            raise KubeAPIError(f"{self.request(method, path)}: {_reason(err)} (the server of {self.where})") from None

    def _read(self, resp: Any, method: str, path: str) -> bytes:
        raw = resp.read(MAX_ANSWER_BYTES + 1)
        if len(raw) > MAX_ANSWER_BYTES:
            limit = MAX_ANSWER_BYTES // (1024 * 1024)
            raise KubeAPIError(f"{self.request(method, path)}: the answer is larger than {limit} MiB")
        return raw

    def request(self, method: str, path: str) -> str:
        """How messages name a request: method and URL, without its query (it may carry a token)."""
        return f"{method} {redact.url_for_display(self.server + path)}"


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect to the server's own origin; refuse one to any other (see the module docstring)."""

    def __init__(self, client: Client):
        self.client = client

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        here, there = _origin(req.full_url), _origin(newurl)
        if here != there:
            fp.close()
            raise KubeAPIError(
                f"{self.client.request(req.get_method(), urllib.parse.urlsplit(req.full_url).path)}: the API "
                f"server at {here} redirected to another host, {there or 'an unreadable location'}; gpupool does "
                f"not follow it, so the cluster's credentials go nowhere else (as kubectl does not send them); "
                f"check the server of {self.client.where}"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> str:
    """scheme://host:port of URL (the port spelled out), "" when it has none; no path, query or userinfo."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower(), 0)
        host = parts.hostname or ""
    except ValueError:
        return ""
    if not host:
        return ""
    host = f"[{host}]" if ":" in host else host
    shown = f"{parts.scheme.lower()}://{host}:{port}"
    return redact.scrub(shown if shown.isprintable() and len(shown) < 300 else repr(shown[:300]))


def _reason(err: BaseException) -> str:
    """Why a request failed, in one line that quotes nothing gpupool sent."""
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(err, ValueError):  # http.client quotes a refused header value: never shown
        return f"the request could not be sent ({type(err).__name__})"
    if isinstance(err, http.client.HTTPException):
        return f"the connection broke mid-answer ({type(err).__name__})"
    reason: Any = getattr(err, "reason", None) or err
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    text = " ".join(str(reason).split())
    text = "".join(c for c in text if c.isprintable())
    return redact.scrub(text[:300]) or type(err).__name__


def _json(raw: bytes) -> dict[str, Any]:
    """The answer as a JSON object; anything else as {"message": its first line(s), printable, capped}."""
    try:
        obj = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        text = " ".join(raw.decode(errors="replace").split())
        return {"message": "".join(c for c in text if c.isprintable())[:500]}
    return obj if isinstance(obj, dict) else {"message": "an answer that is not a JSON object"}
