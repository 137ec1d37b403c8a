"""The stages import one way (CONTRIBUTING.md): spec/ -> model/ + rules/ -> k8s/ -> components/, with gpu/ (facts
about GPUs and NVIDIA's software) below all of them, and no module imports one that imports it back.

Read from the source with `ast`, function-local imports included: a lazy import hides a circle from Python's
import machinery, not from a reader."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "gpupool"

# Stage -> the stages it must never import (the data flows one way).
FORBIDDEN = {
    "gpu": {"spec", "model", "rules", "k8s", "analysis", "present", "cli"},
    "spec": {"model", "rules", "k8s", "analysis", "present", "cli"},
    "model": {"rules", "k8s", "analysis", "present", "cli"},
    "rules": {"k8s", "analysis", "present", "cli"},
    "k8s": {"rules", "analysis", "present", "cli"},
}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                # `from gpupool.k8s import rollout` imports the module gpupool.k8s.rollout
                found.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_stage_imports_a_stage_above_it():
    wrong = sorted(
        f"{mod} imports {dep}"
        for mod, deps in _imports().items()
        for dep in deps
        if _stage(dep) in FORBIDDEN.get(_stage(mod), set())
    )
    assert not wrong, wrong


def test_no_import_circle():
    graph = _imports()
    # A package's __init__ importing its own submodules is how packages register them, not a circle.
    edges = {m: {d for d in deps if not (m.count(".") == 1 and d.startswith(m + "."))} for m, deps in graph.items()}
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
    assert not circles, circles
