"""What a dead run (a cancelled or timed-out job, SIGKILL, a lost machine) leaves behind, and how the next
run clears it without a person: a stale lock, a torn metadata sidecar of the file backend, and pending
operations the rerun has since carried out. Pure functions over text and JSON; the stack runner calls them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

# `pulumi` names each lock in the error it refuses an update with (pkg/backend/diy/lock.go):
# "... created by USER@HOST (pid PID) at TIMESTAMP".
_HOLDER = re.compile(r"created by (?P<who>\S+) \(pid (?P<pid>\d+)\) at (?P<ts>\S+)")


@dataclass(frozen=True)
class LockHolder:
    user: str
    host: str
    pid: int
    timestamp: str

    def __str__(self) -> str:
        return f"{self.user}@{self.host} (pid {self.pid}) at {self.timestamp}"


def lock_holders(error_text: str) -> list[LockHolder]:
    """The holders a ConcurrentUpdateError names (the diy backends: file, s3, gs, azblob)."""
    out = []
    for m in _HOLDER.finditer(error_text):
        user, _, host = m.group("who").rpartition("@")
        out.append(LockHolder(user, host, int(m.group("pid")), m.group("ts")))
    return out


def _started_at(pid: int) -> float | None:
    """When PID started (seconds since the epoch), from /proc; None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _exited(pid: int) -> bool:
    """PID has exited and only waits to be reaped (a zombie, `Z`, or `X`): it holds nothing any more. A killed
    run's pulumi stays one until its new parent reaps it, which some containers' init never does."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        p = subprocess.run(["ps", "-o", "comm=", "-p", str(pid)], capture_output=True, text=True)
        return p.stdout.strip()


def _epoch(timestamp: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def holder_is_dead(holder: LockHolder, single_writer: bool, hostname: str | None = None) -> bool:
    """Is the run that took this lock gone?

    On this host: its pid is gone or a zombie, or the pid now belongs to a program other than pulumi, or to one that
    started after the lock was taken (the pid was reused). On another host nobody here can tell; only
    the caller can vouch (SINGLE_WRITER: a concurrency group guarantees one run per stack, so a lock met
    at the start can only be a dead run's)."""
    if holder.host != (hostname or socket.gethostname()):
        return single_writer
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, someone else's
    if _exited(holder.pid) or _command(holder.pid) != "pulumi":
        return True
    started, taken = _started_at(holder.pid), _epoch(holder.timestamp)
    return started is not None and taken is not None and started > taken + 1


def file_backend_dir(backend_url: str) -> Path | None:
    """The directory of a file:// backend URL (`~` expanded, the query dropped), else None."""
    if not backend_url.startswith("file://"):
        return None
    path = unquote(urlsplit(backend_url).path) if not backend_url.startswith("file://~") else backend_url[7:]
    path = path.split("?", 1)[0]
    return Path(os.path.expanduser(path))


SIDECAR = ".attrs"
# A sidecar holds a few hundred bytes of JSON (gocloud.dev/blob/fileblob attrs.go, setAttrs); anything larger
# is not one, and is left alone unread.
SIDECAR_LIMIT = 64 << 10


def repair_torn_sidecars(backend_url: str, warn: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the torn `*.attrs` sidecars of a file backend, which a writer killed between truncating and
    rewriting one leaves (every command then fails with "failed to load checkpoint: EOF"). Returns what
    was removed.

    A sidecar holds only content-type metadata, and a missing sidecar is valid, so removing a torn one loses
    nothing. Only what is proven to be one is removed: a regular file `NAME.attrs` under the backend's
    `.pulumi` whose blob NAME is a regular file beside it (fileblob writes the sidecar, then renames the blob
    into place: gocloud.dev/blob/fileblob/fileblob.go, writerWithSidecar.Close), whose content is not a JSON
    object, and which still holds what was read when it is unlinked (safe_write.Directory.remove_proven).
    No link is followed at any component, from `/` to the sidecar (safe_write.Directory): a link at the
    backend directory or at `.pulumi` stops the repair; a link below is not entered. Either way WARN gets
    one line saying so, and nothing is removed through a link."""
    from gpupool import safe_write
    from gpupool.spec.diagnostics import printable

    root = file_backend_dir(backend_url)
    if root is None:
        return []
    say = warn or (lambda _line: None)
    skipped = "not repairing torn metadata sidecars: {}"
    try:
        backend = safe_write.Directory.open(root)
    except safe_write.Refused as exc:
        if exc.reason != safe_write.reason(FileNotFoundError(errno.ENOENT, "")):
            say(skipped.format(printable(_refusal(exc))))
        return []  # a backend directory that does not exist yet has nothing to repair
    removed: list[Path] = []
    links: list[str] = []
    with backend:
        kind = backend.kind(".pulumi")
        if kind == "link":
            say(skipped.format(printable(f"{root / '.pulumi'}: {_LINK}")))
        if kind != "dir":
            return []
        try:
            for rel, entry in backend.walk(".pulumi"):
                if entry == "link":
                    links.append(rel)
                elif entry == "file" and rel.endswith(SIDECAR):
                    torn = _torn_sidecar(backend, rel)
                    if torn is not None and backend.remove_proven(rel, [safe_write.digest(torn)]):
                        removed.append(root / rel)
        except safe_write.Refused as exc:  # a directory swapped for a link while walking, say
            say(skipped.format(printable(_refusal(exc))))
    if links:
        shown = ", ".join(printable(str(root / r)) for r in links[:3])
        more = f" and {len(links) - 3} more" if len(links) > 3 else ""
        say(f"left alone {len(links)} symbolic link(s) in the state backend ({_LINK}): {shown}{more}")
    return removed


def _torn_sidecar(backend, rel: str) -> bytes | None:
    """The content of the sidecar REL when it is a torn one (its blob beside it, its content no JSON object
    as fileblob's getAttrs decodes it), else None."""
    from gpupool import safe_write

    blob = rel[: -len(SIDECAR)]
    if blob.endswith("/") or backend.kind(blob) != "file":
        return None  # a sidecar whose blob is missing breaks nothing (fileblob reads it only beside its blob)
    try:
        data = backend.read(rel, SIDECAR_LIMIT)
    except safe_write.Refused:
        return None
    if data is None:
        return None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is one
        return data
    return None if isinstance(parsed, dict) else data


_LINK = (
    "gpupool follows no link in the state backend; point PULUMI_BACKEND_URL at the real directory or remove the link"
)


def _refusal(exc) -> str:
    if "symbolic link" in exc.reason:
        return f"{exc.path}: {_LINK}"
    return str(exc)


def resolve_pending(deployment: dict) -> tuple[dict | None, list[str]]:
    """A dead run's pending operations that this run has since carried out (their resource is in the state)
    are stale: the deployment without them, or None when nothing changes. Those whose resource is not in
    the state are returned for a person (an object the dead run created that nothing manages now)."""
    pending = deployment.get("pending_operations") or []
    if not pending:
        return None, []
    urns = {r.get("urn") for r in deployment.get("resources") or []}
    unresolved = [op["resource"]["urn"] for op in pending if op.get("resource", {}).get("urn") not in urns]
    if unresolved:
        return None, unresolved
    return {**deployment, "pending_operations": []}, []
