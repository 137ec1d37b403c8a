"""`gpupool mig check|profiles|suggest`: MIG geometry questions answered without a cluster.

Exit status: 0 = fits / printed, 1 = layout does not fit (reasons on stderr), 2 = unknown model or malformed
arguments. The geometry modules are imported inside the handlers so `gpupool --help` stays cheap.
"""
from __future__ import annotations

import argparse
import math
import re
import sys

_ARG = re.compile(r"^(?P<profile>[^=\s]+)=(?P<count>.*)$")


class _UsageError(Exception):
    pass


def register(subparsers) -> None:
    mig = subparsers.add_parser("mig", help="MIG profiles, fit checks and layout suggestions per GPU model",
                                description="MIG geometry per GPU model: check a layout, list profiles, "
                                            "suggest layouts for a demand.")
    sub = mig.add_subparsers(dest="mig_command", metavar="SUBCOMMAND")
    sub.required = True

    check = sub.add_parser("check", help="does a layout fit one GPU? prints the placement",
                           description="Check that PROFILE=COUNT pairs (or one preset name such as all-balanced) "
                                       "fit on one GPU. Exit 0 = fits, 1 = does not fit, 2 = bad arguments.")
    check.add_argument("--gpu", required=True, metavar="MODEL", help="GPU model, alias or GFD product name")
    check.add_argument("layout", nargs="+", metavar="PROFILE=COUNT|PRESET")
    check.set_defaults(func=cmd_check)

    profiles = sub.add_parser("profiles", help="list the MIG profiles and presets of a GPU model")
    profiles.add_argument("--gpu", required=True, metavar="MODEL")
    profiles.set_defaults(func=cmd_profiles)

    suggest = sub.add_parser("suggest", help="per-GPU layouts supplying a demand on the fewest GPUs",
                             description="Suggest per-GPU MIG layouts that supply PROFILE=COUNT instances on "
                                         "as few GPUs as possible, with a spec fragment to paste.")
    suggest.add_argument("--gpu", metavar="MODEL", help="GPU model (explicit mode, with PROFILE=COUNT demand)")
    suggest.add_argument("--gpus-per-node", type=int, metavar="N",
                         help="GPUs per node: express the fragment as identical nodes with per-GPU indices")
    suggest.add_argument("--spec", metavar="SPEC", help="spec mode: derive the demand from the tenants' quotas")
    suggest.add_argument("--pool", metavar="NAME", help="spec mode: the node pool whose MIG layout to suggest")
    suggest.add_argument("demand", nargs="*", metavar="PROFILE=COUNT")
    suggest.set_defaults(func=cmd_suggest)


