"""Reading a kubeconfig as client-go does: the server, the TLS settings and the credential of one context.

The drain step and the live MIG read (gpupool.k8s.kubeclient) use what `connect()` returns. A kubeconfig is
given as pulumi-kubernetes takes it: a path, or the kubeconfig's contents (YAML or JSON; contents when the
value has a line break or starts with `{`), or None for $KUBECONFIG (its first existing file) or
~/.kube/config.

Credentials never leave through a message: each one is registered with gpupool.redact the moment it is read
(token, tokenFile contents, password, client key data or file contents, exec env values, what an exec plugin
returns), and every KubeconfigError names the file, the context, cluster or user, and the field, never a
value. The kubeconfig's text is never quoted either: a YAML error gives its line and column, not the
parser's snippet of the offending line (it may be the token's).

Upstream, kubernetes/client-go (master, 2026-07), read for this module:
- tools/clientcmd/validation.go: validateClusterInfo ("no server found for cluster %q"), validateAuthInfo
  (a client certificate needs a key; token and username/password together are "more than one
  authentication method", refused);
- tools/clientcmd/client_config.go, getUserIdentificationPartialConfig: token, else tokenFile; client
  certificate and key, -data winning over the file; username and password (basic auth, sent by
  transport/round_trippers.go with SetBasicAuth); the server URL loses its query and fragment;
- transport/token_source.go, fileTokenSource.Token: a tokenFile's contents are strings.TrimSpace'd and an
  empty one is an error. An inline token is sent as written, and Go's net/http then refuses one ending in a
  newline (a `token: |` block scalar pasted from a Secret); gpupool strips it as it strips a tokenFile;
- plugin/pkg/client/auth/exec/exec.go, UpdateTransportConfig: a token, basic auth or a client certificate
  in the kubeconfig wins, and the exec plugin is not run (gpupool.k8s.exec_credential runs it otherwise);
- tools/clientcmd/loader.go, ResolvePaths: relative paths are relative to the kubeconfig file's directory.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpupool import redact, safe_write
from gpupool.k8s import exec_credential

MAX_BYTES = 16 * 1024 * 1024  # a kubeconfig, a token or key file: far larger is not one


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used: one line naming the file, the entry and the field, never a value."""


@dataclass(frozen=True)
class Connection:
    """What requests need: the server (no trailing slash), its TLS context, and the credential."""

    server: str
    ssl: ssl.SSLContext = field(repr=False)
    where: str  # "context 'a' of /path/kubeconfig": for messages
    token: str = field(default="", repr=False)
    basic: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def authorization(self) -> str:
        """The Authorization header value ("" for none)."""
        if self.token:
            return f"Bearer {self.token}"
        if self.basic:
            value = "Basic " + base64.b64encode(f"{self.basic[0]}:{self.basic[1]}".encode()).decode()
            return redact.register(value)
        return ""


def connect(kubeconfig: str | None, context: str | None = None) -> Connection:
    """The Connection of CONTEXT (None: current-context) in KUBECONFIG (see the module docstring)."""
    data, base, label = load(kubeconfig)
    name = context or data.get("current-context")
    if not name:
        raise KubeconfigError(f"{label} has no current-context, and no context was given")
    if not isinstance(name, str):
        raise KubeconfigError(f"{label}: current-context must be a string")
    where = f"context {_q(name)} of {label}"
    ctx = _named(data, "contexts", "context", name, label)
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise KubeconfigError(f"{where} names no cluster (contexts[].context.cluster)")
    cluster = _named(data, "clusters", "cluster", cluster_name, label)
    user: dict[str, Any] = {}
    if user_name:
        if not isinstance(user_name, str):
            raise KubeconfigError(f"{where}: its user must be a name (contexts[].context.user)")
        user = _named(data, "users", "user", user_name, label)
    in_user = f"user {_q(str(user_name))} (context {_q(name)}) in {label}"
    in_cluster = f"cluster {_q(cluster_name)} in {label}"
    server = _server(cluster, in_cluster)
    token, basic, cert, key = _static(user, base, in_user)
    if "exec" in user and not (token or basic or cert):  # exec.go UpdateTransportConfig: static wins
        try:
            got = exec_credential.run(user["exec"], base, _cluster_info(cluster, server))
        except exec_credential.PluginError as exc:
            raise KubeconfigError(f"{in_user}: {exc}") from None
        token, cert, key = got.token, got.cert_pem, got.key_pem
        if cert:
            in_user += ", as returned by its exec plugin (status.clientCertificateData/clientKeyData)"
    context_ssl = _tls(cluster, base, in_cluster, cert, key, in_user)
    return Connection(server, context_ssl, where, token, basic)


