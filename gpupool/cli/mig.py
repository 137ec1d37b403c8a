"""`gpupool mig models|check|profiles|suggest`: MIG geometry questions answered without a cluster.

Exit status: 0 = fits / printed; 1 = layout does not fit, or (spec mode) the spec is invalid or its demand
cannot be placed; 2 = usage error: unknown or non-MIG GPU model, unknown MIG profile, malformed or
out-of-range arguments, missing spec file. The geometry modules (and HiGHS, for suggest) are imported inside
the handlers so `gpupool --help` stays cheap.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys

from gpupool.cli.common import CommandError, UsageError

_ARG = re.compile(r"^(?P<profile>[^=\s]+)=(?P<count>.*)$")


def register(subparsers) -> None:
    mig = subparsers.add_parser(
        "mig",
        help="MIG profiles, fit checks and layout suggestions per GPU model",
        description="MIG geometry per GPU model: check a layout, list profiles, suggest layouts for a demand.",
    )
    sub = mig.add_subparsers(dest="mig_command", metavar="SUBCOMMAND")
    sub.required = True

    models = sub.add_parser(
        "models",
        help="list the GPU models gpupool knows (with and without MIG)",
        description="Every GPU model a spec's node pool may name: the MIG-capable models of the "
        "catalog (with their profile count) and the whole-GPU models, with the GFD "
        "product names (nvidia.com/gpu.product) accepted for each.",
    )
    from gpupool.cli.common import add_output_format

    add_output_format(models, ("table", "json"), "table")
    models.set_defaults(func=cmd_models)

    check = sub.add_parser(
        "check",
        help="does a layout fit one GPU? prints the placement",
        description="Check that PROFILE=COUNT pairs (or one preset name such as all-balanced) "
        "fit on one GPU. Exit 0 = fits, 1 = does not fit, 2 = bad arguments.",
    )
    check.add_argument("--gpu", required=True, metavar="MODEL", help="GPU model, alias or GFD product name")
    check.add_argument(
        "layout",
        nargs="+",
        metavar="PROFILE=COUNT|PRESET",
        help="instances per profile (1g.10gb=2 3g.40gb=1), or one preset name",
    )
    add_output_format(check, ("text", "json"), "text")
    check.set_defaults(func=cmd_check)

    profiles = sub.add_parser(
        "profiles",
        help="list the MIG profiles and presets of a GPU model",
        description="The MIG profiles of one GPU model (compute and memory slices, maximum "
        "count, allowed start slots, fraction of a GPU) and its presets.",
    )
    profiles.add_argument("--gpu", required=True, metavar="MODEL", help="GPU model, alias or GFD product name")
    add_output_format(profiles, ("table", "json"), "table")
    profiles.set_defaults(func=cmd_profiles)

    suggest = sub.add_parser(
        "suggest",
        help="per-GPU layouts supplying a demand on the fewest GPUs",
        description="Suggest per-GPU MIG layouts that supply PROFILE=COUNT instances on "
        "the fewest GPUs, proven minimal by an integer program (HiGHS), with a "
        "spec fragment to paste. With --pool NAME (and SPEC or --stack "
        "NAME), the demand is derived from the tenants' quotas on that pool. "
        f"Demands that need more than {_max_gpus():,} GPUs (no cluster holds "
        "more) are refused.",
    )
    suggest.add_argument("--gpu", metavar="MODEL", help="GPU model (explicit mode, with PROFILE=COUNT demand)")
    suggest.add_argument(
        "--gpus-per-node",
        type=int,
        metavar="N",
        help="GPUs per node: express the fragment as identical nodes with per-GPU indices",
    )
    from gpupool.cli.common import add_spec_argument

    add_spec_argument(suggest, flag="--spec")  # --spec (hidden) kept for old scripts; SPEC is positional
    suggest.add_argument("--pool", metavar="NAME", help="spec mode: the node pool whose MIG layout to suggest")
    suggest.add_argument(
        "demand",
        nargs="*",
        metavar="PROFILE=COUNT|SPEC",
        help="explicit mode: instances per profile; spec mode (with --pool): the spec, as other commands take it",
    )
    add_output_format(suggest, ("text", "json"), "text")
    suggest.set_defaults(func=cmd_suggest)


def _max_gpus() -> int:
    from gpupool.gpu.suggest import MAX_GPUS

    return MAX_GPUS


def _error(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _model(name: str):
    from gpupool.gpu.models import UnknownGpu, require_mig

    try:
        return require_mig(name)
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from None


_MAX_DIGITS = 15  # far above any real count; longer numbers are refused before they are even converted


def _known_profiles(model, layout: dict[str, int]) -> None:
    """An unknown profile is a usage error (exit 2), as an unknown model is; check_layout explains the rest."""
    from gpupool.gpu.mig import closest_profile

    unknown = [p for p in layout if p not in model.profiles and not re.match(r"^\d+c\.", p)]
    if unknown:
        hints = [f"{p}" + (f" (did you mean {g}?)" if (g := closest_profile(model, p)) else "") for p in unknown]
        raise UsageError(
            f"not a MIG profile of {model.name}: {', '.join(hints)}; profiles: "
            f"{', '.join(model.profiles)} (`gpupool mig profiles --gpu {model.name}`)"
        )


def _parse_pairs(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        m = _ARG.match(item.strip())
        if not m:
            raise UsageError(f"expected PROFILE=COUNT, got {item!r}")
        profile, count = m["profile"], m["count"].strip()
        if not re.fullmatch(r"\d+", count):
            raise UsageError(f"count in {item!r} must be a non-negative integer")
        if len(count.lstrip("0")) > _MAX_DIGITS:
            raise UsageError(
                f"count for {profile} has {len(count.lstrip('0'))} digits: more instances than "
                f"any cluster holds (at most {_max_gpus():,} GPUs)"
            )
        if profile in out:
            raise UsageError(f"profile {profile} given twice")
        out[profile] = int(count)
    return out


def cmd_check(args: argparse.Namespace) -> int:
    from gpupool.gpu.mig import check_layout, resolve_preset
    from gpupool.present.mig import slice_map

    model = _model(args.gpu)
    if len(args.layout) == 1 and "=" not in args.layout[0]:
        preset = args.layout[0]
        layout = resolve_preset(model, preset)
        if layout is None:
            raise UsageError(
                f"{preset!r} is neither PROFILE=COUNT nor a preset of {model.name} "
                f"(presets: {', '.join(model.presets)})"
            )
        title = f"{model.name} preset {preset}"
    else:
        layout = _parse_pairs(args.layout)
        title = model.name
        _known_profiles(model, layout)
    result = check_layout(model, layout)
    shown = " + ".join(f"{p}×{n}" for p, n in layout.items() if n) or "(empty)"
    if args.output == "json":
        doc = {
            "gpu": model.name,
            "layout": {p: n for p, n in layout.items() if n},
            "fits": result.ok,
            "reasons": list(result.reasons),
            "placements": [{"profile": pl.profile, "start": pl.start, "end": pl.end} for pl in result.placements],
            "warnings": list(result.warnings),
            "placementsConfidence": model.placements,
        }
        print(json.dumps(doc, indent=2))
        return 0 if result.ok else 1
    if not result.ok:
        _error(f"{shown} does not fit one {model.name} GPU:")
        for reason in result.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return 1
    compute = sum(model.profiles[p].compute * n for p, n in layout.items())
    memory = sum(pl.size for pl in result.placements)
    print(
        f"{title}: {shown} fits one GPU "
        f"({compute}/{model.compute_slices} compute slices, {memory}/{model.memory_slices} memory slices, "
        f"{len(result.placements)}/{model.max_instances} instances)"
    )
    for pl in result.placements:
        print(f"  {pl.profile:<14} start {pl.start}  memory slices [{pl.start},{pl.end})")
    print(slice_map(model, result.placements))
    if model.placements != "verified":
        print(
            f"note: {model.name} start slots are {model.placements} (see `gpupool mig profiles`); "
            "confirm with `nvidia-smi mig -lgipp` on the node"
        )
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _table(rows: list[list[str]]) -> str:
    """First row is the header."""
    from gpupool.present.tables import text_table

    return text_table(rows[0], rows[1:]).rstrip("\n")


def cmd_profiles(args: argparse.Namespace) -> int:
    from gpupool.gpu.mig import gpu_fraction

    model = _model(args.gpu)
    if args.output == "json":
        doc = {
            "gpu": model.name,
            "memoryGB": model.memory_gb,
            "computeSlices": model.compute_slices,
            "memorySlices": model.memory_slices,
            "maxInstances": model.max_instances,
            "placements": model.placements,
            "aliases": list(model.aliases),
            "profiles": [
                {
                    "name": p.name,
                    "resource": p.resource_name,
                    "compute": p.compute,
                    "memory": p.memory,
                    "maxCount": p.max_count,
                    "starts": list(p.starts),
                    "gpuFraction": str(gpu_fraction(model, p.name)),
                }
                for p in model.profiles.values()
            ],
            "presets": {name: dict(layout) for name, layout in model.presets.items()},
            "source": model.source or None,
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{model.name}: {model.memory_gb} GB, {model.compute_slices} compute slices, "
        f"{model.memory_slices} memory slices, up to {model.max_instances} instances per GPU "
        f"(placements {model.placements})"
    )
    if model.aliases:
        print(f"aliases: {', '.join(model.aliases)}")
    rows = [["PROFILE", "RESOURCE", "COMPUTE", "MEMORY", "MAX", "STARTS", "FRACTION"]]
    for p in model.profiles.values():
        rows.append(
            [
                p.name,
                p.resource_name,
                str(p.compute),
                str(p.memory),
                str(p.max_count),
                ",".join(map(str, p.starts)),
                str(gpu_fraction(model, p.name)),
            ]
        )
    print(_table(rows))
    print("\npresets:")
    prow = [[name, ", ".join(f"{p}: {n}" for p, n in layout.items())] for name, layout in model.presets.items()]
    print(_table(prow))
    if model.source:
        print(f"\nsource: {model.source}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from gpupool.gpu.models import known_gpus

    gpus = known_gpus().values()
    if args.output == "json":
        doc = [
            {
                "name": g.name,
                "mig": g.mig is not None,
                "memoryGB": g.memory_gb,
                "profiles": len(g.mig.profiles) if g.mig else 0,
                "aliases": list(g.aliases),
            }
            for g in sorted(gpus, key=lambda g: (g.mig is None, g.name))
        ]
        print(json.dumps(doc, indent=2))
        return 0
    rows = [["MODEL", "MIG", "MEMORY", "PROFILES", "ALSO ACCEPTED AS"]]
    for g in sorted(gpus, key=lambda g: (g.mig is None, g.name)):
        rows.append(
            [
                g.name,
                "yes" if g.mig else "no",
                f"{g.memory_gb} GB",
                str(len(g.mig.profiles)) if g.mig else "-",
                ", ".join(g.aliases) or "-",
            ]
        )
    print(_table(rows))
    mig = sum(1 for g in gpus if g.mig)
    print(
        f"\n{_count(mig, 'MIG-capable model')} (`gpupool mig profiles --gpu MODEL`), "
        f"{_count(len(rows) - 1 - mig, 'whole-GPU model')} (share them with timeSlicing or mps). Names are "
        "case-insensitive; GFD product names (the nvidia.com/gpu.product label) are accepted as well."
    )
    return 0


def _count(n: int, noun: str) -> str:
    from gpupool.present.text import plural

    return plural(n, noun)


def cmd_suggest(args: argparse.Namespace) -> int:
    specs = [d for d in args.demand if "=" not in d]  # a positional SPEC, as validate/plan/render take it
    if specs and args.pool is not None:
        if args.spec is not None or len(specs) > 1:
            raise UsageError("give one SPEC")
        args.spec, args.demand = specs[0], [d for d in args.demand if "=" in d]
    if args.spec is not None or args.pool is not None or args.stack is not None:
        return _suggest_spec_mode(args)
    if not args.gpu or not args.demand:
        raise UsageError("give --gpu MODEL and PROFILE=COUNT..., or --pool NAME with SPEC or --stack NAME")
    model = _model(args.gpu)
    demand = _parse_pairs(args.demand)
    if args.gpus_per_node is not None and not 1 <= args.gpus_per_node <= 64:
        raise UsageError("--gpus-per-node must be between 1 and 64 (the spec's limit)")
    code, s, ns = _solve(model, demand, args.gpus_per_node, usage_code=2)
    if args.output == "json":
        print(json.dumps(_suggestion_json(model, s, ns, args.gpus_per_node), indent=2))
    else:
        _print_suggestion(model, s, ns, args.gpus_per_node)
    return code


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _solve(model, demand: dict[str, int], gpus_per_node: int | None, *, usage_code: int):
    """(exit code, Suggestion, NodeSuggestion or None).

    A demand that names an unknown profile or exceeds the limits is a UsageError when it came from the
    command line (USAGE_CODE 2) and a CommandError when it was derived from a spec (1): there is no
    suggestion to print. A per-node split that fails exits 1 with the whole-GPU suggestion still returned
    (and the reason printed to stderr)."""
    from gpupool.gpu.suggest import suggest, suggest_per_node

    try:
        s = suggest(model, demand)
    except ValueError as exc:
        if usage_code == 2:
            raise UsageError(str(exc)) from None
        raise CommandError(str(exc), exit=usage_code) from None
    if s.gpus == 0 or not gpus_per_node:
        return 0, s, None
    try:
        return 0, s, suggest_per_node(model, demand, gpus_per_node)
    except ValueError as exc:
        _error(str(exc))
        return 1, s, None


def _fragments(model, s, ns) -> list[tuple[int | None, str]]:
    """The spec fragments to paste: [(None, one fragment)] or [(GPUs, fragment) per distinct layout]."""
    from gpupool.gpu.suggest import spec_fragment

    if s.gpus == 0:
        return []
    if ns is not None:
        return [(None, spec_fragment(model, ns.per_gpu))]
    if len(s.layouts) == 1:
        return [(None, spec_fragment(model, [s.layouts[0][0]]))]
    return [(n, spec_fragment(model, [layout])) for layout, n in s.layouts]


def _suggestion_json(model, s, ns, gpus_per_node: int | None) -> dict:
    """What _print_suggestion prints, as data (`-o json`)."""
    from gpupool.gpu.suggest import MAX_NODES

    return {
        "gpu": model.name,
        "demand": dict(s.demand),
        "gpus": s.gpus,
        "optimal": s.optimal,
        "lowerBound": s.lower_bound,
        "solverBound": s.bound,
        "solveSeconds": round(s.solve_seconds, 6),
        "layouts": [{"gpus": n, "layout": dict(layout)} for layout, n in s.layouts],
        "supplied": dict(s.supplied),
        "perNode": None
        if ns is None
        else {
            "gpusPerNode": gpus_per_node,
            "nodes": ns.nodes,
            "gpus": ns.nodes * (gpus_per_node or 0),
            "optimal": ns.optimal,
            "solveSeconds": round(ns.solve_seconds, 6),
            "perGpu": [dict(g) for g in ns.per_gpu],
            "supplied": dict(ns.supplied),
            "beyondOneCluster": ns.nodes > MAX_NODES,
        },
        "fragments": [{"gpus": n, "text": text} for n, text in _fragments(model, s, ns)],
    }


def _print_suggestion(model, s, ns, gpus_per_node: int | None) -> None:
    from gpupool.gpu.suggest import MAX_NODES

    if s.gpus == 0:
        print("nothing to place: every count is 0")
        return
    if s.optimal:
        proof = f"proven minimum; resource lower bound {s.lower_bound}"
    else:
        proof = f"best found, at most {s.gpus - s.bound} above the minimum (solver time limit)"
    print(f"{model.name}: {_count(s.gpus, 'GPU')} needed ({proof}; solved by HiGHS in {_ms(s.solve_seconds)})")
    rows = [["GPUS", "LAYOUT"]] + [[str(n), " + ".join(f"{p}×{c}" for p, c in L.items())] for L, n in s.layouts]
    print(_table(rows))
    print("supplied: " + ", ".join(f"{p}: {n} (demand {s.demand.get(p, 0)})" for p, n in s.supplied.items()))
    if gpus_per_node and ns is None:
        return  # the per-node split failed (said on stderr)
    if ns is not None:
        print(
            f"\nas identical {gpus_per_node}-GPU nodes: {_count(ns.nodes, 'node')} "
            f"({_count(ns.nodes * ns.gpus_per_node, 'GPU')}, {'proven minimum' if ns.optimal else 'best found'}; "
            f"HiGHS {_ms(ns.solve_seconds)}), supplying " + ", ".join(f"{p}: {n}" for p, n in ns.supplied.items())
        )
        if ns.nodes > MAX_NODES:
            from gpupool.present.text import WARN

            print(
                f"{WARN} {ns.nodes:,} nodes is more than one Kubernetes cluster supports ({MAX_NODES:,}); "
                "split the demand over clusters, or use nodes with more GPUs"
            )
    fragments = _fragments(model, s, ns)
    if len(fragments) == 1:
        print("\nspec fragment (node pool):\n")
        print(fragments[0][1], end="")
        return
    print("\nspec fragments, one node pool per layout (or pass --gpus-per-node N for one per-GPU fragment):")
    for n, text in fragments:
        print(f"\n# {_count(n or 0, 'GPU')}")
        print(text, end="")


def _current_per_gpu(pool) -> list[dict[str, int]]:
    """The pool's layout per GPU index ({} = MIG disabled)."""
    per_gpu: list[dict[str, int]] = [{} for _ in range(pool.gpus_per_node)]
    for g in pool.sharing.mig:
        for i in g.gpus:
            per_gpu[i] = {p: n for p, n in g.layout.items() if n}
    return per_gpu


