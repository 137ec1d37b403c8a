"""One GET against Prometheus' HTTP API, bounded and explained (gpupool.monitoring.prometheus asks it).

- Time: one deadline for the whole request, body included. A socket timeout restarts with every byte, so a
  server trickling one byte at a time would be waited on for ever; a watchdog shuts the socket down instead.
- Size: no answer is read beyond Limits.max_response_bytes (an endless body would otherwise be read until
  memory runs out).
- Redirects: followed within the same origin (scheme, host, port) only. urllib re-sends the Authorization
  header to wherever a redirect points, and a sign-in proxy is the usual reason for one to another server.
- Answers: anything but Prometheus' JSON envelope is an error that says what came back (HTTP status,
  Content-Type, an HTML page, Prometheus' own refusal), never quoting more of the server's text than a cut,
  escaped excerpt, and never a credential.
"""

from __future__ import annotations

import functools
import http.client
import json
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from gpupool import redact
from gpupool.monitoring.prom_connection import Connection, PrometheusError
from gpupool.spec.diagnostics import printable

_ERROR_BODY = 64 << 10  # what is read of an error answer to explain it
_CHUNK = 64 << 10


class _Deadline:
    """Shuts every socket of a request down when SECONDS have passed, so that a blocked read returns."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._done = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket (whose override drops its TLS state first, which a
    # read blocked in another thread may still be using).
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed, or detached by the TLS wrapper (its SSLSocket is watched instead)


def _creating_watched(deadline: _Deadline) -> Any:
    """socket.create_connection, each socket it makes watched by DEADLINE (a proxy tunnel's too)."""

    def create(*args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        deadline.watch(sock)
        return sock

    return create


class _WatchedHTTP(http.client.HTTPConnection):
    """An HTTP connection whose socket the request's deadline shuts down when it expires."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._create_connection = _creating_watched(deadline)


class _WatchedHTTPS(http.client.HTTPSConnection):
    """The same for HTTPS, the TLS socket watched from before its handshake."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline = deadline
        self._create_connection = _creating_watched(deadline)

    def connect(self) -> None:
        # HTTPSConnection.connect, with the TLS socket watched before its handshake (which a server can
        # trickle as well as a body): the same steps as CPython 3.11's Lib/http/client.py.
        http.client.HTTPConnection.connect(self)
        server_hostname = self._tunnel_host or self.host  # type: ignore[attr-defined]
        sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            self.sock, server_hostname=server_hostname, do_handshake_on_connect=False
        )
        self.sock = sock
        self.deadline.watch(sock)
        sock.do_handshake()


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the same origin only: the Authorization header goes where the user sent it."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        target = urllib.parse.urljoin(req.full_url, newurl)
        if _origin(target) != _origin(self.conn.base):
            fp.close()
            raise PrometheusError(
                f"{self.conn.display} answered HTTP {code}, a redirect to another server "
                f"({shown(_origin_text(target))}, not {_origin_text(self.conn.base)}): a sign-in page in front of "
                "Prometheus (an OAuth or SSO proxy)? gpupool follows no redirect to another server, and sends it "
                "no credentials: give the URL of Prometheus itself, or credentials the proxy takes "
                "(--bearer-token-file)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        p = urllib.parse.urlsplit(url)
        return (p.scheme.lower(), (p.hostname or "").lower(), p.port or {"http": 80, "https": 443}.get(p.scheme))
    except ValueError:
        return ("", "", None)


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    return f"{scheme}://{host}:{port}" if scheme else "an unparsable URL"


def shown(text: Any, limit: int = 200) -> str:
    """Text an untrusted server sent, as a message may name it: escaped, cut, scrubbed."""
    s = printable(redact.scrub(str(text)))
    return s if len(s) <= limit else s[:limit] + "..."


def get(conn: Connection, path: str, params: dict[str, str]) -> Any:
    """The JSON of GET BASE+PATH?PARAMS, checked for Prometheus' envelope; PrometheusError otherwise."""
    url = conn.base + path + "?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if conn.authorization:
        req.add_header("Authorization", conn.authorization)
    limits = conn.limits
    with _Deadline(limits.timeout) as deadline:
        handlers: list[Any] = [
            _SameOrigin(conn),
            _Handler(deadline),
            _SHandler(deadline, conn.context),
        ]
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(req, timeout=limits.timeout) as resp:
                status, ctype = resp.status, resp.headers.get("Content-Type", "")
                body = _read(resp, limits.max_response_bytes, conn.display)
        except PrometheusError:
            raise
        except urllib.error.HTTPError as exc:
            if deadline.expired:
                raise _timed_out(conn) from None
            raise PrometheusError(_refusal(conn, exc)) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if deadline.expired:
                raise _timed_out(conn) from None
            raise PrometheusError(_unreachable(conn, exc)) from None
        if deadline.expired:
            raise _timed_out(conn)
    return _envelope(conn, status, ctype, body)


class _Handler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(functools.partial(_WatchedHTTP, deadline=self.deadline), req)


class _SHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: ssl.SSLContext | None):
        super().__init__()
        self.deadline = deadline
        self.tls = context

    def https_open(self, req):
        # An https:// base has its context from connect(); an http:// one never reaches here (a redirect to
        # https is another origin, refused by _SameOrigin), the default context is a fallback.
        tls = self.tls or ssl.create_default_context()
        return self.do_open(functools.partial(_WatchedHTTPS, deadline=self.deadline), req, context=tls)


def _read(resp: Any, limit: int, display: str) -> bytes:
    length = resp.headers.get("Content-Length", "")
    too_big = (
        f"{display}: the answer is larger than --max-response-size ({limit:,} bytes); "
        "shorten the range, widen --step, or raise --max-response-size"
    )
    if length.isdigit() and int(length) > limit:
        raise PrometheusError(too_big)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = resp.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise PrometheusError(too_big)


def _timed_out(conn: Connection) -> PrometheusError:
    return PrometheusError(
        f"{conn.display}: no complete answer within --timeout ({conn.limits.timeout:g} s for the whole request, "
        "body included); raise --timeout for a slow Prometheus, or shorten the range"
    )


def _unreachable(conn: Connection, exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(reason):
        return (
            f"cannot query Prometheus at {conn.display}: its TLS certificate is not trusted "
            f"({shown(getattr(reason, 'verify_message', '') or 'verification failed')}): give its CA with "
            "--ca-file FILE (or, if you must, --insecure-skip-tls-verify)"
        )
    if isinstance(reason, ValueError):  # urllib and http.client quote the URL or a header in these: do not
        return f"cannot query Prometheus at {conn.display}: the request could not be built ({type(reason).__name__})"
    if isinstance(reason, http.client.HTTPException):
        return (
            f"cannot query Prometheus at {conn.display}: the answer broke off or is not valid HTTP "
            f"({type(reason).__name__})"
        )
    return f"cannot query Prometheus at {conn.display}: {shown(reason)}"


def _what_came_back(status: int, ctype: str, body: bytes) -> str:
    head = body[:512].lstrip().lower()
    kind = f"HTTP {status}, Content-Type {shown(ctype, 80) or '(none)'}"
    if "html" in ctype.lower() or head.startswith(b"<"):  # <!doctype html>, <html>, or a page without either
        return f"{kind}: an HTML page"
    return kind


def _refusal(conn: Connection, exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(_ERROR_BODY) if exc.fp is not None else b""
    except (OSError, http.client.HTTPException, ValueError):
        body = b""
    ctype = exc.headers.get("Content-Type", "") if exc.headers else ""
    where = conn.display
    try:
        doc = json.loads(body.decode())
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and doc.get("status") == "error":
        return (
            f"{where}: HTTP {exc.code}: Prometheus refused the query: "
            f"{shown(doc.get('errorType', 'error'), 40)}: {shown(doc.get('error', ''), 300)}"
        )
    came = _what_came_back(exc.code, ctype, body)
    if exc.code == 401:
        asked = (
            f"the credentials from {conn.auth_source} were refused"
            if conn.auth_source
            else "it wants credentials: give user:password@ in the URL, --basic-auth-file or --bearer-token-file"
        )
        return f"{where}: {came}: Prometheus (or a proxy in front of it) answered Unauthorized: {asked}"
    if exc.code == 403:
        who = (
            f"the credentials from {conn.auth_source} may not"
            if conn.auth_source
            else "without credentials, gpupool may not"
        )
        return f"{where}: {came}: Forbidden: {who} query this Prometheus"
    if 300 <= exc.code < 400:
        return f"{where}: {came}: a redirect gpupool does not follow; give the URL of Prometheus itself"
    if came.endswith("an HTML page"):
        return f"{where}: {came}: is {where} the Prometheus server, or a sign-in proxy in front of it?"
    return f"{where}: {came}"


def _envelope(conn: Connection, status: int, ctype: str, body: bytes) -> Any:
    where = conn.display
    came = _what_came_back(status, ctype, body)
    if came.endswith("an HTML page"):
        raise PrometheusError(
            f"{where}: {came}, not Prometheus' JSON API: is {where} the Prometheus server, or a sign-in proxy "
            "in front of it?"
        )
    try:
        doc = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):
        raise PrometheusError(f"{where}: {came}: the answer is not JSON, so not Prometheus' API") from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise PrometheusError(f"{where}: {came}: JSON, but not Prometheus' API answer (an object with a status)")
    if doc["status"] == "error":
        raise PrometheusError(
            f"{where}: Prometheus refused the query: {shown(doc.get('errorType', 'error'), 40)}: "
            f"{shown(doc.get('error', ''), 300)}"
        )
    if doc["status"] != "success" or not isinstance(doc.get("data"), dict):
        raise PrometheusError(f"{where}: {came}: JSON, but not Prometheus' API answer (status success, data)")
    return doc["data"]
