"""A kubeconfig's exec credential plugin, run as client-go runs it (what EKS, GKE and AKS kubeconfigs use).

Upstream, kubernetes/client-go (master, 2026-07), read for this module:
- tools/clientcmd/validation.go, validateAuthInfo: `command` and `apiVersion` must be given, every env entry
  needs a name, and `interactiveMode` must be Never, IfAvailable or Always (required: empty is an error);
- tools/clientcmd/api/v1/defaults.go, SetDefaults_ExecConfig: an empty interactiveMode becomes IfAvailable
  for v1beta1 only ("require other versions to explicitly declare whether they want stdin or not");
- plugin/pkg/client/auth/exec/exec.go: the accepted versions are client.authentication.k8s.io/v1 and
  v1beta1 (`apiVersions`, newAuthenticator); the plugin gets the kubeconfig's env on top of ours and
  KUBERNETES_EXEC_INFO, an ExecCredential whose spec says whether it is interactive (refreshCredsLocked);
  `Always` without a terminal is an error (isInteractive); what it prints must decode as an ExecCredential
  of the configured version, with a status holding a token or a client certificate and key, both or neither
  (refreshCredsLocked); a missing command's error carries the kubeconfig's installHint (wrapCmdRunErrorLocked);
- tools/clientcmd/loader.go, GetAuthInfoFileReferences: a command with a path separator is relative to the
  kubeconfig's directory; a bare name is looked up on PATH.

gpupool never runs a plugin interactively (no terminal in a Pulumi provider, and none wanted in a render):
Never and IfAvailable run it with `interactive: false` and no stdin; Always is refused. client-go passes the
plugin's stderr to its own; gpupool captures it and, when the plugin fails, shows its last lines (its
"run `aws sso login`" hint) with control characters removed, every credential of the kubeconfig masked, and
the length capped. No message quotes what the plugin printed on stdout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpupool import redact

GROUP = "client.authentication.k8s.io"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1")
MODES = ("Never", "IfAvailable", "Always")
TIMEOUT = 60.0
STDERR_LINES = 5
STDERR_CHARS = 600
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|.)")


class PluginError(ValueError):
    """The plugin cannot give a credential; the message names no value (the caller adds where)."""


@dataclass(frozen=True)
class Credential:
    """What the plugin returned (repr shows nothing: it is a credential)."""

    token: str = field(default="", repr=False)
    cert_pem: bytes = field(default=b"", repr=False)
    key_pem: bytes = field(default=b"", repr=False)


def run(spec: Any, base: Path, cluster: dict[str, Any] | None = None, *, timeout: float = TIMEOUT) -> Credential:
    """Run the exec plugin SPEC (a kubeconfig user's `exec:`), relative commands resolved against BASE;
    CLUSTER is what `provideClusterInfo: true` hands it."""
    if not isinstance(spec, dict):
        raise PluginError("exec is not a mapping (command, apiVersion, args, env, interactiveMode)")
    env_values = _env(spec.get("env"))  # registered first: they are secrets whatever goes wrong next
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise PluginError("exec.command must be specified")
    version = spec.get("apiVersion")
    if not version:
        raise PluginError(f"exec.apiVersion must be specified ({' or '.join(API_VERSIONS)})")
    if version not in API_VERSIONS:
        raise PluginError(f"exec.apiVersion must be {' or '.join(API_VERSIONS)}, as client-go accepts")
    _interactive_mode(spec.get("interactiveMode"), version)
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise PluginError("exec.args must be a list of strings")
    if os.sep in command and not Path(command).is_absolute():
        command = str(base / command)
    info: dict[str, Any] = {"apiVersion": version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo") is True and cluster is not None:
        info["spec"]["cluster"] = cluster
    env = {**os.environ, **env_values, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    shown = _shown(command)
    try:
        done = subprocess.run([command, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        hint = spec.get("installHint")
        hint = f" ({tail(hint, [], lines=3)})" if isinstance(hint, str) and hint.strip() else ""
        raise PluginError(f"exec plugin {shown} was not found{hint}") from None
    except subprocess.TimeoutExpired:
        raise PluginError(f"exec plugin {shown} did not finish within {timeout:g}s") from None
    except OSError as exc:
        raise PluginError(f"exec plugin {shown} could not be run: {exc.strerror or type(exc).__name__}") from None
    if done.returncode != 0:
        said = tail(done.stderr.decode("utf-8", errors="replace"), list(env_values.values()))
        said = f"; its stderr ends: {said}" if said else " (it printed nothing on stderr)"
        raise PluginError(f"exec plugin {shown} exited {done.returncode}{said}")
    return _credential(done.stdout, version, shown)


def _env(entries: Any) -> dict[str, str]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise PluginError("exec.env must be a list of {name, value}")
    out: dict[str, str] = {}
    for i, entry in enumerate(entries):
        value = entry.get("value") if isinstance(entry, dict) else None
        redact.register(value)
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise PluginError(f"exec.env[{i}] needs a name (a variable name, no '=')")
        if not isinstance(value, str) or "\0" in value:
            raise PluginError(f"exec.env[{i}] ({_shown(name)}) needs a string value")
        out[name] = value
    return out


def _interactive_mode(mode: Any, version: str) -> None:
    if mode in (None, "") and version.endswith("/v1beta1"):
        return  # defaults.go: IfAvailable for v1beta1
    if mode in (None, ""):
        raise PluginError(
            f"exec.interactiveMode must be specified for apiVersion {version} (Never or IfAvailable; "
            "client-go requires it too)"
        )
    if mode == "Always":
        raise PluginError(
            "exec.interactiveMode is Always: the plugin needs a terminal to prompt on, and gpupool runs "
            "credential plugins without one; log in first (for example `aws sso login`) and set "
            "interactiveMode to IfAvailable or Never"
        )
    if mode not in MODES:
        raise PluginError(f"exec.interactiveMode must be one of {', '.join(MODES)}")


def _credential(stdout: bytes, version: str, shown: str) -> Credential:
    what = f"exec plugin {shown}"
    try:
        obj = json.loads(stdout)
    except (ValueError, RecursionError):
        raise PluginError(f"{what} printed no JSON ExecCredential on stdout") from None
    status = obj.get("status") if isinstance(obj, dict) else None
    if isinstance(status, dict):  # registered before anything is checked: whatever fails, they are secrets
        redact.register(status.get("token"))
        redact.register(status.get("clientKeyData"))
    if not isinstance(obj, dict):
        raise PluginError(f"{what} printed JSON that is not an object (an ExecCredential)")
    if obj.get("kind") != "ExecCredential":
        raise PluginError(f"{what} printed an object whose kind is not ExecCredential")
    if obj.get("apiVersion") != version:
        # exec.go: "exec plugin is configured to use API version %s, plugin returned version %s"
        raise PluginError(f"{what} printed an ExecCredential of another apiVersion than exec.apiVersion {version}")
    if not isinstance(status, dict):
        raise PluginError(f"{what} printed an ExecCredential without a status")
    token, cert, key = (status.get(k) or "" for k in ("token", "clientCertificateData", "clientKeyData"))
    if not all(isinstance(v, str) for v in (token, cert, key)):
        raise PluginError(f"{what}: status.token, clientCertificateData and clientKeyData must be strings")
    if not (token or cert or key):
        raise PluginError(f"{what} returned neither a token nor a client certificate and key")
    if bool(cert) != bool(key):
        raise PluginError(f"{what} returned only one of clientCertificateData and clientKeyData, not both")
    token = token.strip()
    if not header_safe(token):
        raise PluginError(f"{what} returned a status.token with a line break or control character inside it")
    return Credential(token, cert.encode(), key.encode())


def header_safe(value: str) -> bool:
    """VALUE can be sent in an HTTP header as is: printable ASCII (http.client refuses a line break in a
    header value, quoting the value in its error; Go's net/http refuses it too)."""
    return value.isascii() and value.isprintable()


def tail(text: str, secrets: list[str], *, lines: int = STDERR_LINES, limit: int = STDERR_CHARS) -> str:
    """The last LINES non-blank lines of TEXT on one line (` | ` between them): escape sequences and other
    control characters removed, SECRETS and every registered credential masked, at most LIMIT characters
    (the end kept: a hint comes last)."""
    text = _ANSI.sub("", text)
    kept = []
    for line in text.splitlines():
        line = "".join(c for c in line if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp"))
        line = " ".join(line.split())
        if line:
            kept.append(line)
    out = " | ".join(kept[-lines:])
    # Longest first, so that a secret containing another is masked whole; very short values are no secret
    # worth mangling a message for (redact.MIN_LENGTH).
    for secret in sorted({s.strip() for s in secrets if isinstance(s, str)}, key=len, reverse=True):
        if len(secret) >= 4:
            out = out.replace(secret, redact.MASK)
    out = redact.scrub(out)
    return out if len(out) <= limit else "…" + out[-(limit - 1) :]


def _shown(name: str) -> str:
    """A command or variable name as messages show it: quoted, escapes for anything unprintable, capped."""
    from gpupool.spec.diagnostics import printable

    name = printable(name)
    return repr(name if len(name) <= 200 else name[:200] + "…")