def _comparison(derived, s, ns) -> dict:
    """The current layout against the suggestion: every figure spec mode shows, in one place."""
    from gpupool.analysis.diff.mig import layout_text
    from gpupool.analysis.mig_demand import current_nodes_needed

    pool = derived.pool
    now_nodes = current_nodes_needed(derived)
    suggested = s.gpus + derived.whole_gpus
    return {
        "currentLayout": layout_text(pool),
        "poolNodes": pool.node_count,
        "poolGpus": pool.total_gpus,
        "neededNodesNow": now_nodes,
        "neededGpusNow": now_nodes * pool.gpus_per_node,
        "suggestedGpus": suggested,
        "suggestedMigGpus": s.gpus,
        "suggestedNodes": math.ceil(suggested / pool.gpus_per_node),
        "gpusSaved": now_nodes * pool.gpus_per_node - suggested,
        # Adopting the suggestion re-partitions a pool in use (MIG Manager evicts its GPU workloads first).
        "repartitionsInUse": bool(
            any(total for _, total, _, _ in derived.rows)
            and pool.node_count > 0
            and (ns is None or ns.per_gpu != _current_per_gpu(pool))
        ),
    }


def _suggest_spec_mode(args: argparse.Namespace) -> int:
    from gpupool.analysis.mig_demand import SpecModeError, derive_demand
    from gpupool.cli.common import spec_path, valid_spec_or_fail

    try:
        if not args.pool:
            raise SpecModeError("spec mode needs --pool NAME (with SPEC, --stack NAME or $GPUPOOL_SPEC)")
        if args.gpu or args.demand:
            raise SpecModeError("give either --gpu MODEL PROFILE=COUNT... or --pool NAME with a spec, not both")
        if args.gpus_per_node is not None and not 1 <= args.gpus_per_node <= 64:
            raise SpecModeError("--gpus-per-node must be between 1 and 64 (the spec's limit)")
        path = spec_path(args)
        spec = valid_spec_or_fail(path, "invalid; fix it before deriving a MIG demand from it")
        derived = derive_demand(spec, args.pool)
    except SpecModeError as exc:
        raise UsageError(str(exc)) from None
    per_node = args.gpus_per_node
    if per_node is None and not derived.whole_gpus:
        per_node = derived.pool.gpus_per_node
    if args.output != "json":
        _print_derived(path, derived)
    code, s, ns = _solve(derived.model, dict(derived.demand), per_node, usage_code=1)
    if args.output == "json":
        doc = {
            "spec": path,
            "pool": _pool_json(derived.pool),
            "derived": [
                {"resource": r, "granted": total, "poolShare": str(share), "units": units}
                for r, total, share, units in derived.rows
            ],
            "wholeGpus": derived.whole_gpus,
            "suggestion": _suggestion_json(derived.model, s, ns, per_node),
            "comparison": _comparison(derived, s, ns) if code == 0 else None,
        }
        print(json.dumps(doc, indent=2))
        return code
    _print_suggestion(derived.model, s, ns, per_node)
    if code != 0:
        return code
    _print_comparison(derived, _comparison(derived, s, ns))
    return 0


