"""What pulumi's failures and previews say, put in gpupool stacks' words: why a command failed (its signal or its
own error lines), the refused lock, what a convergence check still plans, what a drift read found."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping
from typing import Any

from pulumi import automation as auto


def unrunnable(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the pulumi CLI is no longer on PATH"
    return f"the pulumi CLI cannot be run: {exc.strerror or type(exc).__name__}"


PLANNED_SHOWN = 5  # the convergence check's planned steps named in its error, at most


def record_planned(event: Any, planned: list[str]) -> None:
    """A step the convergence check's preview plans (its resource pre-events, `same` and reads aside), as
    "op type name": what did not converge, named in the error rather than left to a second preview."""
    pre = getattr(event, "resource_pre_event", None)
    if pre is None:
        return
    meta = pre.metadata
    op = getattr(meta.op, "value", str(meta.op))
    if op in ("same", "read") or meta.type == "pulumi:pulumi:Stack":
        return
    planned.append(f"{op} {meta.type} {meta.urn.rsplit('::', 1)[-1]}")


def planned_note(planned: list[str]) -> str:
    if not planned:
        return ""
    more = len(planned) - PLANNED_SHOWN
    return " (" + "; ".join(planned[:PLANNED_SHOWN]) + (f"; and {more} more" if more > 0 else "") + ")"


def gone_hint(gone: int, stack: str) -> str:
    """Why a refreshed preview's plan can fail: it plans against the state, which still holds objects the drift read
    found gone from the cluster, and previewing an update of an object that is gone fails (not found)."""
    objects = f"{gone} object{'s' if gone != 1 else ''}"
    return (
        f"the drift read found {objects} gone from the cluster, and a change to an object that is gone cannot be "
        f"previewed; `gpupool stacks up {stack}` reads the cluster first and recreates it with this change"
    )


def drift_note(changes: Mapping | None) -> str:
    """The drift a refresh preview found, for the outcome line: every object it would change in the state."""
    n = sum(k for op, k in counts(changes).items() if op != "same")
    return f"drift: {n} object{'s differ' if n != 1 else ' differs'} in the cluster" if n else "no drift"


def counts(changes: Mapping | None) -> dict[str, int]:
    return {str(getattr(k, "value", k)): int(n) for k, n in (changes or {}).items()}


# CommandError keeps only the text of its CommandResult (pulumi/automation/_cmd.py, CommandResult.__str__:
# "\n code: {code}\n stdout: {stdout}\n stderr: {stderr}").
_RESULT = re.compile(r"\A\s*code: (?P<code>-?\d+)\n stdout: (?P<stdout>.*)\n stderr: (?P<stderr>.*)\Z", re.S)


def result(exc: auto.CommandError) -> tuple[int | None, str, str]:
    m = _RESULT.match(str(exc))
    if m is None:
        return None, "", str(exc)
    return int(m.group("code")), m.group("stdout"), m.group("stderr")


# What the engine prints whenever it stops a program, whatever stopped it (pulumi's resource monitor shutting down).
GENERIC_ERRORS = frozenset({"error: Resource monitor has terminated, shutting down"})


def reason(exc: auto.CommandError, op: str = "") -> str:
    """Why a pulumi command failed: the signal that killed it, else its last error lines (stderr, else stdout)."""
    code, stdout, stderr = result(exc)
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"pulumi {op or 'command'} was killed by {name}"
    text = stderr or stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # The engine's own error lines, from stderr and stdout (a failed step's diagnostic is printed on stdout), in
    # order and once each; the line every stopped program ends with says nothing of why.
    found = [ln.strip() for ln in f"{stderr}\n{stdout}".splitlines() if ln.strip().startswith("error:")]
    errors = [ln for ln in dict.fromkeys(found) if ln not in GENERIC_ERRORS] or lines[-3:]
    said = " / ".join(errors[-3:])[:2000]
    # pkg/secrets/passphrase/manager.go: ErrIncorrectPassphrase ("incorrect passphrase"), and readPassphrase's
    # "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE ..."
    if "incorrect passphrase" in text:
        return (
            "the stack's secrets do not open with PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE): "
            f"set the passphrase the stack was created with (pulumi: {said or 'incorrect passphrase'})"
        )
    if "passphrase must be set" in text:
        return (
            "the stack's secrets are encrypted with a passphrase: set PULUMI_CONFIG_PASSPHRASE or "
            "PULUMI_CONFIG_PASSPHRASE_FILE"
        )
    return said


def locked(exc: auto.CommandError) -> str:
    """The engine's own words for a refused lock ("the stack is currently locked by N lock(s)")."""
    _, _, stderr = result(exc)
    m = re.search(r"the stack is currently locked by \d+ lock\(s\)", stderr or str(exc))
    return m.group(0) if m else "the stack is locked"


def unknown_stack(name: str, backend_url: str, list_stacks: Callable[[], Any]) -> str:
    """Why NAME cannot be destroyed: it is not in the backend; which stacks are (LIST_STACKS: the workspace's)."""
    from gpupool import redact
    from gpupool.spec.diagnostics import printable

    where = f"no stack {printable(name)} in {redact.url_for_display(backend_url)}"
    try:
        names = sorted(printable(s.name) for s in list_stacks())
    except (auto.CommandError, OSError, ValueError, KeyError, TypeError):
        return f"{where}; nothing was created or destroyed"
    there = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return f"{where}; stacks there: {there or '(none)'}; nothing was created or destroyed"
