"""What "converged after a fault" means, shared by the fault-injection modules (test_crash_safety.py on the
file backend, test_s3_backend.py on an S3-compatible store), and the probes that time a fault."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
import yaml

from .cli import CliProject, cluster_objects, state_objects
from .cluster import ControlPlane

SPEC = "stacks/fault/spec.yaml"


def tenant_names(doc: dict) -> list[str]:
    return [t["name"] for t in doc["tenants"]]


def assert_converged(project: CliProject, cluster: ControlPlane, doc: dict, run) -> None:
    """The script's run succeeded (so its `preview --expect-no-changes` passed) and state == cluster."""
    assert run.returncode == 0, run.stdout[-6000:]
    deployment = project.export()
    assert not deployment["deployment"].get("pending_operations"), deployment["deployment"]["pending_operations"]
    urns = Counter(r["urn"] for r in deployment["deployment"]["resources"])
    assert not [u for u, n in urns.items() if n > 1], "duplicate resources in the state"
    in_state, in_cluster = Counter(state_objects(deployment)), Counter(cluster_objects(cluster))
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
