"""Benchmark: what each stack's program pays for the spec, validating it (before) against taking the model
`gpupool stacks` validated once (gpupool.deploy.validated_spec, issue 40 item 3).

Each side runs in a fresh interpreter, as a program does (the imports it needs count: validation imports the
rules and jsonschema, taking the model neither), alternately, best of N repeats of its CPU time (user + system);
the ratio is measured in one run, so machine speed cancels out. The spec is bench_validate's, in the layout users
have (the spec plus one file per tenant). The script checks that the model taken equals the one validated.

    python bench/bench_validated_spec.py [--tenants 1000] [--pools 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHILD = {
    "validate": "from gpupool.rules.engine import validate_file; assert validate_file(SPEC).spec is not None",
    "take": "from gpupool.deploy import validated_spec; from pathlib import Path; "
    "assert validated_spec.take(Path(SPEC)) is not None",
}


def cpu_seconds(code: str, spec: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", f"SPEC = {str(spec)!r}\n{code}"], check=True, cwd=REPO, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    import os

    from bench.bench_validate import generate, write_tenant_dir
    from gpupool.deploy import validated_spec
    from gpupool.rules.engine import validate_file

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "stacks").mkdir()
        spec = write_tenant_dir(project / "stacks", generate(args.tenants, args.pools))
        result = validate_file(str(spec))
        offered = validated_spec.offer(project, spec, result)
        if offered is None:
            raise SystemExit("the validated spec could not be offered")
        try:
            taken = validated_spec.take(spec, offered.env)
            if taken is None or taken[0] != result.spec:
                raise SystemExit("the model taken differs from the one validated")
            env = {**os.environ, **offered.env, "PYTHONPATH": str(REPO)}
            best = {side: float("inf") for side in CHILD}
            for _ in range(args.repeats):
                for side, code in CHILD.items():
                    best[side] = min(best[side], cpu_seconds(code, spec, env))
        finally:
            offered.withdraw()
    ratio = best["take"] / best["validate"]
    print(f"{args.tenants} tenants, {args.pools} pools; best of {args.repeats}, CPU seconds in a fresh interpreter")
    print(f"  validate the spec            {best['validate']:.3f} s")
    print(f"  take the validated model     {best['take']:.3f} s")
    print(f"  ratio take/validate          {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