def load(kubeconfig: str | None) -> tuple[dict[str, Any], Path, str]:
    """The parsed kubeconfig, the directory its relative paths are relative to, and how messages name it."""
    if kubeconfig is None:
        env = os.environ.get("KUBECONFIG", "")
        paths = [p for p in env.split(os.pathsep) if p]
        if paths:
            # client-go merges every file $KUBECONFIG names; gpupool reads the first that exists.
            found = next((p for p in paths if _is_file(p)), None)
            if found is None:
                raise KubeconfigError(f"no file $KUBECONFIG names exists ({', '.join(paths)})")
            kubeconfig = found
        else:
            kubeconfig = str(Path.home() / ".kube" / "config")
            if not Path(kubeconfig).exists():
                raise KubeconfigError(f"no kubeconfig: $KUBECONFIG is not set and {kubeconfig} does not exist")
    if "\n" in kubeconfig or kubeconfig.lstrip().startswith("{"):
        text, base, label = kubeconfig, Path.cwd(), "the kubeconfig given as contents"
    else:
        path = _expand(Path(kubeconfig), "kubeconfig")
        label = f"kubeconfig {_shown_path(path)}"
        text = _read(path, label).decode("utf-8", errors="replace")
        base = path.parent
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        # The parser's problem, unless it quotes the text (an undefined alias or an unknown tag is quoted, and
        # `token: *SECRET` is one): only a problem with no quote in it is shown.
        what = ""
        if isinstance(problem, str) and problem.isprintable() and len(problem) < 80:
            what = "" if any(q in problem for q in "'\"`") else f" ({problem})"
        # Not str(exc): the parser quotes the offending line, which may be the token's.
        raise KubeconfigError(f"{label} is not valid YAML{at}{what}; its text is not shown here") from None
    except (ValueError, RecursionError):  # a timestamp like 2001-02-30, absurd nesting
        raise KubeconfigError(f"{label} is not valid YAML; its text is not shown here") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise KubeconfigError(f"{label} is not a kubeconfig (a mapping with clusters, contexts and users)")
    return data, base, label


def _is_file(value: str) -> bool:
    try:
        return Path(value).expanduser().is_file()
    except (OSError, RuntimeError, ValueError):
        return False


def _expand(path: Path, what: str) -> Path:
    try:
        return path.expanduser()
    except RuntimeError:  # ~user of no such user
        raise KubeconfigError(f"{what} {_shown_path(path)}: no such user's home directory") from None


