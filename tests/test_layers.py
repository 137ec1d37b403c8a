"""The stages import one way (CONTRIBUTING.md): every top-level folder and module of gpupool/, and components/,
has a row in LAYERS, on a floor; a stage may import its own modules and those of stages on lower floors, never
a stage on its own floor or above, through any chain of imports; and no module imports one that imports it
back.

Read from the source with `ast`, function-local and TYPE_CHECKING imports included: a lazy import hides a circle
or an arrow running back up from Python's import machinery, not from a reader. (Two places load modules with
importlib by name: gpupool.rules' registry, its own rule modules, and gpupool.__init__'s importlib.metadata.)"""

from __future__ import annotations

import ast
import os
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("gpupool", "components")

# (floor, stage, what it holds), ground floor first. A stage is a top-level folder or module of gpupool/, or
# components/. Stages on one floor are peers: neither imports the other.
LAYERS: tuple[tuple[int, str, str], ...] = (
    (1, "gpupool", "the package's root: its version"),
    (1, "redact", "credentials masked in every message"),
    (1, "safe_write", "files written without following links or leaving half a file"),
    (1, "gpu", "facts about GPUs and NVIDIA's software: MIG catalog, fit, suggest, operator and dcgm-exporter"),
    (2, "spec", "the spec read from YAML: loading, schema, diagnostics"),
    (3, "model", "the validated spec as typed objects and the facts it implies (grants, queues, shards)"),
    (3, "scaffold", "a new stack's files (`gpupool init`)"),
    (4, "monitoring", "PromQL, recording rules, the dashboard; series and the Prometheus client"),
    (5, "rules", "validation: a registry of rules with ids"),
    (5, "k8s", "the desired cluster objects (manifests, Kueue, monitoring), render, and the cluster's API"),
    (6, "analysis", "the capacity plan, the diff, usage arithmetic, git sides"),
    (7, "present", "formatting for people: text, markdown, JSON"),
    (8, "deploy", "pulumi runs on the Automation API and the dynamic providers"),
    (9, "cli", "the `gpupool` command"),
    (9, "components", "the Pulumi components and program"),
    (10, "__main__", "`python -m gpupool`"),
)
FLOOR = {stage: floor for floor, stage, _ in LAYERS}


