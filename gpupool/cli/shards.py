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
    from gpupool.cli.common import UsageError, spec_path, valid_spec_or_fail
    from gpupool.spec.diagnostics import printable

    spec_file = spec_path(args)
    spec = valid_spec_or_fail(spec_file, "invalid, no shards")
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
            raise UsageError(f"--states {printable(args.states)}: not a directory")
        for path in sorted(directory.glob("*.json")):
            states[path.stem] = read_state(path)
    runs = stack_runs(platform, [t.name for t in spec.tenants], spec.tenant_shards, states)
    doc = as_json(platform, spec.tenant_shards, runs)
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        from gpupool.present.shards import table

        print(table(doc, with_states=bool(args.states)), end="")
    return 0


# A `pulumi stack export` of a large stack runs to megabytes; this is far above any, and far below memory.
STATE_LIMIT = 256 << 20


def read_state(path) -> dict:
    """The `pulumi stack export` document at PATH, checked for the shape gpupool.analysis.shard_moves reads
    (an object; `deployment` an object; its `resources` and `pending_operations` lists of objects, an
    operation's `resource` an object). UsageError naming the file otherwise: a FIFO, a device or a
    directory is refused before it is read (opened without blocking, then fstat), a file larger than
    STATE_LIMIT after reading no more than that, and no JSON or another shape after parsing."""
    import errno
    import json
    import os
    import stat

    from gpupool.cli.common import UsageError
    from gpupool.spec.diagnostics import printable

    shown = f"--states: {printable(str(path))}"
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{shown}: cannot be read ({os.strerror(exc.errno or errno.EIO)})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{shown}: not a regular file (a directory, a FIFO or a device); remove it from DIR")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, STATE_LIMIT + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > STATE_LIMIT:
                raise UsageError(f"{shown}: larger than {STATE_LIMIT:,} bytes; not a `pulumi stack export` document")
    except OSError as exc:
        raise UsageError(f"{shown}: cannot be read ({os.strerror(exc.errno or errno.EIO)})") from None
    finally:
        os.close(fd)
    try:
        doc = json.loads(b"".join(chunks).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; RecursionError: nesting
        what = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not JSON"
        raise UsageError(f"{shown}: {what}; expected a `pulumi stack export` document") from None
    wrong = _shape(doc)
    if wrong:
        raise UsageError(f"{shown}: {wrong}; expected a `pulumi stack export` document")
    return doc


def _shape(doc) -> str:
    """What is wrong with the shape of a stack export document (shard_moves.held_in_state reads it), or ''."""
    if not isinstance(doc, dict):
        return f"the document is {_kind(doc)}, not an object"
    deployment = doc.get("deployment")
    if deployment is None:
        return ""
    if not isinstance(deployment, dict):
        return f"deployment is {_kind(deployment)}, not an object"
    for key in ("resources", "pending_operations"):
        items = deployment.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            return f"deployment.{key} is {_kind(items)}, not a list"
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return f"deployment.{key}[{i}] is {_kind(item)}, not an object"
            if key == "pending_operations" and item.get("resource") is not None:
                if not isinstance(item["resource"], dict):
                    return f"deployment.{key}[{i}].resource is {_kind(item['resource'])}, not an object"
    return ""


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
