"""`gpupool shards SPEC`: which Pulumi stack holds which tenant (spec `sharding.tenantShards`), and, given
the stacks' states, which tenants a run moves and which stacks must release theirs first.

gpupool stacks plans a sharded platform's runs from the same analysis (gpupool/analysis/shard_moves.py);
people run this to see where a tenant lives.
Exit status: 0 = printed, 1 = invalid spec, 2 = usage error.
"""

from __future__ import annotations

FORMATS = ("table", "json")


def register(sub) -> None:
    p = sub.add_parser(
        "shards",
        help="the platform's Pulumi stacks and the tenants each holds (sharding.tenantShards)",
        description="The platform stack and its tenant shard stacks (<stack>.tenants-<k>), with the tenants "
        "the spec assigns to each. With --states DIR (DIR/<stack>.json = `pulumi stack export` of each "
        "existing stack), also what each holds now, which tenants move, and which stacks release "
        "theirs first.",
    )
    from gpupool.cli.common import add_output_format, add_spec_argument

    add_spec_argument(p)
    p.add_argument(
        "--platform-stack",
        metavar="NAME",
        help="the platform stack's name, which names the shards (default: --stack, else the project's stack "
        "whose gpupool:spec is SPEC)",
    )
    p.add_argument("--states", metavar="DIR", help="a directory of `pulumi stack export` files, <stack>.json")
    add_output_format(p, FORMATS, "table", help="table (default) or json (for scripts)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    from pathlib import Path

    from gpupool.analysis.shard_moves import as_json, stack_runs
    from gpupool.cli.common import UsageError, spec_path, valid_spec_or_report

    spec_file = spec_path(args)
    spec = valid_spec_or_report(spec_file, "invalid, no shards")
    if spec is None:
        return 1
    platform = args.platform_stack or args.stack
    if platform is None:
        from gpupool.spec.stack import stacks_of

        named = stacks_of(spec_file) if spec_file != "-" else []
        if len(named) != 1:
            which = f"stacks {', '.join(named)} all name it" if named else "no stack of the Pulumi project names it"
            raise UsageError(
                f"the shards are named after the platform stack: give --stack NAME or --platform-stack NAME "
                f"({which} in gpupool:spec)"
            )
        platform = named[0]
    states: dict[str, dict] = {}
    if args.states:
        directory = Path(args.states)
        if not directory.is_dir():
            raise UsageError(f"--states {args.states}: not a directory")
        for path in sorted(directory.glob("*.json")):
            try:
                states[path.stem] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(f"{path}: not a `pulumi stack export` document ({type(exc).__name__})") from None
    runs = stack_runs(platform, [t.name for t in spec.tenants], spec.tenant_shards, states)
    doc = as_json(platform, spec.tenant_shards, runs)
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        from gpupool.present.shards import table

        print(table(doc, with_states=bool(args.states)), end="")
    return 0
