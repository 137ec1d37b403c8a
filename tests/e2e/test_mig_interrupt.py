"""A MIG re-layout interrupted at each of its steps, then run once more: `gpupool stacks up` as a user runs it
(tests/e2e/cli.py), the MIG Manager simulator (tests/e2e/mig_manager_sim.py) with its pods as API objects.

Each case edits the layout, starts `gpupool stacks up`, and interrupts it when the node reaches one step of its
chain (gpupool.k8s.rollout): cordoned (before the mig step), its MIG Manager pod restarted and its start-up run
under way, relabelled while MIG Manager applies the new layout. The interrupt is SIGKILL of gpupool's whole
process group (a cancelled CI job) or SIGINT of gpupool (Ctrl-C). Then one `gpupool stacks up`, with no
other step, must exit 0 (its convergence check included) with the node on the new layout, `success`,
uncordoned and recorded. MIG Manager reacts to a changed label only (mig-parted v0.15.0 main.go 572-577), so a
rerun that merely re-applied the label would wait for ever; the mig step restarts the node's MIG Manager
instead (gpupool.k8s.mig_step).
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time

import pytest

from .cli import CliProject
from .mig_manager_sim import MIG_CONFIG, STATE, MigManagerSim

pytestmark = pytest.mark.e2e

NODE = "intr-1"
PRESETS = ("all-balanced", "all-1g.10gb")
SPEC = textwrap.dedent(f"""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {{name: intr, gpuOperator: {{namespace: gpu-operator}}}}
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 2
        nodes: [{NODE}]
        rollout: {{nodeTimeoutSeconds: 120}}
        sharing: {{mig: {{preset: all-balanced}}}}
    tiers: [{{name: batch, priority: 1000}}]
    tenants:
      - {{name: team-i, tier: batch, gpus: {{nvidia.com/mig-1g.10gb: 2}}, owners: [team-i]}}
    """)


@pytest.fixture(scope="module")
def project(private_control_plane, toolchain_bin, tmp_path_factory):
    cp = private_control_plane
    cp.create_gpu_node(NODE, {"nvidia.com/mig-1g.10gb": "4"})
    p = CliProject(toolchain_bin, cp.kubeconfig, tmp_path_factory.mktemp("gpupool-intr"), spec="intr/spec.yaml")
    p.write("intr/spec.yaml", SPEC)
    first = p.run("up")
    assert first.returncode == 0, first.stdout[-3000:] + _planned(p)
    return p


def _planned(p) -> str:
    """What a preview still plans (for a failure's message)."""
    out = subprocess.run(
        [*p._argv("preview"), "--refresh"], cwd=p.dir, env=p.env, text=True, capture_output=True, timeout=600
    )
    return "\n--- preview --refresh:\n" + (out.stdout + out.stderr)[-6000:]


def _labels(cp) -> dict:
    return cp.get_json("node", NODE)["metadata"].get("labels", {})


def _cordoned(cp) -> bool:
    return bool(cp.get_json("node", NODE).get("spec", {}).get("unschedulable"))


def _interrupt(p, how: str) -> None:
    if how == "SIGKILL":
        os.killpg(p.pid, signal.SIGKILL)  # gpupool, pulumi and its plugins: nothing gets to clean up
    else:
        p.send_signal(signal.SIGINT)  # Ctrl-C of gpupool (it stops pulumi as a terminal's Ctrl-C would)
    p.wait(timeout=180)


@pytest.mark.parametrize(
    ("step", "how"),
    [("cordoned", "SIGKILL"), ("sim:started", "SIGINT"), ("config=", "SIGKILL")],
    ids=["at-the-cordon", "during-the-start-up-run", "while-mig-manager-applies"],
)
def test_an_interrupted_relayout_finishes_with_one_rerun_and_no_person(project, private_control_plane, step, how):
    """Proves: after an interrupt at STEP, one `gpupool stacks up` exits 0 (converged) with the node on the new
    layout, `success`, uncordoned and recorded as checked, without anyone restarting MIG Manager."""
    cp = private_control_plane
    old = _labels(cp).get(MIG_CONFIG)
    current = next(p for p in PRESETS if old and old.endswith(p))
    target = next(p for p in PRESETS if p != current)
    new = f"a100-80gb-{target}"
    if _labels(cp).get(STATE) != "success":  # the first up found no MIG Manager: it applies the label on start
        cp.api(
            "PATCH",
            f"/api/v1/nodes/{NODE}",
            {"metadata": {"labels": {STATE: "success"}}},
            content_type="application/merge-patch+json",
        )
    with MigManagerSim(cp, (NODE,), pending_delay=2.0, apply_delay=3.0, restart_delay=1.0) as sim:
        project.edit("intr/spec.yaml", f"preset: {current}", f"preset: {target}")
        t0 = sim.now()
        run = project.start("up")
        what = f"config={new}" if step == "config=" else step
        deadline = time.monotonic() + 300
        while sim.first(NODE, what, t0) is None:
            assert run.poll() is None, f"the up ended before {what}: " + project.output(run)[-3000:]
            assert time.monotonic() < deadline, f"{what} never came: {sim.timeline(t0)}"
            time.sleep(0.1)
        _interrupt(run, how)
        assert run.returncode != 0, project.output(run)[-2000:]
        rerun = project.run("up", timeout=600)
        assert rerun.returncode == 0, rerun.stdout[-4000:] + _planned(project)
        time.sleep(0.5)
    labels = _labels(cp)
    assert labels[MIG_CONFIG] == new and labels[STATE] == "success", (labels, sim.timeline(t0))
    assert labels["gpupool.dev/mig-config-checked"] == new and not _cordoned(cp)
    assert sim.gpus[NODE] == sim.configs()[new]
