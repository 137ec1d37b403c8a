"""Size limits that refuse new long functions and modules (issue 38 item 5): no function in gpupool/ or components/
over FUNCTION_LINES lines, and no module in gpupool/ over MODULE_LINES, except the ones listed below as they
stand today. A listed one may shrink, never grow; one that drops under the limit must leave the list, so the
list only gets shorter. Lines are counted from the `def` to the function's last line, docstring and comments
included (what a reader has to read)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FUNCTION_LINES = 80
MODULE_LINES = 700

# path::qualified name -> its length when the limit came in (5 Dec 2026). Split them when you touch them. Empty since
# the last five were split (5 Dec 2026): any function over the limit is now refused.
LONG_FUNCTIONS: dict[str, int] = {}
LONG_MODULES: dict[str, int] = {}


def _functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in ("gpupool", "components"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()

            def walk(node: ast.AST, prefix: str, rel: str = rel) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                        name = f"{prefix}{child.name}"
                        found[f"{rel}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                        walk(child, f"{name}.")
                    elif isinstance(child, ast.ClassDef):
                        walk(child, f"{prefix}{child.name}.")

            walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def _modules() -> dict[str, int]:
    return {
        p.relative_to(REPO).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted((REPO / "gpupool").rglob("*.py"))
    }


def _check(sizes: dict[str, int], listed: dict[str, int], limit: int, what: str) -> list[str]:
    problems = []
    for name, lines in sorted(sizes.items()):
        allowed = listed.get(name)
        if allowed is None and lines > limit:
            problems.append(f"{name}: {lines} lines, over the {limit}-line limit for a {what}: split it")
        elif allowed is not None and lines > allowed:
            problems.append(f"{name}: grew from {allowed} to {lines} lines; a listed {what} may only shrink")
    for name in sorted(listed):
        lines = sizes.get(name)
        if lines is None or lines <= limit:
            problems.append(f"{name}: {'gone' if lines is None else f'{lines} lines now'}; remove it from the list")
    return problems


def test_no_new_long_function():
    problems = _check(_functions(), LONG_FUNCTIONS, FUNCTION_LINES, "function")
    assert not problems, "\n".join(problems)


def test_no_new_long_module():
    problems = _check(_modules(), LONG_MODULES, MODULE_LINES, "module")
    assert not problems, "\n".join(problems)


def test_the_check_refuses_a_new_long_function_and_a_grown_one():
    """The check itself, on made-up sizes (so the tests above can fail)."""
    assert _check({"a::f": 81}, {}, 80, "function") == [
        "a::f: 81 lines, over the 80-line limit for a function: split it"
    ]
    assert _check({"a::f": 91}, {"a::f": 90}, 80, "function") == [
        "a::f: grew from 90 to 91 lines; a listed function may only shrink"
    ]
    assert _check({"a::f": 80}, {"a::f": 90}, 80, "function") == ["a::f: 80 lines now; remove it from the list"]
    assert _check({"a::f": 85}, {"a::f": 90}, 80, "function") == []
