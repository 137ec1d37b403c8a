"""What a dead run (a cancelled or timed-out job, SIGKILL, a lost machine) leaves behind, and how the next
run clears it without a person: a stale lock, a torn metadata sidecar of the file backend, and pending
operations the rerun has since carried out. Pure functions over text and JSON; the stack runner calls them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
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

    On this host: its pid is gone, or the pid now belongs to a program other than pulumi, or to one that
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
    if _command(holder.pid) != "pulumi":
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


def repair_torn_sidecars(backend_url: str) -> list[Path]:
    """Remove the empty or unparsable `*.attrs` sidecars of a file backend, which a writer killed between
    truncating and rewriting one leaves (every command then fails with "failed to load checkpoint: EOF").
    They hold only content-type metadata, and a missing sidecar is valid. Returns what was removed."""
    root = file_backend_dir(backend_url)
    if root is None or not (root / ".pulumi").is_dir():
        return []
    removed = []
    for sidecar in sorted((root / ".pulumi").rglob("*.attrs")):
        if sidecar.is_symlink() or not sidecar.is_file():
            continue  # never follow a link out of the backend
        try:
            json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            sidecar.unlink()
            removed.append(sidecar)
    return removed


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
