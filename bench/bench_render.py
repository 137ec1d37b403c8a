"""Time `gpupool render` of a 1,000-tenant spec against dumping the same objects with PyYAML's C dumper.

Run: PYTHONPATH=. python bench/bench_render.py [--tenants 1000] [--pools 60] [--runs 5] [--keep DIR]
                                               [--out /dev/shm]

The spec is bench_program.generate_spec's (the same one bench/bench_program.py times). Four measurements,
best of N each (samples interleaved), every sample writing into a fresh empty directory:

  render, in-process     gpupool.cli.main(["render", SPEC, "--output-dir", DIR]): load + validate the spec, build the
                         objects, dump each to YAML, write one file per object (imports paid beforehand)
  baseline, in-process   the same manifest dicts (precomputed from manifests.build), one file per object,
                         each `yaml.dump(manifest, Dumper=yaml.CSafeDumper, sort_keys=False)`
  render, subprocess     `python -m gpupool render SPEC --output-dir DIR`, wall clock including interpreter start
  baseline, subprocess   `python -c ...` that unpickles the manifest dicts and dumps them as above

The two ratios are render / baseline for each pair; a breakdown of the in-process render follows.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_program import generate_spec  # noqa: E402

BASELINE_SCRIPT = """
import pickle, sys, yaml
from pathlib import Path
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
with open(sys.argv[1], "rb") as f:
    objects = pickle.load(f)
for name, manifest in objects:
    (out / name).write_text(yaml.dump(manifest, Dumper=yaml.CSafeDumper, sort_keys=False))
"""


def dump_baseline(objects: list[tuple[str, dict]], out: Path) -> None:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    for name, manifest in objects:
        (out / name).write_text(yaml.dump(manifest, Dumper=yaml.CSafeDumper, sort_keys=False))


def interleaved(fns: dict, runs: int, scratch: Path) -> dict[str, list[float]]:
    """Wall times of each fn(empty_dir), runs rounds of one sample each (so load drift hits all alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(runs):
        for key, fn in fns.items():
            out = scratch / f"out-{i}"
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            fn(out)
            times[key].append(time.perf_counter() - t)
            shutil.rmtree(out, ignore_errors=True)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=60)
    ap.add_argument("--runs", type=int, default=5, help="samples per measurement (best of N); at least 3")
    ap.add_argument("--keep", metavar="DIR", help="write the generated spec here and keep it")
    ap.add_argument(
        "--out",
        metavar="DIR",
        help="where the rendered files go (default: a temp dir; /dev/shm takes disk noise out of the comparison)",
    )
    args = ap.parse_args()
    runs = max(3, args.runs)

    tmp = tempfile.TemporaryDirectory(prefix="gpupool-bench-render-")
    scratch = Path(tmp.name)
    directory = Path(args.keep) if args.keep else scratch / "spec"
    spec = generate_spec(directory, tenants=args.tenants, pools=args.pools)

    from gpupool.cli import main as cli
    from gpupool.cli import render as _render_cmd  # noqa: F401  (imported before the clock)
    from gpupool.k8s import manifests, render
    from gpupool.rules.engine import validate_file

    result = validate_file(spec)
    if result.spec is None:
        sys.exit("generated spec is invalid")
    plan = manifests.build(result.spec)
    objects = [(render.file_name(o), o.manifest) for o in plan.objects]
    pickled = scratch / "objects.pickle"
    pickled.write_bytes(pickle.dumps(objects))
    out_root = Path(tempfile.mkdtemp(prefix="gpupool-bench-out-", dir=args.out))

    def render_in_process(out: Path) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(["render", str(spec), "--output-dir", str(out)])
        assert rc in (0, None), rc

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def render_subprocess(out: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "gpupool", "render", str(spec), "--output-dir", str(out)],
            check=True,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )

    def baseline_subprocess(out: Path) -> None:
        subprocess.run([sys.executable, "-c", BASELINE_SCRIPT, str(pickled), str(out)], check=True, env=env)

    times = interleaved(
        {
            "render": render_in_process,
            "baseline": lambda out: dump_baseline(objects, out),
            "render-sub": render_subprocess,
            "baseline-sub": baseline_subprocess,
        },
        runs,
        out_root,
    )
    (r_in, r_in_all), (b_in, b_in_all), (r_sub, r_sub_all), (b_sub, b_sub_all) = ((min(v), v) for v in times.values())

    # Breakdown of the in-process render (best of N per step).
    steps = {"load+validate": [], "build": [], "dump YAML": [], "write files": []}
    for i in range(runs):
        out = out_root / f"steps-{i}"
        t0 = time.perf_counter()
        res = validate_file(spec)
        t1 = time.perf_counter()
        p = manifests.build(res.spec)
        t2 = time.perf_counter()
        docs = render.render_documents(p)
        t3 = time.perf_counter()
        out.mkdir()
        for name, text in sorted(docs.items()):
            (out / name).write_text(text)
        t4 = time.perf_counter()
        shutil.rmtree(out)
        for key, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            steps[key].append(dt)

    ms = lambda xs: ", ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    print(
        f"spec: {spec} ({args.tenants} tenants, {args.pools} pools): {len(objects)} objects, one file each; "
        f"best of {runs}"
    )
    print(f"render, in-process    {r_in * 1000:8.1f} ms   (all: {ms(r_in_all)})")
    print(f"C dumper, in-process  {b_in * 1000:8.1f} ms   (all: {ms(b_in_all)})")
    print(f"  ratio {r_in / b_in:.2f}x")
    print(f"render, subprocess    {r_sub * 1000:8.1f} ms   (all: {ms(r_sub_all)})")
    print(f"C dumper, subprocess  {b_sub * 1000:8.1f} ms   (all: {ms(b_sub_all)})")
    print(f"  ratio {r_sub / b_sub:.2f}x")
    print(
        "render breakdown (in-process, best of N per step): "
        + " + ".join(f"{k} {min(v) * 1000:.1f} ms" for k, v in steps.items())
    )
    shutil.rmtree(out_root, ignore_errors=True)
    tmp.cleanup()


if __name__ == "__main__":
    main()
