"""The credentials `gpupool stacks` hands to pulumi, registered with gpupool.redact before any pulumi command runs,
so that pulumi's own error text cannot echo them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# The environment variables that hold a credential the pulumi CLI reads (the passphrase of the stack's
# secrets, the Pulumi Cloud token, the state backend's cloud credentials). Their values are registered with
# gpupool.redact before any pulumi command runs, so that pulumi's own error text cannot echo them.
SECRET_ENV = (
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_ACCESS_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "ARM_CLIENT_SECRET",
    "GOOGLE_CREDENTIALS",
)
# Query parameters of a backend URL that carry a credential rather than a setting (inferred: gocloud.dev's
# blob URL openers take settings such as region and endpoint there, and some deployments add keys or tokens).
_SECRET_PARAM = re.compile(r"(?i)(key|secret|token|password|passwd|signature|sig|credential|auth)")


def register_secrets(environ: Mapping[str, str]) -> None:
    """Register with gpupool.redact every credential `gpupool stacks` hands to pulumi: the values of
    SECRET_ENV, and the password and secret-looking query values of PULUMI_BACKEND_URL."""
    from urllib.parse import parse_qsl, urlsplit

    from gpupool import redact

    for name in SECRET_ENV:
        if environ.get(name):
            redact.register(environ[name])
    if environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):  # pulumi reads the passphrase from it, stripped
        redact.register(small_file(environ["PULUMI_CONFIG_PASSPHRASE_FILE"]))
    url = environ.get("PULUMI_BACKEND_URL", "")
    try:
        parts = urlsplit(url)
        redact.register(parts.password or "")
        for key, value in parse_qsl(parts.query):
            if _SECRET_PARAM.search(key):
                redact.register(value)
    except ValueError:
        pass  # not a URL; it is shown only through redact.url_for_display, which scrubs what it cannot parse


_SECRET_KEY = re.compile(r"(?i)(secret|token|password|passwd|passphrase|credential|private)")


def register_config_secrets(config: Mapping[str, str]) -> None:
    """Register with gpupool.redact the -c values that are credentials: a key that names one, or a
    kubeconfig given as contents rather than a path (it holds tokens or keys). They reach pulumi only in the
    run's private --config-file copy; this keeps pulumi's error text from echoing them."""
    from gpupool import redact

    for key, value in config.items():
        name = key.rsplit(":", 1)[-1]
        if _SECRET_KEY.search(name) or (name.lower() == "kubeconfig" and ("\n" in value or "{" in value)):
            redact.register(value)


def small_file(path: str, limit: int = 64 << 10) -> str:
    """The text of the regular file PATH (at most LIMIT bytes), or '' when it is anything else or unreadable:
    opened without blocking (a FIFO must not hang the run), then checked with fstat."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
