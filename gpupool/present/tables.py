"""The one table helper: aligned text columns and GitHub markdown tables, and `Table`, a titled table that
`gpupool plan` and `gpupool usage` print either way.

Cells may hold text from a spec: text tables show it through `safe` (no escape sequence reaches a terminal),
markdown tables through `markdown.cell` (no cell text ends a row or adds a block)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.present.markdown import cell, inline
from gpupool.present.text import safe


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Aligned columns separated by two spaces; columns in `right` are right-aligned (numbers)."""
    rows = [[safe(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows]) + "\n"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    sep = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Table:
    """A titled table of text cells; the columns in `right` hold numbers (right-aligned)."""

    title: str
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    right: tuple[int, ...] = ()

    def text(self) -> str:
        return f"{self.title}\n" + text_table(self.headers, self.rows, self.right)

    def markdown(self) -> str:
        return f"### {inline(self.title)}\n\n" + md_table(self.headers, self.rows, self.right)
