"""mig suggest is bounded: limits refuse impossible demands before solving, the answer's size does not grow
with the demand, HiGHS is imported only by suggest, and spec mode says when the optimum evicts workloads."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from gpupool.cli.main import main
from gpupool.gpu.mig import catalog
from gpupool.gpu.suggest import MAX_GPUS, DemandTooLarge, _nondominated, maximal_layouts, suggest, suggest_per_node

ROOT = Path(__file__).resolve().parents[1]
H100 = "H100-80GB"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_huge_demand_is_refused_before_the_solver_is_loaded():
    # 10^21 instances: refused from the resource bound alone (bigint arithmetic), highspy never imported.
    t = time.perf_counter()
    with pytest.raises(
        DemandTooLarge,
        match=r"about 10\^30 H100-80GB GPUs; no Kubernetes cluster holds more "
        r"than 320,000",
    ):
        suggest(H100, {"1g.10gb": 10**21, "7g.80gb": 10**30})
    assert time.perf_counter() - t < 1.0  # the bound; it takes microseconds
    r = _run(
        "import sys\nfrom gpupool.gpu.suggest import suggest\ntry:\n suggest('H100-80GB', {'1g.10gb': 10**21})\n"
        "except ValueError as e:\n print(type(e).__name__)\nprint('highspy' in sys.modules)"
    )
    assert r.stdout.split() == ["DemandTooLarge", "False"], r.stderr


def test_limit_is_the_cluster_bound():
    one_over = MAX_GPUS * 7 + 1  # 1g.10gb: 7 per GPU
    with pytest.raises(DemandTooLarge):
        suggest(H100, {"1g.10gb": one_over})
    s = suggest(H100, {"1g.10gb": MAX_GPUS * 7})
    assert s.optimal and s.gpus == MAX_GPUS and s.layouts == [({"1g.10gb": 7}, MAX_GPUS)]


def test_answer_size_does_not_grow_with_the_demand():
    """The same mix at 1x and 10,000x: at most one entry per non-dominated layout, and little Python memory."""
    m = catalog().models[H100]
    mix = {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1}
    names = [p for p in m.profiles if p in mix]
    columns = len(_nondominated([tuple(dict(L).get(p, 0) for p in names) for L in maximal_layouts(m)]))
    peaks = []
    for scale in (1, 10_000):
        demand = {p: n * scale for p, n in mix.items()}
        tracemalloc.start()
        s = suggest(m, demand)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert s.optimal and len(s.layouts) <= columns
        assert all(s.supplied[p] >= n for p, n in demand.items())
    assert peaks[1] < 2 * peaks[0] + 200_000, peaks  # one entry per GPU would be ~10^5 objects


def test_per_node_bisection_agrees_with_a_linear_scan():
    m = catalog().models[H100]
    demand = {"1g.10gb": 50, "3g.40gb": 13, "2g.20gb": 9}
    ns = suggest_per_node(m, demand, 4)
    nodes = max(1, -(-suggest(m, demand).gpus // 4))
    while suggest(m, {p: -(-n // nodes) for p, n in demand.items()}).gpus > 4:
        nodes += 1
    assert ns.nodes == nodes and ns.optimal


def test_only_suggest_imports_highspy():
    r = _run(
        "import sys\nfrom gpupool.cli.main import main\n"
        "main(['plan', 'stacks/prod/spec.yaml', '-o', 'json'])\n"
        "main(['mig', 'check', '--gpu', 'H100-80GB', 'all-balanced'])\n"
        "print('highspy' in sys.modules, file=sys.stderr)\n"
        "main(['mig', 'suggest', '--gpu', 'H100-80GB', '1g.10gb=3'])\n"
        "print('highspy' in sys.modules, file=sys.stderr)"
    )
    assert r.stderr.split()[-2:] == ["False", "True"], r.stderr


def _absurd_stack(tmp_path: Path) -> Path:
    stack = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks/dev", stack)
    spec = stack / "spec.yaml"
    spec.write_text(spec.read_text().replace("tenantFiles:", "oversubscription: {maxRatio: 1.0e+15}\ntenantFiles:"))
    t = stack / "tenants/notebooks.yaml"
    t.write_text(t.read_text().replace("nvidia.com/mig-1g.10gb: 6", "nvidia.com/mig-1g.10gb: 1000000000000000"))
    return spec


def test_spec_mode_absurd_oversubscription_is_a_clear_error(tmp_path, capsys):
    spec = _absurd_stack(tmp_path)
    assert main(["mig", "suggest", "--spec", str(spec), "--pool", "a100-mig"]) == 1
    err = capsys.readouterr().err
    assert "no Kubernetes cluster holds more than 320,000" in err and "Traceback" not in err


def test_spec_mode_says_the_relayout_evicts(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["mig", "suggest", "--stack", "prod", "--pool", "h100-infer"]) == 0
    out = capsys.readouterr().out
    assert "re-partitions pool h100-infer, which is in use" in out and "evicts every GPU workload" in out


def test_spec_mode_no_eviction_note_when_the_layout_stays(capsys, monkeypatch, tmp_path):
    # a pool whose layout already is the suggestion: same per-GPU layouts, nothing to evict
    stack = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks/dev", stack)
    t = stack / "tenants/inference.yaml"
    t.write_text(
        t.read_text()
        .replace("nvidia.com/mig-3g.40gb: 2", "nvidia.com/mig-3g.40gb: 4")
        .replace("nvidia.com/mig-2g.20gb: 2", "nvidia.com/mig-2g.20gb: 4")
    )
    n = stack / "tenants/notebooks.yaml"
    n.write_text(n.read_text().replace("nvidia.com/mig-1g.10gb: 6", "nvidia.com/mig-1g.10gb: 8"))
    assert main(["mig", "suggest", "--spec", str(stack / "spec.yaml"), "--pool", "a100-mig"]) == 0
    out = capsys.readouterr().out
    assert "as tight as the suggestion" in out and "evicts" not in out


def test_models_lists_mig_and_whole_gpu_models(capsys):
    assert main(["mig", "models"]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line and line.split()[1] in ("yes", "no")
    }
    assert rows["H100-80GB"] == "yes" and rows["L4"] == "no" and rows["L40S"] == "no"
    assert set(catalog().models) <= set(rows)
    assert "NVIDIA-L4" in out and "whole-GPU models" in out


def test_spec_mode_on_a_pool_without_mig_says_so(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["mig", "suggest", "--stack", "dev", "--pool", "l4-shared"]) == 2
    assert "pool 'l4-shared': L4 has no MIG" in capsys.readouterr().err


def test_identical_nodes_beyond_the_cluster_limit_are_flagged(capsys):
    assert main(["mig", "suggest", "--gpu", H100, "--gpus-per-node", "1", "1g.10gb=70000"]) == 0
    out = capsys.readouterr().out
    assert "10000 nodes" in out and "more than one Kubernetes cluster supports (5,000)" in out


def test_whole_gpu_aliases_are_one_model_in_the_plan(tmp_path):
    from gpupool.analysis import plan as planmod
    from gpupool.rules.engine import validate_file

    stack = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks/dev", stack)
    spec = stack / "spec.yaml"
    spec.write_text(spec.read_text().replace("gpu: L4\n", "gpu: nvidia-l4\n"))
    result = validate_file(spec)
    assert result.ok and not result.report.sorted()  # a known alias: no GP250 warning either
    assert {p.name: p.gpu_model for p in planmod.compute(result.spec).pools}["l4-shared"] == "L4"