def _module(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _modules(root: Path = REPO) -> dict[str, Path]:
    return {_module(root, p): p for pkg in PACKAGES if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py")}


def _imports(root: Path = REPO) -> dict[str, set[str]]:
    """module -> the modules of this tree it imports, wherever the import statement stands."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # `from .x import y` inside components/
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
                for alias in node.names:
                    # `from gpupool.k8s import rollout` imports the module gpupool.k8s.rollout; a name that is
                    # no module is taken from BASE
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _stage(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "gpupool":
        return parts[0]
    return parts[1] if len(parts) > 1 else "gpupool"


def _may_import(importer: str, imported: str) -> bool:
    a, b = _stage(importer), _stage(imported)
    return a == b or FLOOR[b] < FLOOR[a]


def _arrows_up(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{mod} ({_stage(mod)}, floor {FLOOR[_stage(mod)]}) imports {dep} ({_stage(dep)}, floor {FLOOR[_stage(dep)]})"
        for mod, deps in graph.items()
        for dep in deps
        if not _may_import(mod, dep)
    )


def _reach_up(graph: dict[str, set[str]]) -> list[str]:
    """Transitive reach: from each module, every module its imports lead to (by the shortest chain) that its
    stage may not import."""
    wrong = []
    for start in sorted(graph):
        before: dict[str, str] = {start: ""}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for dep in sorted(graph[node]):
                if dep in before:
                    continue
                before[dep] = node
                queue.append(dep)
                if not _may_import(start, dep):
                    chain = [dep]
                    while chain[-1] != start:
                        chain.append(before[chain[-1]])
                    wrong.append(" -> ".join(reversed(chain)))
    return wrong


def _circles(graph: dict[str, set[str]]) -> list[str]:
    # A package's __init__ importing its own submodules is how packages register them, not a circle.
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    circles = []
    for start in sorted(edges):
        stack = [(start, (start,))]
        seen = set()
        while stack:
            node, path = stack.pop()
            for dep in edges[node]:
                if dep == start:
                    circles.append(" -> ".join((*path, dep)))
                elif dep not in seen and dep > start:  # each circle once, from its smallest module
                    seen.add(dep)
                    stack.append((dep, (*path, dep)))
    return circles


def test_every_top_level_folder_and_module_has_a_row():
    top = {p.stem for p in (REPO / "gpupool").iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    top |= {p.name for p in (REPO / "gpupool").iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    top |= {"gpupool", "components"}
    assert len(FLOOR) == len(LAYERS), "a stage has two rows"
    assert set(FLOOR) == top, {"without a row": sorted(top - set(FLOOR)), "row of nothing": sorted(set(FLOOR) - top)}
    assert {_stage(m) for m in _modules()} == top


def test_no_stage_imports_a_stage_above_it():
    assert not _arrows_up(_imports())


def test_no_stage_reaches_a_stage_above_it_through_any_chain():
    assert not _reach_up(_imports())


def test_no_import_circle():
    assert not _circles(_imports())


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for pkg in {Path(rel).parent for rel in files}:
        while pkg != Path("."):
            (root / pkg / "__init__.py").touch()
            pkg = pkg.parent
    return root


def test_the_checks_see_what_a_function_level_import_hides(tmp_path):
    """The kind of import that once hid a circle through gpupool/monitoring and arrows running back up: inside
    a function, from a lower stage to a higher one, and a chain whose every step looks harmless alone."""
    root = _tree(
        tmp_path,
        {
            "gpupool/model/facts.py": "def f():\n    from gpupool.analysis import plan\n    return plan\n",
            "gpupool/analysis/plan.py": "from gpupool.model import facts\n",
            "gpupool/k8s/objects.py": "from gpupool.model import facts\n",
            "components/program.py": "from . import tiers\n",
            "components/tiers.py": "from gpupool.k8s import objects\n",
        },
    )
    graph = _imports(root)
    assert graph["gpupool.model.facts"] == {"gpupool.analysis.plan"}
    assert graph["components.program"] == {"components.tiers"}
    assert _arrows_up(graph) == [
        "gpupool.model.facts (model, floor 3) imports gpupool.analysis.plan (analysis, floor 6)"
    ]
    # k8s reaches analysis through model: each chain is named
    assert "gpupool.k8s.objects -> gpupool.model.facts -> gpupool.analysis.plan" in _reach_up(graph)
    assert _circles(graph) == ["gpupool.analysis.plan -> gpupool.model.facts -> gpupool.analysis.plan"]


DESIGN = REPO / "docs" / "explanation" / "design.md"
BEGIN, END = (
    "<!-- BEGIN layers: generated by tests/test_layers.py from LAYERS; do not edit by hand -->",
    "<!-- END layers -->",
)


def _where(stage: str) -> str:
    if stage == "gpupool":
        return "`gpupool/__init__.py`"
    if stage == "components":
        return "`components/`"
    return f"`gpupool/{stage}.py`" if (REPO / "gpupool" / f"{stage}.py").is_file() else f"`gpupool/{stage}/`"


def layers_table() -> str:
    """LAYERS as docs/explanation/design.md shows them: the top floor first."""
    rows = ["| floor | stage | holds |", "| ---: | --- | --- |"]
    rows += [f"| {floor} | {_where(stage)} | {holds} |" for floor, stage, holds in sorted(LAYERS, key=lambda r: -r[0])]
    return "\n".join(rows)


def test_documented_layers_are_the_table():
    text = DESIGN.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{DESIGN}: the generated layers block is missing"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    wanted = f"{head}{BEGIN}\n{layers_table()}\n{END}{tail}"
    if os.environ.get("GPUPOOL_UPDATE_GOLDEN"):
        DESIGN.write_text(wanted, encoding="utf-8")
    assert text == wanted, (
        "docs/explanation/design.md's layers differ from LAYERS; regenerate with GPUPOOL_UPDATE_GOLDEN=1"
    )


def test_the_presenters_run_no_mig_solver():
    """Issue 38: the diff's MIG placements are solved once, on the analysis side, and carried in the result; no
    module of gpupool/present calls the placement solver (gpupool.gpu.mig's solving functions) again."""
    gpu_mig = ast.parse((REPO / "gpupool" / "gpu" / "mig.py").read_text())
    assert "check_layout" in {n.name for n in gpu_mig.body if isinstance(n, ast.FunctionDef)}
    for path in sorted((REPO / "gpupool" / "present").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "gpupool.gpu.mig":
                assert "check_layout" not in {a.name for a in node.names}, path
            if isinstance(node, ast.Attribute) and node.attr == "check_layout":
                raise AssertionError(f"{path}: calls check_layout")