def _read(path: Path, what: str) -> bytes:
    """A file's bytes (capped), or a KubeconfigError naming WHAT and the reason (never its contents)."""
    if "\0" in str(path):
        raise KubeconfigError(f"{what}: a path cannot hold a NUL character")
    try:
        if not path.exists():
            raise KubeconfigError(f"{what}: no such file")
        if not path.is_file():  # a directory, a FIFO (which would block), a device
            raise KubeconfigError(f"{what}: not a regular file")
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise KubeconfigError(f"{what}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_BYTES:
        raise KubeconfigError(f"{what}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
    return raw


def _named(data: dict[str, Any], key: str, what: str, name: str, label: str) -> dict[str, Any]:
    items = data.get(key) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"{label}: {key} must be a list")
    for item in items:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(what) or {}
            if not isinstance(value, dict):
                raise KubeconfigError(f"{label}: the {what} of {key[:-1]} {_q(name)} must be a mapping")
            return value
    raise KubeconfigError(f"{label} has no {what} named {_q(name)}")


def _server(cluster: dict[str, Any], where: str) -> str:
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"{where} has no server (clusters[].cluster.server, e.g. https://host:6443)")
    if not isinstance(server, str) or not server.isprintable():
        raise KubeconfigError(f"{where}: server must be a URL (e.g. https://host:6443)")
    try:
        parts = urllib.parse.urlsplit(server.strip())
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        raise KubeconfigError(f"{where}: server is not a URL (e.g. https://host:6443)") from None
    if parts.password:
        redact.register(parts.password)
    if parts.username is not None or parts.password is not None:
        raise KubeconfigError(
            f"{where}: server has a user name or password in it; put credentials in the kubeconfig's user"
        )
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise KubeconfigError(f"{where}: server must be an https:// (or http://) URL with a host")
    # client_config.go: the server loses its query and fragment.
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")


def _b64(value: Any, field_name: str, where: str) -> bytes:
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: {field_name} must be a base64 string")
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{where}: {field_name} is not valid base64") from None


def _path(base: Path, value: Any, field_name: str, where: str) -> Path:
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: {field_name} must be a path")
    p = _expand(Path(value), f"{where}: {field_name}")
    return p if p.is_absolute() else base / p


def _header_value(value: str, field_name: str, where: str) -> str:
    """A token as sent: whitespace around it stripped (a block scalar's newline, a file's), refused when a
    line break or control character is inside it (never sent, never quoted)."""
    value = value.strip()
    if not exec_credential.header_safe(value):
        raise KubeconfigError(
            f"{where}: {field_name} has a line break, control or non-ASCII character inside it "
            "(only whitespace around it is ignored)"
        )
    return value


def _static(user: dict[str, Any], base: Path, where: str) -> tuple[str, tuple[str, str] | None, bytes, bytes]:
    """The kubeconfig's own credential: (token, (username, password) or None, client cert PEM, key PEM)."""
    # Registered before anything is checked: whatever is wrong next, they are secrets.
    for secret_field in ("token", "password", "client-key-data"):
        redact.register(user.get(secret_field))
    env = user.get("exec", {}).get("env") if isinstance(user.get("exec"), dict) else None
    for entry in env if isinstance(env, list) else []:  # whether the plugin runs or not
        redact.register(entry.get("value") if isinstance(entry, dict) else None)
    if "auth-provider" in user:
        raise KubeconfigError(
            f"{where}: auth-provider credentials are not supported by gpupool; use an exec plugin, a token or a "
            "client certificate (for the drain, or set the pool's rollout.drain: false)"
        )
    token = user.get("token") or ""
    if not isinstance(token, str):
        raise KubeconfigError(f"{where}: token must be a string")
    if token:
        token = _header_value(token, "token", where)
    elif user.get("tokenFile"):
        path = _path(base, user["tokenFile"], "tokenFile", where)
        what = f"{where}: tokenFile {_shown_path(path)}"
        raw = redact.register(_read(path, what).decode("utf-8", errors="replace"))
        token = raw.strip()
        if not token:  # token_source.go: "read empty token from file"
            raise KubeconfigError(f"{what} is empty")
        token = _header_value(token, f"the token in tokenFile {_shown_path(path)}", where)
    basic = None
    username, password = user.get("username") or "", user.get("password") or ""
    if username or password:
        if not isinstance(username, str) or not isinstance(password, str):
            raise KubeconfigError(f"{where}: username and password must be strings")
        if token:
            raise KubeconfigError(
                f"{where} has both a token and a username/password; client-go refuses more than one "
                "authentication method: keep one"
            )
        if ":" in username or not (username + password).isprintable():
            raise KubeconfigError(
                f"{where}: username has a ':' or a control character, or password a control character"
            )
        basic = (username, password)
    cert = key = b""
    if user.get("client-certificate-data") or user.get("client-certificate"):
        cert = _material(user, "client-certificate", base, where)
        key = _material(user, "client-key", base, where)
        if not key:
            raise KubeconfigError(f"{where}: client-certificate needs client-key-data or client-key")
        redact.register(key)
    return token, basic, cert, key


