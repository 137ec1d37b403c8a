"""docs/reference/rules.md, generated from the rule registry: `python -m gpupool.rules.docs` (or `--check`).

Each rule's documentation is its docstring (or the `doc` given to `declare`): a short why, then a
``Passes:`` and a ``Fails:`` block of YAML. For the rules on the model (GP1xx-GP7xx) each block holds
top-level keys that replace those of EXAMPLE_BASE below; tests/test_rule_examples.py validates every
example that way, so the documentation cannot drift from what the rules do.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "reference" / "rules.md"
# Where a rule's documentation is, relative to the gpupool repository (the project has no public home page
# to point at yet; SARIF's helpUri and the text output use this).
HELP_URI = "docs/reference/rules.md"

# A small valid spec; an example replaces some of its top-level keys.
EXAMPLE_BASE = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster:
  name: dev
nodePools:
  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: team-a, tier: standard, owners: [team-a-admins], gpus: {nvidia.com/gpu: 4}}
"""

RANGES = (
    ("GP0", "Loading and schema"),
    ("GP1", "Cluster and GPU Operator"),
    ("GP2", "Node pools and MIG"),
    ("GP3", "Sharing"),
    ("GP4", "Tiers"),
    ("GP5", "Tenants and quotas"),
    ("GP6", "Capacity"),
    ("GP7", "Rollout and admission"),
    ("GP8", "Security boundary"),
    ("GP9", "Derived names and numbers"),
)


@dataclass(frozen=True)
class RuleDoc:
    why: str
    passes: str
    fails: str


def parse(doc: str) -> RuleDoc:
    """Split a rule's documentation into its why and its two examples ('' when one is missing)."""
    text = inspect.cleandoc(doc)
    why, _, rest = text.partition("Passes:")
    passes, _, fails = rest.partition("Fails:")
    return RuleDoc(" ".join(why.split()), textwrap.dedent(passes).strip("\n"), textwrap.dedent(fails).strip("\n"))


def anchor(rule_id: str) -> str:
    """The heading anchor of a rule in docs/reference/rules.md (what SARIF's helpUri points at)."""
    return rule_id.lower()


def help_uri(rule_id: str) -> str:
    return f"{HELP_URI}#{anchor(rule_id)}"


def render() -> str:
    from gpupool import rules as _package  # noqa: F401  (registers every rule)
    from gpupool.rules.registry import RULES

    out = [
        "# gpupool rules",
        "",
        "Generated from the rule registry by `python -m gpupool.rules.docs`; do not edit by hand "
        "(a test fails when this file is stale). Every diagnostic names its rule: "
        "`FILE:LINE:COL: error: PATH: MESSAGE [GP123]`.",
        "",
        "Examples of the rules GP1xx-GP7xx replace the top-level keys of this valid spec (each is validated "
        "by `tests/test_rule_examples.py`); GP0xx examples are whole files.",
        "",
        "```yaml",
        EXAMPLE_BASE.rstrip(),
        "```",
        "",
    ]
    ids = sorted(RULES)
    out.append("| id | rule |")
    out.append("| --- | --- |")
    out += [f"| [{i}](#{anchor(i)}) | {RULES[i].title} |" for i in ids]
    out.append("")
    for prefix, heading in RANGES:
        group = [i for i in ids if i.startswith(prefix)]
        if not group:
            continue
        out += [f"## {prefix}xx: {heading}", ""]
        for rule_id in group:
            r = RULES[rule_id]
            doc = parse(r.doc)
            where = (
                "checked by the loader and schema"
                if prefix == "GP0"
                else "checked while the model is built"
                if r.check is None
                else "a rule on the built model"
            )
            out += [f"### {rule_id}", "", f"**{r.title}** ({where})", ""]
            if doc.why:
                out += [doc.why, ""]
            for label, block in (("Passes", doc.passes), ("Fails", doc.fails)):
                if block:
                    out += [f"{label}:", "", "```yaml", block, "```", ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpupool.rules.docs", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/reference/rules.md is stale, write nothing")
    ap.add_argument("--output", type=Path, default=DOCS_PATH, help="where to write (default: docs/reference/rules.md)")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale; run: python -m gpupool.rules.docs", file=sys.stderr)
            return 1
        return 0
    from gpupool import safe_write

    try:  # as every gpupool command writes: no link followed, only a regular file replaced
        safe_write.write_output(args.output, text)
    except safe_write.Refused as exc:
        print(f"error: {exc}; nothing was written", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
