"""bench/bench_mig_relayout.py at its smallest size, so the benchmark keeps working: a 2-node re-layout through the
real engine under the MIG Manager simulator, on its own control plane."""

from __future__ import annotations

import argparse

import pytest

from bench import bench_mig_relayout

pytestmark = pytest.mark.e2e


def test_the_relayout_benchmark_runs_and_restarts_each_node_once(toolchain_bin, monkeypatch):
    """Proves: the bench's figures come out, every node reached the new layout, and MIG Manager started once per
    node (its own pod, in its turn; no fleet-wide roll)."""
    monkeypatch.setenv("GPUPOOL_TOOLCHAIN_BIN", str(toolchain_bin))
    args = argparse.Namespace(
        nodes=2, at_once=1, restart_delay=0.5, pending_delay=0.2, apply_delay=0.3, code=None, json=None
    )
    figures = bench_mig_relayout.measure(args)
    assert figures["allSucceeded"] and figures["nodes"] == 2
    assert figures["migManagerStarts"] == 2
    assert figures["perNodeOutSeconds"]["max"] <= figures["totalSeconds"]
