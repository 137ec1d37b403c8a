"""The end of `make test` (ci/test.sh): each step's time, the slowest tests, and the elapsed time against the
budget. A check that prints, never a timed assertion: an over-budget run says so and keeps its exit status.

    python ci/test_report.py --steps out/test/steps.tsv --junit out/test/*.xml --start EPOCH --fresh 0|1 \
        [--cpu-start out/test/cpu.start]      # the `cpu` line of /proc/stat when the run started
    python ci/test_report.py --junit out/test/*.xml --modules     # the suite by module (docs/contributing/testing.md)

Test times are JUnit's (setup + call + teardown), so a module-scoped fixture counts in its first test.
"""

from __future__ import annotations

import argparse
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# Above this share of steal the host gave a good part of the 2 cores to other machines: the run's times are not
# those of 2 dedicated cores (docs/contributing/testing.md, "Why warm run 3 is over the 15 minutes").
STEAL_NOTICE = 10.0


def cpu_shares(before: str, after: str) -> dict[str, float]:
    """Percent of CPU time per state between two `cpu` lines of /proc/stat (proc(5): user nice system idle
    iowait irq softirq steal ..., in clock ticks, over all CPUs)."""
    a = [int(x) for x in before.split()[1 : 1 + len(CPU_FIELDS)]]
    b = [int(x) for x in after.split()[1 : 1 + len(CPU_FIELDS)]]
    delta = [y - x for x, y in zip(a, b, strict=True)]
    total = sum(delta) or 1
    return {name: 100.0 * d / total for name, d in zip(CPU_FIELDS, delta, strict=True)}


def cpu_line(before: str, after: str) -> str:
    shares = cpu_shares(before, after)
    shown = ", ".join(f"{n} {shares[n]:.0f}%" for n in ("user", "system", "idle", "iowait", "steal"))
    note = ""
    if shares["steal"] >= STEAL_NOTICE:
        note = " (steal: CPU time the host gave to other machines; this run's times are longer than on 2 own cores)"
    return f"[make test] CPU over the run: {shown}{note}"


def minutes(secs: float) -> str:
    secs = int(round(secs))
    return f"{secs // 60}m{secs % 60:02d}s"


def read_steps(path: Path) -> list[tuple[str, int, int]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        name, secs, rc = line.split("\t")
        rows.append((name, int(secs), int(rc)))
    return rows


def read_tests(paths: list[Path]) -> list[tuple[str, float, str]]:
    """(node id, seconds, outcome) of every test case in the JUnit files."""
    out = []
    for path in paths:
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            # classname is the dotted module, then the class for a test in a class (tests.test_a.TestX)
            parts = (case.get("classname") or "").split(".")
            cls = [p for p in parts if p.startswith("Test")]
            module = parts[: parts.index(cls[0])] if cls else parts
            file = "/".join(module) + ".py" + "".join(f"::{c}" for c in parts[len(module) :])
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                if case.find(tag) is not None:
                    outcome = {"failure": "failed"}.get(tag, tag)
            out.append((f"{file}::{case.get('name')}", float(case.get("time") or 0), outcome))
    return out


def by_module(tests: list[tuple[str, float, str]]) -> list[tuple[str, int, float]]:
    acc: dict[str, list[float]] = defaultdict(list)
    for node, secs, _ in tests:
        acc[node.split("::")[0]].append(secs)
    return sorted(((m, len(t), sum(t)) for m, t in acc.items()), key=lambda r: -r[2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=Path)
    ap.add_argument("--junit", type=Path, nargs="*", default=[])
    ap.add_argument("--start", type=float, help="epoch seconds when the run started")
    ap.add_argument("--fresh", type=int, choices=(0, 1), default=0, help="1: the run had toolchain builds to do")
    ap.add_argument("--budget-fresh", type=float, default=60.0, help="minutes")
    ap.add_argument("--budget-warm", type=float, default=15.0, help="minutes")
    ap.add_argument("--cpu-start", type=Path, help="the `cpu` line of /proc/stat saved when the run started")
    ap.add_argument("--cpu-now", type=Path, default=Path("/proc/stat"), help=argparse.SUPPRESS)  # tests
    ap.add_argument("--slowest", type=int, default=25)
    ap.add_argument("--modules", action="store_true", help="print the suite by module as a Markdown table")
    args = ap.parse_args(argv)

    tests = read_tests(args.junit)
    if args.modules:
        print("| module | tests | time |\n|---|---:|---:|")
        for module, n, secs in by_module(tests):
            print(f"| {module} | {n} | {minutes(secs)} |")
        print(f"| **all** | **{len(tests)}** | **{minutes(sum(s for _, s, _ in tests))}** |")
        return 0

    if tests:
        print(f"\n[make test] the {args.slowest} slowest tests (of {len(tests)}):")
        for node, secs, outcome in sorted(tests, key=lambda t: -t[1])[: args.slowest]:
            print(f"  {secs:8.1f}s  {node}{'' if outcome == 'passed' else f'  ({outcome})'}")
    steps = read_steps(args.steps) if args.steps else []
    if steps:
        print("\n[make test] steps (wall time; the toolchain, tools and render deps run beside lint and unit):")
        for name, secs, rc in steps:
            print(f"  {name:12} {minutes(secs):>8}{'' if rc == 0 else f'  FAILED ({rc})'}")
    if args.start is not None:
        elapsed = time.time() - args.start
        budget = args.budget_fresh if args.fresh else args.budget_warm
        kind = "fresh machine: toolchain built in this run" if args.fresh else "warm: toolchain cached"
        verdict = "within budget" if elapsed <= budget * 60 else f"OVER BUDGET by {minutes(elapsed - budget * 60)}"
        print(f"\n[make test] elapsed {minutes(elapsed)} of the {budget:g}-minute budget ({kind}): {verdict}")
        if args.cpu_start is not None and args.cpu_start.is_file() and args.cpu_now.is_file():
            try:
                print(cpu_line(args.cpu_start.read_text(), args.cpu_now.read_text().splitlines()[0]))
            except (ValueError, IndexError):  # not a Linux /proc/stat: say nothing rather than guess
                pass
        if elapsed > budget * 60:
            print("[make test] see docs/contributing/testing.md, 'Keeping the budget'", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