def _error(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _model(name: str):
    from gpupool.gpu.mig import catalog

    model = catalog().resolve(name)
    if model is None:
        raise _UsageError(f"unknown GPU model {name!r}; known models: {', '.join(catalog().names())} "
                          "(GFD product names such as NVIDIA-H100-80GB-HBM3 are accepted too)")
    return model


def _parse_pairs(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        m = _ARG.match(item.strip())
        if not m:
            raise _UsageError(f"expected PROFILE=COUNT, got {item!r}")
        profile, count = m["profile"], m["count"].strip()
        if not re.fullmatch(r"\d+", count):
            raise _UsageError(f"count in {item!r} must be a non-negative integer")
        if profile in out:
            raise _UsageError(f"profile {profile} given twice")
        out[profile] = int(count)
    return out


def cmd_check(args: argparse.Namespace) -> int:
    from gpupool.gpu.mig import check_layout, resolve_preset
    from gpupool.present.mig import slice_map

    try:
        model = _model(args.gpu)
        if len(args.layout) == 1 and "=" not in args.layout[0]:
            preset = args.layout[0]
            layout = resolve_preset(model, preset)
            if layout is None:
                raise _UsageError(f"{preset!r} is neither PROFILE=COUNT nor a preset of {model.name} "
                                  f"(presets: {', '.join(model.presets)})")
            title = f"{model.name} preset {preset}"
        else:
            layout = _parse_pairs(args.layout)
            title = model.name
    except _UsageError as exc:
        _error(str(exc))
        return 2
    result = check_layout(model, layout)
    shown = " + ".join(f"{p}×{n}" for p, n in layout.items() if n) or "(empty)"
    if not result.ok:
        _error(f"{shown} does not fit one {model.name} GPU:")
        for reason in result.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return 1
    compute = sum(model.profiles[p].compute * n for p, n in layout.items())
    memory = sum(pl.size for pl in result.placements)
    print(f"{title}: {shown} fits one GPU "
          f"({compute}/{model.compute_slices} compute slices, {memory}/{model.memory_slices} memory slices, "
          f"{len(result.placements)}/{model.max_instances} instances)")
    for pl in result.placements:
        print(f"  {pl.profile:<14} start {pl.start}  memory slices [{pl.start},{pl.end})")
    print(slice_map(model, result.placements))
    if model.placements != "verified":
        print(f"note: {model.name} start slots are {model.placements} (see `gpupool mig profiles`); "
              "confirm with `nvidia-smi mig -lgipp` on the node")
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _table(rows: list[list[str]]) -> str:
    """First row is the header."""
    from gpupool.present.tables import text_table

    return text_table(rows[0], rows[1:]).rstrip("\n")


def cmd_profiles(args: argparse.Namespace) -> int:
    from gpupool.gpu.mig import gpu_fraction

    try:
        model = _model(args.gpu)
    except _UsageError as exc:
        _error(str(exc))
        return 2
    print(f"{model.name}: {model.memory_gb} GB, {model.compute_slices} compute slices, "
          f"{model.memory_slices} memory slices, up to {model.max_instances} instances per GPU "
          f"(placements {model.placements})")
    if model.aliases:
        print(f"aliases: {', '.join(model.aliases)}")
    rows = [["PROFILE", "RESOURCE", "COMPUTE", "MEMORY", "MAX", "STARTS", "FRACTION"]]
    for p in model.profiles.values():
        rows.append([p.name, p.resource_name, str(p.compute), str(p.memory), str(p.max_count),
                     ",".join(map(str, p.starts)), str(gpu_fraction(model, p.name))])
    print(_table(rows))
    print("\npresets:")
    prow = [[name, ", ".join(f"{p}: {n}" for p, n in layout.items())] for name, layout in model.presets.items()]
    print(_table(prow))
    if model.source:
        print(f"\nsource: {model.source}")
    return 0


def cmd_suggest(args: argparse.Namespace) -> int:
    if getattr(args, "spec", None) is not None or getattr(args, "pool", None) is not None:
        return _suggest_spec_mode(args)
    try:
        if not args.gpu or not args.demand:
            raise _UsageError("give --gpu MODEL and PROFILE=COUNT..., or --spec SPEC --pool NAME")
        model = _model(args.gpu)
        demand = _parse_pairs(args.demand)
        if args.gpus_per_node is not None and args.gpus_per_node < 1:
            raise _UsageError("--gpus-per-node must be >= 1")
    except _UsageError as exc:
        _error(str(exc))
        return 2
    return _print_suggestion(model, demand, args.gpus_per_node)


def _print_suggestion(model, demand: dict[str, int], gpus_per_node: int | None) -> int:
    from gpupool.gpu.suggest import spec_fragment, suggest, suggest_per_node

    try:
        s = suggest(model, demand)
    except ValueError as exc:
        _error(str(exc))
        return 1
    if s.gpus == 0:
        print("nothing to place: every count is 0")
        return 0
    proof = "minimal" if s.optimal else f"at most {s.gpus - s.lp_bound} above the minimum"
    print(f"{model.name}: {s.gpus} GPUs needed ({proof}; lower bound {s.lower_bound}, "
          f"geometry-aware bound {s.lp_bound})")
    rows = [["GPUS", "LAYOUT"]] + [[str(n), " + ".join(f"{p}×{c}" for p, c in L.items())] for L, n in s.layouts]
    print(_table(rows))
    print("supplied: " + ", ".join(f"{p}: {n} (demand {s.demand.get(p, 0)})" for p, n in s.supplied.items()))
    if gpus_per_node:
        try:
            ns = suggest_per_node(model, demand, gpus_per_node)
        except ValueError as exc:
            _error(str(exc))
            return 1
        print(f"\nas identical {gpus_per_node}-GPU nodes: {ns.nodes} nodes "
              f"({ns.nodes * gpus_per_node} GPUs), supplying "
              + ", ".join(f"{p}: {n}" for p, n in ns.supplied.items()))
        print("\nspec fragment (node pool):\n")
        print(spec_fragment(model, ns.per_gpu), end="")
    elif len(s.layouts) == 1:
        print("\nspec fragment (node pool):\n")
        print(spec_fragment(model, [s.layouts[0][0]]), end="")
    else:
        print("\nspec fragments, one node pool per layout (or pass --gpus-per-node N for one per-GPU fragment):")
        for layout, n in s.layouts:
            print(f"\n# {n} GPU{'s' if n != 1 else ''}")
            print(spec_fragment(model, [layout]), end="")
    return 0


def _suggest_spec_mode(args: argparse.Namespace) -> int:
    from gpupool.analysis.mig_demand import SpecModeError, current_nodes_needed, derive_demand
    from gpupool.analysis.diff import layout_text
    from gpupool.cli.common import valid_spec_or_report
    from gpupool.model import platform as m
    from gpupool.present.numbers import units as units_text

    try:
        if not args.spec or not args.pool:
            raise SpecModeError("spec mode needs both --spec SPEC and --pool NAME")
        if args.gpu or args.demand:
            raise SpecModeError("give either --gpu MODEL PROFILE=COUNT... or --spec SPEC --pool NAME, not both")
        from pathlib import Path

        if not Path(args.spec).is_file():
            raise SpecModeError(f"{args.spec}: no such file")
        spec = valid_spec_or_report(args.spec, "invalid; fix it before deriving a MIG demand from it")
        if spec is None:
            return 1
        derived = derive_demand(spec, args.pool)
    except SpecModeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pool, model = derived.pool, derived.model
    print(f"demand derived from {args.spec}, pool {pool.name} ({pool.node_count}×{pool.gpus_per_node} {model.name}"
          f"{f', {pool.sharing.kind} ×{pool.sharing.replicas}' if pool.sharing.replicas != 1 else ''}):")
    for advertised, total, share, units in derived.rows:
        how = f"granted {total}"
        if share != total:
            how += f", this pool's share {units_text(share)}"
        if pool.sharing.replicas != 1:
            how += f" / {pool.sharing.replicas} replicas"
        print(f"  {advertised}: {how} → {units}")
    if derived.whole_gpus:
        print(f"  plus {derived.whole_gpus} whole GPUs (MIG disabled) for {m.GPU}: not part of the MIG suggestion")
    print()
    per_node = args.gpus_per_node
    if per_node is None and not derived.whole_gpus:
        per_node = pool.gpus_per_node
    code = _print_suggestion(model, dict(derived.demand), per_node)
    if code != 0:
        return code
    from gpupool.gpu.suggest import suggest

    s = suggest(model, derived.demand)
    now_nodes = current_nodes_needed(derived)
    suggested = s.gpus + derived.whole_gpus
    print(f"\ncompared with the current layout ({layout_text(pool)}):")
    print(f"  pool now:        {pool.node_count} nodes × {pool.gpus_per_node} GPUs = {pool.total_gpus} GPUs")
    print(f"  needed now:      {now_nodes} nodes = {now_nodes * pool.gpus_per_node} GPUs with the current layout")
    print(f"  suggested:       {suggested} GPUs"
          + (f" ({s.gpus} MIG + {derived.whole_gpus} whole)" if derived.whole_gpus else "")
          + f", {math.ceil(suggested / pool.gpus_per_node)} nodes of {pool.gpus_per_node} GPUs")
    diff = now_nodes * pool.gpus_per_node - suggested
    if diff > 0:
        print(f"  the suggested layout needs {diff} fewer GPUs than the current one for the same grants")
    elif diff < 0:
        print(f"  the current layout packs this demand tighter by {-diff} GPUs (node granularity included)")
    else:
        print("  the current layout is as tight as the suggestion")
    return 0
