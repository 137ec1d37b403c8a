"""Benchmark `gpupool plan`, `gpupool diff` and `mig suggest`, each as a ratio to loading the spec with PyYAML's C loader.

    PYTHONPATH=. python bench/bench_plan_diff.py [--tenants 1000] [--pools 100] [--repeats 5]

The spec (1,000 tenants, 100 pools) comes from bench/bench_validate.py's generator. HEAD for the diff changes
one quota, removes one tenant and doubles one pool's time-slicing replicas. Everything runs in-process, best of
N; the baseline, yaml.load(text, Loader=yaml.CSafeLoader) of the same spec file, is measured in the same run so
machine speed cancels out:
- plan (end to end): validate_file + plan.compute + the table formatter (what `gpupool plan` does);
- plan (compute only): plan.compute on the already-validated model;
- diff (end to end): validate both specs + diff.compute (incl. manifests.build and render of both) + text format;
- mig suggest: gpupool.gpu.suggest.suggest on 1,000 H100 GPUs' worth of random MIG demand.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_mig_suggest import random_demand  # noqa: E402
from bench_validate import generate  # noqa: E402


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def head_of(doc: dict) -> dict:
    head = copy.deepcopy(doc)
    tenants = head["tenants"]
    t = next(t for t in tenants if not t.get("offboarded") and any(v > 0 for v in t.get("gpus", {}).values()))
    r = next(r for r, v in t["gpus"].items() if v > 0)
    t["gpus"][r] -= 1  # a quota change
    head["tenants"] = [x for x in tenants if x["name"] != tenants[-1]["name"]]  # a removal
    pool = next(p for p in head["nodePools"] if "timeSlicing" in p.get("sharing", {}) and "mig" not in p["sharing"])
    pool["sharing"]["timeSlicing"]["replicas"] *= 2  # a device-plugin change (more capacity: stays valid)
    return head


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gpus", type=int, default=1000, help="GPUs' worth of MIG demand for mig suggest")
    args = ap.parse_args()

    from gpupool.analysis import diff as diffmod
    from gpupool.analysis import plan as planmod
    from gpupool.analysis.sides import load_side
    from gpupool.gpu.mig import catalog
    from gpupool.gpu.suggest import suggest
    from gpupool.present import diff as difffmt
    from gpupool.present import plan as planfmt
    from gpupool.rules.engine import validate_file

    with tempfile.TemporaryDirectory(prefix="gpupool-bench-") as tmp:
        base_doc = generate(args.tenants, args.pools)
        base_path, head_path = Path(tmp) / "base.yaml", Path(tmp) / "head.yaml"
        base_path.write_text(yaml.safe_dump(base_doc, sort_keys=False))
        head_path.write_text(yaml.safe_dump(head_of(base_doc), sort_keys=False))
        size = base_path.stat().st_size

        t_yaml, _ = best(lambda: yaml.load(base_path.read_text(), Loader=yaml.CSafeLoader), args.repeats)

        def plan_e2e():
            result = validate_file(base_path)
            assert result.spec is not None, [d.render() for d in result.report.sorted()][:5]
            return planfmt.format_table(planmod.compute(result.spec))

        t_plan, table = best(plan_e2e, args.repeats)
        spec = validate_file(base_path).spec
        t_plan_only, _ = best(lambda: planmod.compute(spec), args.repeats)

        def diff_e2e():
            base = load_side("BASE", base_path, str(base_path))
            head = load_side("HEAD", head_path, str(head_path))
            assert base.valid and head.valid
            d = diffmod.compute(base.spec, head.spec)
            return d, difffmt.format_text(base, head, d, True)

        t_diff, (d, _) = best(diff_e2e, args.repeats)

        model = catalog().models["H100-80GB"]
        demand = random_demand(model, args.gpus, random.Random(1))
        t_mig, s = best(lambda: suggest(model, demand), args.repeats)

    print(f"spec: {args.tenants} tenants, {args.pools} pools, {size / 1024:.0f} KiB; best of {args.repeats}")
    print(f"  baseline yaml.load(CSafeLoader)   {t_yaml * 1000:8.1f} ms   1.00x")
    print(f"  plan (validate+compute+table)     {t_plan * 1000:8.1f} ms  {t_plan / t_yaml:5.2f}x")
    print(f"  plan (compute only)               {t_plan_only * 1000:8.1f} ms  {t_plan_only / t_yaml:5.2f}x")
    print(
        f"  diff (2x validate+diff+text)      {t_diff * 1000:8.1f} ms  {t_diff / t_yaml:5.2f}x   "
        f"({len(d.tenants)} tenant changes, {len(d.plugin)} plugin keys, {len(d.objects)} objects)"
    )
    print(
        f"  mig suggest ({args.gpus} GPUs' demand)   {t_mig * 1000:8.1f} ms  {t_mig / t_yaml:5.2f}x   "
        f"({s.gpus} GPUs, lower bound {s.lower_bound})"
    )
    print(f"  table output: {len(table.splitlines())} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