def _pool_json(pool) -> dict:
    return {
        "name": pool.name,
        "gpu": pool.gpu_model,
        "nodes": pool.node_count,
        "gpusPerNode": pool.gpus_per_node,
        "sharing": pool.sharing.kind,
        "replicas": pool.sharing.replicas,
    }


def _print_derived(path: str, derived) -> None:
    from gpupool.model import platform as m
    from gpupool.present.numbers import units as units_text

    pool, model = derived.pool, derived.model
    print(
        f"demand derived from {path}, pool {pool.name} ({pool.node_count}×{pool.gpus_per_node} {model.name}"
        f"{f', {pool.sharing.kind} ×{pool.sharing.replicas}' if pool.sharing.replicas != 1 else ''}):"
    )
    for advertised, total, share, units in derived.rows:
        how = f"granted {total}"
        if share != total:
            how += f", this pool's share {units_text(share)}"
        if pool.sharing.replicas != 1:
            how += f" / {pool.sharing.replicas} replicas"
        print(f"  {advertised}: {how} → {units}")
    if derived.whole_gpus:
        print(
            f"  plus {_count(derived.whole_gpus, 'whole GPU')} (MIG disabled) for {m.GPU}: "
            "not part of the MIG suggestion"
        )
    print()


def _print_comparison(derived, c: dict) -> None:
    pool = derived.pool
    print(f"\ncompared with the current layout ({c['currentLayout']}):")
    print(
        f"  pool now:        {_count(pool.node_count, 'node')} × {_count(pool.gpus_per_node, 'GPU')} = "
        f"{_count(pool.total_gpus, 'GPU')}"
    )
    print(
        f"  needed now:      {_count(c['neededNodesNow'], 'node')} = {_count(c['neededGpusNow'], 'GPU')} "
        "with the current layout"
    )
    print(
        f"  suggested:       {_count(c['suggestedGpus'], 'GPU')}"
        + (f" ({c['suggestedMigGpus']} MIG + {derived.whole_gpus} whole)" if derived.whole_gpus else "")
        + f", {_count(c['suggestedNodes'], 'node')} of {_count(pool.gpus_per_node, 'GPU')}"
    )
    diff = c["gpusSaved"]
    if diff > 0:
        print(f"  the suggested layout needs {_count(diff, 'GPU')} fewer than the current one for the same grants")
    elif diff < 0:
        print(f"  the current layout packs this demand tighter by {_count(-diff, 'GPU')} (node granularity included)")
    else:
        print("  the current layout is as tight as the suggestion")
    if c["repartitionsInUse"]:
        from gpupool.present.text import WARN

        print(
            f"\n{WARN} adopting the suggestion re-partitions pool {pool.name}, which is in use: "
            f"{'its node gets' if pool.node_count == 1 else f'its {pool.node_count} nodes get'} a new MIG config, and MIG Manager evicts every GPU workload "
            "on a node before it re-partitions that node's GPUs (roll it out node by node; `gpupool diff` lists "
            "the nodes)"
        )
