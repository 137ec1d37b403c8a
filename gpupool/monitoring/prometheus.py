"""A minimal Prometheus HTTP API client (GET /api/v1/query_range) for `gpupool usage`.

Plain urllib: three range queries do not justify a dependency. What it guards against (docs/monitoring.md,
"Connecting to Prometheus"):

- Credentials: basic auth (the URL's `user:password@`, or a file) or a bearer token file, sent as an
  `Authorization` header; the URL requested and printed carries no userinfo (gpupool.redact.url_for_display).
  Every credential is registered with gpupool.redact the moment it is read, and no message names its value:
  errors name the flag and the file. A redirect to another origin (scheme, host, port) is refused: urllib
  would re-send the header there, and a sign-in proxy is the usual reason for one.
- Time: one deadline for the whole request, body included. A socket timeout restarts with every byte, so a
  server trickling one byte at a time would be waited on for ever; a watchdog shuts the socket down instead.
- Size: no answer is read beyond a cap (an endless body would otherwise be read until memory runs out).
- Range: long ranges are cut into requests of at most POINTS_PER_REQUEST steps (Prometheus refuses more
  than 11,000 points per series in one query: prometheus web/api/v1/api.go queryRange, "exceeded maximum
  resolution of 11,000 points per timeseries"), and a range of more than Limits.max_points steps is refused
  before any request.
- Answers: the envelope and the matrix are checked (status, data, resultType, result, metric, values);
  anything else is an error that says what came back (HTTP status, Content-Type, an HTML page).
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import math
import os
import socket
import ssl
import stat
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from gpupool import redact
from gpupool.analysis.usage import Series, Window, series_name
from gpupool.spec.diagnostics import printable

POINTS_PER_REQUEST = 10_000  # below Prometheus' 11,000 points per series per query
DEFAULT_MAX_POINTS = 1_000_000  # steps in a range: at most 100 requests per query
DEFAULT_TIMEOUT = 120.0  # seconds, for one whole request
DEFAULT_MAX_RESPONSE = 128 << 20  # bytes of one answer
MAX_SECRET_FILE = 64 << 10  # a credential or CA file larger than this is no credential file
_ERROR_BODY = 64 << 10  # what is read of an error answer to explain it
_CHUNK = 64 << 10


class PrometheusError(Exception):
    """Prometheus could not be reached, refused a query or gave an unusable answer: exit 1."""


class ConfigError(PrometheusError):
    """The URL, a credential file or a limit is unusable, found before any request: a usage error (exit 2)."""


@dataclass(frozen=True)
class Limits:
    timeout: float = DEFAULT_TIMEOUT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE
    max_points: int = DEFAULT_MAX_POINTS
    points_per_request: int = POINTS_PER_REQUEST


@dataclass(frozen=True)
class Connection:
    """Where and how to ask: BASE has no userinfo; the credential is only in AUTHORIZATION (never printed)."""

    base: str
    display: str  # the URL as messages and reports name it
    limits: Limits = Limits()
    authorization: str | None = field(default=None, repr=False)
    auth_source: str = ""  # which flag the credential came from, for a 401's message
    context: ssl.SSLContext | None = field(default=None, repr=False)


# -- building a connection: the URL, credentials, TLS ---------------------------------------------------------


def connect(
    url: str,
    *,
    basic_auth_file: str | None = None,
    basic_auth_user: str | None = None,
    bearer_token_file: str | None = None,
    ca_file: str | None = None,
    insecure_skip_tls_verify: bool = False,
    limits: Limits = Limits(),
) -> Connection:
    """A Connection for URL; ConfigError (naming the flag or file, never a credential) when unusable."""
    parts = _parse_url(url)
    user = urllib.parse.unquote(parts.username) if parts.username is not None else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    for secret in (parts.password, password):
        redact.register(secret)
    if user is not None and password is None:
        redact.register(user)  # a lone userinfo is often a token (https://TOKEN@host)
        raise ConfigError("--prometheus: the URL has a user but no password: give user:password@, or --basic-auth-file")
    sources = [
        name
        for name, given in (
            ("the URL's user:password", password is not None),
            ("--basic-auth-file", basic_auth_file),
            ("--bearer-token-file", bearer_token_file),
        )
        if given
    ]
    if len(sources) > 1:
        raise ConfigError(f"give one credential, not {' and '.join(sources)}")
    if basic_auth_user is not None and not basic_auth_file:
        raise ConfigError("--basic-auth-user: give --basic-auth-file FILE with the password too")
    authorization = None
    if password is not None:
        authorization = _basic(user or "", password)
    elif basic_auth_file:
        authorization = _basic(*_basic_from_file(basic_auth_file, basic_auth_user))
    elif bearer_token_file:
        token = _read_secret(bearer_token_file, "--bearer-token-file")
        if any(not c.isascii() or not c.isprintable() or c.isspace() for c in token):
            raise ConfigError(
                f"--bearer-token-file {printable(bearer_token_file)}: a token is one line of ASCII without "
                "spaces; this file holds more (several lines, spaces or other characters)"
            )
        authorization = redact.register("Bearer " + token)
    context = _tls(parts.scheme, ca_file, insecure_skip_tls_verify)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return Connection(base, redact.url_for_display(base), limits, authorization, sources[0] if sources else "", context)


def _parse_url(url: str) -> urllib.parse.SplitResult:
    text = url.strip()
    if any(not c.isprintable() or c.isspace() for c in text):
        raise ConfigError("--prometheus: the URL contains spaces or control characters")
    if "://" not in text:
        raise ConfigError("--prometheus: give the URL with its scheme, e.g. http://localhost:9090")
    try:
        parts = urllib.parse.urlsplit(text)
        _ = parts.port  # ValueError for a port that is no number or out of range
    except ValueError:
        raise ConfigError("--prometheus: not a valid URL (check the host and the port)") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError("--prometheus: only http:// and https:// URLs are supported, e.g. http://localhost:9090")
    if not parts.hostname:
        raise ConfigError("--prometheus: the URL names no host, e.g. http://localhost:9090")
    if parts.query or parts.fragment:
        raise ConfigError(
            "--prometheus: give the base URL without a query string or fragment "
            "(a token in the URL would be logged: use --bearer-token-file)"
        )
    return parts._replace(scheme=parts.scheme.lower())


def _basic(user: str, password: str) -> str:
    # RFC 7617: the user-id cannot contain a colon (the first one separates it from the password).
    if ":" in user:
        raise ConfigError("basic auth: the user name cannot contain a colon")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    redact.register(token)
    return "Basic " + token


def _basic_from_file(path: str, user: str | None) -> tuple[str, str]:
    """(user, password): the file holds `user:password`, or, with --basic-auth-user, the password alone
    (as Prometheus' own basic_auth.password_file)."""
    text = _read_secret(path, "--basic-auth-file")
    if "\n" in text or "\r" in text:
        raise ConfigError(f"--basic-auth-file {printable(path)}: holds more than one line; give one line")
    if user is not None:
        return user, text
    if ":" not in text:
        raise ConfigError(
            f"--basic-auth-file {printable(path)}: holds no `user:password` line "
            "(or give --basic-auth-user USER, and the file holds the password alone)"
        )
    name, password = text.split(":", 1)
    redact.register(password)
    return name, password


def _regular_file(path: str, flag: str) -> int:
    """An open descriptor of PATH, a regular file (a FIFO or a device would block or never end)."""
    shown = printable(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{flag} {shown}: no such file") from None
    except PermissionError:
        raise ConfigError(f"{flag} {shown}: cannot be read (permission denied)") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {shown}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{flag} {shown}: not a regular file")
    return fd


def _read_secret(path: str, flag: str) -> str:
    """The credential in PATH, registered with gpupool.redact, surrounding whitespace stripped (an editor's or
    `kubectl get secret | base64 -d`'s trailing newline). Errors name FLAG and the file, never the content."""
    shown = printable(path)
    with os.fdopen(_regular_file(path, flag), "rb") as f:
        try:
            data = f.read(MAX_SECRET_FILE + 1)
        except OSError as exc:
            raise ConfigError(f"{flag} {shown}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_SECRET_FILE:
        raise ConfigError(f"{flag} {shown}: larger than {MAX_SECRET_FILE >> 10} KiB, which no credential is")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{flag} {shown}: not UTF-8 text") from None
    redact.register(text)
    text = text.strip()
    if not text:
        raise ConfigError(f"{flag} {shown}: is empty")
    return text


def _tls(scheme: str, ca_file: str | None, insecure: bool) -> ssl.SSLContext | None:
    if scheme != "https":
        if ca_file or insecure:
            raise ConfigError("--ca-file and --insecure-skip-tls-verify apply to https:// URLs only")
        return None
    if ca_file and insecure:
        raise ConfigError("give --ca-file or --insecure-skip-tls-verify, not both")
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if not ca_file:
        return ssl.create_default_context()
    shown = printable(ca_file)
    with os.fdopen(_regular_file(ca_file, "--ca-file"), "rb") as f:
        pem = f.read(MAX_SECRET_FILE * 16 + 1)
    if len(pem) > MAX_SECRET_FILE * 16:
        raise ConfigError(f"--ca-file {shown}: larger than {MAX_SECRET_FILE * 16 >> 10} KiB, which no CA bundle is")
    try:
        return ssl.create_default_context(cadata=pem.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError):
        raise ConfigError(f"--ca-file {shown}: holds no PEM certificate gpupool can read") from None


# -- one request: deadline, size cap, same-origin redirects ---------------------------------------------------


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


class _WatchedHTTP(http.client.HTTPConnection):
    """An HTTP connection whose socket the request's deadline shuts down when it expires."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline = deadline
        self._create_connection = self._create_watched

    def _create_watched(self, *args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        self.deadline.watch(sock)  # a proxy tunnel's handshake is covered too
        return sock


class _WatchedHTTPS(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline = deadline
        self._create_connection = self._create_watched

    def _create_watched(self, *args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        self.deadline.watch(sock)
        return sock

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
            raise PrometheusError(
                f"{self.conn.display} answered HTTP {code}, a redirect to another server "
                f"({_shown(_origin_text(target))}, not {_origin_text(self.conn.base)}): a sign-in page in front of "
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


def _shown(text: Any, limit: int = 200) -> str:
    """Text an untrusted server sent, as a message may name it: escaped, cut, scrubbed."""
    s = printable(redact.scrub(str(text)))
    return s if len(s) <= limit else s[:limit] + "..."


def _get(conn: Connection, path: str, params: dict[str, str]) -> Any:
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
            f"({_shown(getattr(reason, 'verify_message', '') or 'verification failed')}): give its CA with "
            "--ca-file FILE (or, if you must, --insecure-skip-tls-verify)"
        )
    if isinstance(reason, ValueError):  # urllib and http.client quote the URL or a header in these: do not
        return f"cannot query Prometheus at {conn.display}: the request could not be built ({type(reason).__name__})"
    if isinstance(reason, http.client.HTTPException):
        return f"cannot query Prometheus at {conn.display}: the connection broke ({type(reason).__name__})"
    return f"cannot query Prometheus at {conn.display}: {_shown(reason)}"


def _what_came_back(status: int, ctype: str, body: bytes) -> str:
    head = body[:512].lstrip().lower()
    kind = f"HTTP {status}, Content-Type {_shown(ctype, 80) or '(none)'}"
    if "html" in ctype.lower() or head.startswith((b"<!doctype", b"<html", b"<")):
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
            f"{_shown(doc.get('errorType', 'error'), 40)}: {_shown(doc.get('error', ''), 300)}"
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
        return f"{where}: {came}: Forbidden: the credentials given may not query this Prometheus"
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
            f"{where}: Prometheus refused the query: {_shown(doc.get('errorType', 'error'), 40)}: "
            f"{_shown(doc.get('error', ''), 300)}"
        )
    if doc["status"] != "success" or not isinstance(doc.get("data"), dict):
        raise PrometheusError(f"{where}: {came}: JSON, but not Prometheus' API answer (status success, data)")
    return doc["data"]


# -- range queries ----------------------------------------------------------------------------------------------


def requests_for(window: Window, limits: Limits) -> list[tuple[float, float]]:
    """(first, last) evaluation times of each request WINDOW needs; ConfigError beyond Limits.max_points,
    before any request is sent."""
    steps, per = window.steps, limits.points_per_request
    if not math.isfinite(window.start) or not math.isfinite(window.end) or steps < 1:
        raise ConfigError("the range must be finite and at least one --step long")
    if steps > limits.max_points:
        need = -(-steps // per)
        wider = _duration_text(window.step * -(-steps // limits.max_points))
        raise ConfigError(
            f"the range is {steps:,} steps of {_duration_text(window.step)}, more than --max-points "
            f"{limits.max_points:,}: each query would take {need:,} requests of {per:,} points (Prometheus "
            f"returns at most 11,000 points per series per request); give --step {wider} or more, a shorter "
            "range, or raise --max-points"
        )
    return [
        (window.start + (i + 1) * window.step, window.start + min(i + per, steps) * window.step)
        for i in range(0, steps, per)
    ]


def _duration_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _seconds(x: float) -> str:
    """Unix seconds or a step in seconds as Prometheus reads them (every digit kept: `g` rounds 1234567)."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


def query_range(conn: Connection, query: str, window: Window) -> list[Series]:
    """QUERY evaluated at every step end in WINDOW; series of the same labels across requests are joined."""
    out: dict[tuple, dict[float, float]] = {}
    labels_of: dict[tuple, dict[str, str]] = {}
    for first, last in requests_for(window, conn.limits):
        data = _get(
            conn,
            "/api/v1/query_range",
            {"query": query, "start": _seconds(first), "end": _seconds(last), "step": _seconds(window.step)},
        )
        for metric, values in _matrix(conn, data):
            key = tuple(sorted(metric.items()))
            labels_of[key] = metric
            out.setdefault(key, {}).update(values)
    return [Series(labels_of[k], tuple(sorted(v.items()))) for k, v in out.items()]


def _matrix(conn: Connection, data: dict) -> list[tuple[dict[str, str], dict[float, float]]]:
    """The series of a range query's data, each sample a finite time and a number (its value's sign and
    finiteness are gpupool.analysis.usage's to judge: it knows what the series means)."""
    where = conn.display

    def bad(what: str) -> PrometheusError:
        return PrometheusError(f"{where}: the answer is not a range query's matrix: {what}")

    if data.get("resultType") != "matrix":
        raise bad(f'resultType is {_shown(json.dumps(data.get("resultType")), 40)}, not "matrix"')
    result = data.get("result")
    if not isinstance(result, list):
        raise bad("data.result is not a list")
    out = []
    for i, item in enumerate(result):
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise bad(f"result[{i}] is not an object with a metric object")
        metric = item.get("metric", {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
            raise bad(f"result[{i}].metric has a label that is not a string")
        values = item.get("values")
        if not isinstance(values, list):
            raise bad(f"result[{i}] ({series_name(metric)}) has no values list")
        samples: dict[float, float] = {}
        for pair in values:
            t = _time_of(pair)
            if t is None:
                raise bad(f'a sample of {series_name(metric)} is not a [unix time, "value"] pair')
            try:
                samples[t] = float(pair[1])
            except ValueError:
                raise PrometheusError(f"{where}: a sample of {series_name(metric)} is not a number") from None
        out.append((dict(metric), samples))
    return out


def _time_of(pair: Any) -> float | None:
    """The time of a [time, "value"] pair, or None when PAIR is no such pair (or its time is not finite)."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        return None
    if isinstance(pair[0], bool) or not isinstance(pair[0], int | float):
        return None
    try:
        t = float(pair[0])
    except OverflowError:  # an integer of hundreds of digits
        return None
    return t if math.isfinite(t) else None
