"""`gpupool render SPEC -o DIR`: the stack's Kubernetes objects as YAML, no engine, no cluster."""
from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("render", help="write every desired object as YAML (no cluster, no Pulumi engine)",
                       description="Write one YAML file per desired object into DIR: exactly what the Pulumi "
                                   "components register. Files for objects no longer desired are removed.")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.set_defaults(func=run)


def run(args) -> int:
    from gpupool.k8s import manifests
    from gpupool.k8s import render
    from gpupool.cli.common import valid_spec_or_report

    spec = valid_spec_or_report(args.spec, "invalid, nothing rendered")
    if spec is None:
        return 1
    plan = manifests.build(spec)
    written = render.write(plan, Path(args.output))
    print(f"wrote {len(written)} objects to {args.output}")
    return 0
