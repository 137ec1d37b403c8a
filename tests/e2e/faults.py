"""What "converged after a fault" means, shared by the fault-injection modules (test_crash_safety.py on the
file backend, test_s3_backend.py on an S3-compatible store, test_sharding.py), and :func:`fault_at`, which
triggers a fault at the API request it targets (tests/e2e/gate.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .cli import CliProject, cluster_objects, failed_run, pulumi_pid, state_objects
from .cluster import ControlPlane
from .gate import Gate, Held, Match, freeze, thaw

SPEC = "stacks/fault/spec.yaml"


def tenant_names(doc: dict) -> list[str]:
    return [t["name"] for t in doc["tenants"]]


def assert_converged(
    project: CliProject, cluster: ControlPlane, doc: dict, run, stacks: list[str] | None = None
) -> None:
    """The `gpupool stacks` run succeeded (so its `preview --expect-no-changes` passed) and state == cluster.
    STACKS: the platform's stacks (a sharded one's shards too), whose states together hold what is managed."""
    assert run.returncode == 0, failed_run(run)
    in_state: Counter = Counter()
    for stack in stacks or [None]:
        deployment = project.export(stack)
        assert not deployment["deployment"].get("pending_operations"), deployment["deployment"]["pending_operations"]
        urns = Counter(r["urn"] for r in deployment["deployment"].get("resources") or [])
        assert not [u for u, n in urns.items() if n > 1], "duplicate resources in the state"
        in_state.update(state_objects(deployment))
    in_cluster = Counter(cluster_objects(cluster))
    assert not [o for o, n in in_state.items() if n > 1], "an object is managed twice"
    assert in_state == in_cluster, {
        "only in cluster (orphans)": sorted(set(in_cluster) - set(in_state))[:20],
        "only in state (lost)": sorted(set(in_state) - set(in_cluster))[:20],
    }
    namespaces = {
        i["metadata"]["name"]: i["status"]["phase"] for i in cluster.get_json("namespaces", timeout=120)["items"]
    }
    quotas = {
        i["metadata"]["namespace"]
        for i in cluster.get_json("resourcequotas", "-A", "--field-selector", "metadata.name=gpu-quota", timeout=120)[
            "items"
        ]
    }
    lost = [t for t in tenant_names(doc) if namespaces.get(t) != "Active" or t not in quotas]
    assert not lost, f"tenants lost: {lost}"
    assert not project.lock_files(), project.lock_files()


def wait_for(predicate, timeout: float, what: str, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the up ended ({proc.returncode}) before {what}:\n{CliProject.output(proc)[-4000:]}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def count(cluster: ControlPlane, kind: str, pattern: str = "") -> int:
    p = cluster.kubectl(
        "get",
        kind,
        "-A",
        "-l",
        "app.kubernetes.io/managed-by=gpupool",
        "-o",
        "name",
        "--no-headers",
        check=False,
        timeout=60,
    )
    if p.returncode != 0:
        return 0
    return len(p.stdout.split()) if not pattern else len(re.findall(pattern, p.stdout))


def limit_ranges_with(cluster: ControlPlane, memory: str) -> int:
    p = cluster.kubectl(
        "get",
        "limitranges",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.spec.limits[0].defaultRequest.memory}{'\\n'}{end}",
        check=False,
        timeout=60,
    )
    return p.stdout.split().count(memory) if p.returncode == 0 else 0


def set_request_memory(project: CliProject, doc: dict, memory: str, spec: str = SPEC) -> None:
    """An update of every tenant's LimitRange (containerDefaults.requests.memory)."""
    for t in doc["tenants"]:
        t["containerDefaults"]["requests"]["memory"] = memory
    project.write(spec, yaml.safe_dump(doc, sort_keys=False, width=120))


# ---------------------------------------------------------------- faults at the request they target


def group_alive(pgid: int) -> list[int]:
    """The pids still in process group PGID (the run's: gpupool, pulumi, the language host, the provider)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(d.name))
    return pids


def kill_pulumi(proc: subprocess.Popen) -> None:
    """SIGKILL the pulumi CLI of the frozen run, then let the rest go on: gpupool sees pulumi die and
    exits, the plugins notice the dead engine and exit (the fault of a killed engine)."""
    pid = pulumi_pid(proc)
    assert pid, "no pulumi process to kill"
    os.kill(pid, signal.SIGKILL)
    thaw(proc.pid)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run's whole process group: gpupool, pulumi, host, provider (a cancelled CI job)."""
    os.killpg(proc.pid, signal.SIGKILL)


def fault_at(
    gate: Gate,
    proc: subprocess.Popen,
    match: Match,
    *,
    after: int = 0,
    what: str,
    point: Callable[[], bool] = lambda: True,
    land: Callable[[Held], bool] | None = None,
    action: Callable[[subprocess.Popen], None] = kill_pulumi,
    timeout: float = 600,
) -> Held:
    """Kill the run PROC at the API request it targets: the first request MATCH accepts after AFTER matching
    ones went through. At that request the run's process group is frozen (SIGSTOP) and POINT is asked
    whether the run is where the test says (for example, in `pulumi up` of the right stack); if not, the
    run goes on and the fault waits for the next matching request. At the point: if LAND is given, the
    held request is let through and LAND polled until its effect is visible; then ACTION kills the run
    (default: its pulumi CLI), every request the run sent after the point is refused, and the gate opens
    again once the run's processes are gone. Fails if the run ends before the point."""
    gate.arm(match, after)
    while True:
        held = gate.wait(timeout, proc)
        if held is None:
            gate.open()
            out = CliProject.output(proc) if hasattr(proc, "log") else ""
            pytest.fail(f"the run ended ({proc.poll()}) before {what}:\n{out[-4000:]}")
        freeze(proc.pid)
        if point():
            break
        thaw(proc.pid)
        gate.resume()
    if land is not None:
        gate.land(held)
        deadline = time.monotonic() + 60
        while not land(held):
            assert time.monotonic() < deadline, f"the landed request ({held}) had no effect"
            time.sleep(0.05)
    action(proc)
    gate.refuse()
    proc.wait(timeout=120)
    deadline = time.monotonic() + 120
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    gate.open()
    return held


def in_namespaces(resource: str, op: str | tuple[str, ...], namespaces) -> Match:
    """Requests for RESOURCE with operation OP in one of NAMESPACES."""
    ops = (op,) if isinstance(op, str) else op
    names = set(namespaces)
    return lambda h: h.resource == resource and h.op in ops and h.namespace in names


def writes(resource: str, op: str | tuple[str, ...]) -> Match:
    """Requests for RESOURCE with operation OP."""
    ops = (op,) if isinstance(op, str) else op
    return lambda h: h.resource == resource and h.op in ops
