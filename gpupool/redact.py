"""Credentials never leave through output: the secrets this process has read, and the scrubbing of text.

The first line of defence is in the code that reads a credential: its diagnostics name the field and the
file, never the value (gpupool.k8s.kubeclient, gpupool.monitoring.prometheus). This module is the second:

- `register(value)` records a credential the moment it is read (a bearer token, a password, a client key,
  an exec plugin's env value); `scrub(text)` replaces every registered one with `<redacted>`;
- `scrub` also masks what looks like a credential whatever its origin: the password of a URL's userinfo
  (`http://user:PASSWORD@host`) and the value of an `Authorization:` header;
- `url_for_display(url)` is the only spelling of a user's URL gpupool prints (userinfo dropped);
- `install()` wraps stdout and stderr so that everything any command prints passes through `scrub`
  (gpupool.cli.main calls it before running a command).
"""

from __future__ import annotations

import re
import sys
import urllib.parse
from typing import Any, TextIO

MASK = "<redacted>"
# Shorter values are not scrubbed from streams: masking every "abc" in a report would corrupt it, and such
# a value is no credential worth the name. The first line of defence (never echo) still holds for them.
MIN_LENGTH = 6

_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None

_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/@\s:]*):(?P<password>[^/@\s]*)@")
_AUTH_HEADER = re.compile(r"(?i)(?P<head>\bauthorization\s*[:=]\s*(?:bearer|basic)?\s*)(?P<value>[^\s\"',]+)")


def register(value: Any) -> Any:
    """Record VALUE (a str or bytes credential) as a secret; returns it unchanged. Whitespace around it is
    what YAML block scalars and pasted files add, so the stripped value is recorded too."""
    global _pattern
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if not isinstance(value, str):
        return value
    added = False
    for v in {value, value.strip(), *value.strip().splitlines()}:
        v = v.strip()
        if len(v) >= MIN_LENGTH and v not in _secrets:
            _secrets.add(v)
            added = True
    if added:
        # Longest first, so that a secret containing another is masked whole.
        _pattern = re.compile("|".join(re.escape(s) for s in sorted(_secrets, key=len, reverse=True)))
    return value


def registered() -> frozenset[str]:
    return frozenset(_secrets)


def forget_all() -> None:
    """Tests only: start from no registered secret."""
    global _pattern
    _secrets.clear()
    _pattern = None


def scrub(text: str) -> str:
    """TEXT with every registered secret, URL password and Authorization header value masked."""
    if not text:
        return text
    if _pattern is not None:
        text = _pattern.sub(MASK, text)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTH_HEADER.sub(lambda m: m["head"] + MASK, text)
    return text


def url_for_display(url: str) -> str:
    """URL as gpupool prints it: without its userinfo (user and password) and without a query string, whose
    parameters may carry a token (`?access_token=`). Anything unparsable is scrubbed instead."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal keeps its brackets
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return scrub(url)


class _Scrubbing:
    """A text stream whose writes are scrubbed (see the module docstring)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)  # callers count what they gave, not what reached the stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Scrub everything written to sys.stdout and sys.stderr from now on (idempotent)."""
    if not isinstance(sys.stdout, _Scrubbing):
        sys.stdout = _Scrubbing(sys.stdout)
    if not isinstance(sys.stderr, _Scrubbing):
        sys.stderr = _Scrubbing(sys.stderr)
