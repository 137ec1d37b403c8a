"""The fault gate (tests/e2e/gate.py) stops a client at exactly the request it targets, on the shared control
plane: a script creates LimitRanges one after another, the gate lets two through, the run is frozen and
killed at the third, and nothing after that point lands, whether the trigger is landed or refused. A
dry-run write (what the provider's diffs send) is never counted, and a point that is not the test's makes
the fault wait for the next matching request instead of firing."""

from __future__ import annotations

import subprocess

import pytest

from .faults import fault_at, in_namespaces, kill_group
from .gate import Gate

pytestmark = pytest.mark.e2e


def creator(cluster, namespace: str, n: int) -> subprocess.Popen:
    """A run in its own process group: a dry-run create, then N creates of lr-0 .. lr-(N-1), one at a time."""
    kubectl = f"{cluster.kubectl_bin} --kubeconfig {cluster.kubeconfig} -n {namespace}"
    lr = 'kubectl create -f - <<<\'{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "NAME"}, "spec": {"limits": [{"type": "Container", "default": {"memory": "1Mi"}}]}}\''
    steps = [lr.replace("kubectl", f"{kubectl} --dry-run=server").replace("NAME", "dry")]
    steps += [lr.replace("kubectl", kubectl).replace("NAME", f"lr-{i}") for i in range(n)]
    return subprocess.Popen(["bash", "-c", " && ".join(steps)], start_new_session=True)


def names(cluster, namespace: str) -> list[str]:
    items = cluster.get_json("limitranges", "-n", namespace)["items"]
    return sorted(i["metadata"]["name"] for i in items)


def test_the_run_is_killed_at_the_request_it_targets_and_nothing_after_it_lands(control_plane, namespace):
    with Gate(control_plane, ["limitranges"]) as gate:
        run = creator(control_plane, namespace, 5)
        held = fault_at(
            gate, run, in_namespaces("limitranges", "CREATE", [namespace]), after=2, what="lr-2", action=kill_group
        )
        assert (held.op, held.name, held.dry_run) == ("CREATE", "lr-2", False)
        assert run.returncode != 0
        assert names(control_plane, namespace) == ["lr-0", "lr-1"]


def test_a_landed_trigger_is_in_the_cluster_before_the_kill(control_plane, namespace):
    with Gate(control_plane, ["limitranges"]) as gate:
        run = creator(control_plane, namespace, 5)
        fault_at(
            gate,
            run,
            in_namespaces("limitranges", "CREATE", [namespace]),
            after=1,
            what="lr-1",
            land=lambda h: h.name in names(control_plane, namespace),
            action=kill_group,
        )
        assert names(control_plane, namespace) == ["lr-0", "lr-1"]


def test_a_point_that_is_not_the_test_s_waits_for_the_next_request(control_plane, namespace):
    with Gate(control_plane, ["limitranges"]) as gate:
        run = creator(control_plane, namespace, 5)
        asked = []

        def point() -> bool:  # the first two matching requests are "not the point"
            asked.append(1)
            return len(asked) > 2

        held = fault_at(
            gate, run, in_namespaces("limitranges", "CREATE", [namespace]), what="lr-2", point=point, action=kill_group
        )
        assert held.name == "lr-2" and len(asked) == 3
        assert names(control_plane, namespace) == ["lr-0", "lr-1"]
        # Open again once the run is dead: the next writes go through.
        control_plane.apply(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "after", "namespace": namespace},
                "spec": {"limits": [{"type": "Container", "default": {"memory": "1Mi"}}]},
            }
        )
        assert "after" in names(control_plane, namespace)
