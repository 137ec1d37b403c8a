"""Time `gpupool.gpu.suggest.suggest` on ~1,000 GPUs' worth of random MIG demand (H100-80GB).

Run: PYTHONPATH=. python bench/bench_mig_suggest.py [--gpus 1000] [--runs 20] [--seed 1]
Prints the cold time (first call builds the model's maximal layouts), the warm median/max, and the
suggestion's GPU count against both lower bounds, so a regression in speed or quality is visible.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me"]
WEIGHTS = [40, 10, 20, 15, 6, 8, 1]


def random_demand(model, gpus: int, rng: random.Random) -> dict[str, int]:
    """Draw instances until they add up to `gpus` GPUs' worth of compute slices."""
    demand = {p: 0 for p in PROFILES}
    compute = 0
    while compute < gpus * model.compute_slices:
        p = rng.choices(PROFILES, WEIGHTS)[0]
        demand[p] += 1
        compute += model.profiles[p].compute
    return demand


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t0 = time.perf_counter()
    from gpupool.gpu import suggest as mig_suggest
    from gpupool.gpu.mig import catalog

    model = catalog().models["H100-80GB"]
    t_import = time.perf_counter() - t0

    rng = random.Random(args.seed)
    demands = [random_demand(model, args.gpus, rng) for _ in range(args.runs)]
    t = time.perf_counter()
    first = mig_suggest.suggest(model, demands[0])
    cold = time.perf_counter() - t
    times, gaps_lb, gaps_lp = [], [], []
    for d in demands:
        t = time.perf_counter()
        s = mig_suggest.suggest(model, d)
        times.append(time.perf_counter() - t)
        gaps_lb.append(s.gpus - s.lower_bound)
        gaps_lp.append(s.gpus - s.bound)
    print(f"import+catalog: {t_import:.4f}s")
    print(f"suggest, {args.gpus} GPUs' worth of demand on {model.name}, {args.runs} random mixes")
    print(
        f"  cold (incl. maximal layouts): {cold:.4f}s  -> {first.gpus} GPUs, lower bound {first.lower_bound}, "
        f"proven bound {first.bound}, {len(first.layouts)} distinct layouts"
    )
    print(f"  warm: median {statistics.median(times):.4f}s, max {max(times):.4f}s")
    print(
        f"  GPUs - lower bound: max {max(gaps_lb)}, mean {statistics.mean(gaps_lb):.2f}; "
        f"GPUs - proven bound: max {max(gaps_lp)} (0 = every answer proven optimal)"
    )


if __name__ == "__main__":
    main()