def _material(user: dict[str, Any], key: str, base: Path, where: str) -> bytes:
    """client-certificate / client-key: the -data field (base64) wins over the file (client_config.go)."""
    if user.get(f"{key}-data"):
        return _b64(user[f"{key}-data"], f"{key}-data", where)
    if user.get(key):
        path = _path(base, user[key], key, where)
        raw = _read(path, f"{where}: {key} {_shown_path(path)}")
        return redact.register(raw) if key == "client-key" else raw
    return b""


def _tls(cluster: dict[str, Any], base: Path, in_cluster: str, cert: bytes, key: bytes, in_user: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    insecure = cluster.get("insecure-skip-tls-verify") is True
    if insecure and (cluster.get("certificate-authority-data") or cluster.get("certificate-authority")):
        # client-go (rest/transport.go): a root certificate with the insecure flag is not allowed.
        raise KubeconfigError(f"{in_cluster}: insecure-skip-tls-verify with a certificate-authority: keep one")
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        ca = _b64(cluster["certificate-authority-data"], "certificate-authority-data", in_cluster)
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError):
            raise KubeconfigError(
                f"{in_cluster}: certificate-authority-data is not a PEM certificate (base64 of -----BEGIN CERTIFICATE-----)"
            ) from None
    elif cluster.get("certificate-authority"):
        path = _path(base, cluster["certificate-authority"], "certificate-authority", in_cluster)
        what = f"{in_cluster}: certificate-authority {_shown_path(path)}"
        _read(path, what)
        try:
            ctx.load_verify_locations(cafile=str(path))
        except (ssl.SSLError, OSError, ValueError):
            raise KubeconfigError(f"{what} is not a PEM certificate") from None
    if cert:
        _client_certificate(ctx, cert, key, in_user)
    return ctx


def _client_certificate(ctx: ssl.SSLContext, cert: bytes, key: bytes, where: str) -> None:
    def no_passphrase() -> bytes:
        # An encrypted key would otherwise make OpenSSL prompt on the terminal; client-go cannot use one either.
        raise KubeconfigError(f"{where}: the client key is encrypted (passphrase-protected); use an unencrypted key")

    with tempfile.TemporaryDirectory() as tmp:  # ssl loads a client certificate from files only
        # Through the one writer (gpupool.safe_write), into the private temporary directory (mode 0700).
        with safe_write.Directory.open(Path(tmp)) as d:
            d.write_new("crt", cert)
            d.write_new("key", key)
        try:
            ctx.load_cert_chain(str(Path(tmp) / "crt"), str(Path(tmp) / "key"), password=no_passphrase)
        except KubeconfigError:
            raise
        except (ssl.SSLError, OSError, ValueError):
            raise KubeconfigError(
                f"{where}: the client certificate and key (client-certificate[-data], client-key[-data]) are "
                "not a PEM certificate and its matching private key"
            ) from None


def _cluster_info(cluster: dict[str, Any], server: str) -> dict[str, Any]:
    """What `provideClusterInfo: true` hands the plugin (client.authentication.k8s.io Cluster)."""
    out: dict[str, Any] = {"server": server}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url"):
        if cluster.get(key) is not None:
            out[key] = cluster[key]
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            out["config"] = ext.get("extension")
    return out


def _q(name: str) -> str:
    """A kubeconfig entry's name as messages show it: quoted, unprintable characters escaped, capped."""
    from gpupool.spec.diagnostics import printable

    name = printable(name)
    return repr(name if len(name) <= 100 else name[:100] + "…")


def _shown_path(path: Path) -> str:
    from gpupool.spec.diagnostics import printable

    return printable(str(path))
