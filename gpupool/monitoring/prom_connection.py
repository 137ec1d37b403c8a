"""How gpupool usage reaches Prometheus: the URL checked, the credential read, the TLS context built.

Basic auth (the URL's `user:password@`, or a file) or a bearer token file becomes one `Authorization` header
value, kept out of every repr; the URL requested and printed carries no userinfo (gpupool.redact's
url_for_display). Every credential is registered with gpupool.redact the moment it is read, and no message
names its value: errors name the flag and the file. Everything here is checked before any request, and a
failure is a ConfigError (a usage error, exit 2). docs/explanation/monitoring.md, "Connecting to Prometheus".
"""

from __future__ import annotations

import base64
import os
import ssl
import stat
import urllib.parse
from dataclasses import dataclass, field

from gpupool import redact
from gpupool.spec.diagnostics import printable

POINTS_PER_REQUEST = 10_000  # below Prometheus' 11,000 points per series per query
DEFAULT_MAX_POINTS = 1_000_000  # steps in a range: at most 100 requests per query
DEFAULT_TIMEOUT = 120.0  # seconds, for one whole request
DEFAULT_MAX_RESPONSE = 128 << 20  # bytes of one answer
MAX_SECRET_FILE = 64 << 10  # a credential or CA file larger than this is no credential file


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
