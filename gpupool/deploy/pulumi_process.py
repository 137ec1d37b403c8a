"""The pulumi CLI as a child that an interrupt stops whole: SIGINT (pulumi's graceful cancel), then SIGTERM.

The Automation API's PulumiCommand.run (pulumi/automation/_cmd.py) reads pulumi's output on two threads
inside `with Popen(...)`; on Ctrl-C, Popen.__exit__ closes the pipes under those threads (a traceback from
each) and returns after a quarter second, and pulumi, its language host and its providers go on running.
PulumiCommand here runs the same command the same way, except that the readers are daemon threads that
end at EOF, and a KeyboardInterrupt stops the child and its descendants before it propagates (stop()).

pulumi stays in gpupool's process group, as before: whatever signals the run's group (a CI runner, the
end-to-end tests' freeze and kill) reaches pulumi and its plugins too. So stop() signals processes, not the
group: pulumi, then its descendants read from /proc (the plugins, whichever group they are in). SIGINT goes
to pulumi only when it cannot have had it already: a Ctrl-C at a terminal reaches the whole foreground
group, and a second SIGINT makes pulumi terminate at once instead of cancelling (inferred from pulumi's
"press ^C again" behaviour).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping

from pulumi import automation as auto
from pulumi.automation.errors import create_command_error

# SIGINT is pulumi's graceful cancel (it asks the engine to stop and waits for operations in flight); the
# waits are bounded so that an interrupted run always ends.
INTERRUPT_GRACE = 20.0
TERM_GRACE = 5.0


class PulumiCommand(auto.PulumiCommand):
    """auto.PulumiCommand whose run() leaves no process behind when it is interrupted."""

    interrupt_grace = INTERRUPT_GRACE
    term_grace = TERM_GRACE

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: auto.OnOutput | None = None,
        on_error: auto.OnOutput | None = None,
    ) -> auto.CommandResult:
        # As PulumiCommand.run: non-interactive before any "--", the Automation API's marker.
        sep = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:sep]:
            args.insert(0, "--non-interactive")
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(self.command):  # as _cmd._fixup_path: the CLI's own directory first on PATH
            env["PATH"] = os.pathsep.join((os.path.dirname(self.command), env.get("PATH", "")))
        out: list[str] = []
        err: list[str] = []
        process = subprocess.Popen(
            [self.command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            encoding="utf-8",
            errors="replace",
        )
        readers = [
            threading.Thread(target=_consume, args=(process.stdout, on_output, out), daemon=True),
            threading.Thread(target=_consume, args=(process.stderr, on_error, err), daemon=True),
        ]
        try:
            for t in readers:
                t.start()
            for t in readers:
                t.join()
            code = process.wait()
        except BaseException:  # KeyboardInterrupt above all: nothing of pulumi's may outlive us
            stop(process, self.interrupt_grace, self.term_grace)
            raise
        result = auto.CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=code)
        if code != 0:
            raise create_command_error(result)
        return result


def _consume(stream, callback, chunks: list[str]) -> None:
    try:
        for line in iter(stream.readline, ""):
            line = line.rstrip()
            if callback:
                try:
                    callback(line)
                except Exception:  # noqa: BLE001 - e.g. a closed stderr: keep draining, or pulumi blocks on a full pipe
                    callback = None
            chunks.append(line)
    except (OSError, ValueError):
        pass  # the pipe went away with the child
    finally:
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def stop(process: subprocess.Popen, interrupt_grace: float, term_grace: float) -> None:
    """Stop PROCESS and its descendants: SIGINT to PROCESS (unless a terminal's Ctrl-C gave it one already),
    at most INTERRUPT_GRACE seconds for it to cancel, then SIGTERM to it and every descendant left, at most
    TERM_GRACE, then SIGKILL. Another interrupt meanwhile (Ctrl-C again) skips to the next step instead of
    leaving the processes running."""
    pressed: list[int] = []
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda *_: pressed.append(1))
    try:
        family = {pid: _started(pid) for pid in descendants(process.pid)}
        if not _terminal_interrupted_group():
            _signal(process, signal.SIGINT)
        for sig, grace in ((signal.SIGTERM, interrupt_grace), (signal.SIGKILL, term_grace)):
            if _wait(process, family, grace, pressed):
                return
            _signal(process, sig)
            for pid, started in family.items():
                if started is not None and _started(pid) == started:  # still that process, not a reused pid
                    _signal_pid(pid, sig)
        _wait(process, family, term_grace, [])
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _terminal_interrupted_group() -> bool:
    """Whether gpupool is the foreground process group of its terminal: a SIGINT is then a Ctrl-C, which
    the terminal sent the whole group, pulumi included."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return True
        except OSError:
            continue
    return False


def _wait(process: subprocess.Popen, family: Mapping[int, int | None], grace: float, pressed: list[int]) -> bool:
    """Whether PROCESS and FAMILY are gone within GRACE seconds (reaping PROCESS); False at once when
    PRESSED gets an entry (another interrupt)."""
    deadline = time.monotonic() + grace
    while True:
        try:
            process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
        if process.returncode is not None and not any(_alive(p) for p in family):
            return True
        if pressed:
            pressed.clear()
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def descendants(root: int) -> set[int]:
    """The processes below ROOT, from /proc (empty where there is no /proc)."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if entry.isdigit():
            ppid = _ppid(int(entry))
            if ppid is not None:
                parents[int(entry)] = ppid
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def _started(pid: int) -> int | None:
    """PID's start time (clock ticks after boot, /proc/PID/stat field 22): tells a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Whether PID still runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True


def _signal(process: subprocess.Popen, sig: int) -> None:
    if process.returncode is None:  # not reaped: its pid is still its own
        try:
            process.send_signal(sig)
        except OSError:
            pass  # gone already


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
