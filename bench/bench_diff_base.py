"""Benchmark: `gpupool diff --base REF -o markdown` on a 1,000-tenant, 100-pool stack in a git repository,
one tenant file each, with one quota change per tenant in the working tree (the pull request the size
limit is about), against `gpupool validate` of the same HEAD spec.

    python bench/bench_diff_base.py [--repeats 3] [--tenants 1000] [--pools 100]

Both run as the CLI in a fresh interpreter (subprocess), best of N; the ratio is measured in one run, so
machine speed cancels out. diff --base validates both sides (the base materialised with git ls-tree +
cat-file --batch), builds both sides' objects, diffs them and formats the (cut) comment and the full diff.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_validate import generate  # noqa: E402


def write_stack(root: Path, doc: dict) -> Path:
    stack = root / "stacks" / "bench"
    tenants_dir = stack / "tenants"
    tenants_dir.mkdir(parents=True, exist_ok=True)
    spec = {k: v for k, v in doc.items() if k != "tenants"}
    spec["tenantFiles"] = ["tenants/"]
    (stack / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for t in doc["tenants"]:
        (tenants_dir / f"{t['name']}.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    return stack / "spec.yaml"


def best(cmd: list[str], cwd: Path, repeats: int, ok: tuple[int, ...]) -> tuple[float, subprocess.CompletedProcess]:
    times, r = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        assert r.returncode in ok, (cmd, r.returncode, r.stderr[-2000:])
    return min(times), r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    gpupool = [sys.executable, "-m", "gpupool"]
    with tempfile.TemporaryDirectory(prefix="gpupool-bench-diff-") as tmp:
        repo = Path(tmp)
        doc = generate(args.tenants, args.pools)
        spec = write_stack(repo, doc)
        git = ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "base"], cwd=repo, check=True)
        changed = 0
        for t in doc["tenants"]:  # one quota change per tenant: every tenant gives back one unit
            r = next((r for r, v in t["gpus"].items() if v > 1), None)
            if r:
                t["gpus"][r] -= 1
                changed += 1
        write_stack(repo, doc)
        rel = str(spec.relative_to(repo))
        t_validate, _ = best([*gpupool, "validate", rel, "-q"], repo, args.repeats, (0,))
        t_diff, r = best(
            [*gpupool, "diff", "--base", "HEAD", rel, "-o", "markdown", "--full-output", str(repo / "full.md")],
            repo,
            args.repeats,
            (0,),
        )
        comment, full = len(r.stdout), (repo / "full.md").stat().st_size
    print(
        f"stack: {args.tenants} tenant files, {args.pools} pools; {changed} tenants with a quota change; "
        f"best of {args.repeats}"
    )
    print(f"  gpupool validate HEAD                 {t_validate:6.2f} s   1.00x")
    print(
        f"  gpupool diff --base HEAD -o markdown  {t_diff:6.2f} s  {t_diff / t_validate:5.2f}x   "
        f"(comment {comment:,} chars, full diff {full:,} bytes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
