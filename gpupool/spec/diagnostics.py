"""Diagnostics: what gpupool tells a person about their spec.

Every diagnostic names a file, line and column (1-based, as editors count), the path inside the spec,
what is wrong and what would be right. Rendering is `FILE:LINE:COL: error: MESSAGE`, the format editors,
CI annotations and `grep` understand.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Location:
    file: str
    line: int  # 1-based
    column: int  # 1-based


@dataclass(frozen=True)
class Diagnostic:
    severity: str
    location: Location
    path: str  # human path inside the spec, e.g. tenants[team-a].gpus["nvidia.com/gpu"]
    message: str
    rule: str = ""  # rule id (e.g. GP101); empty only for problems found before any rule runs

    def render(self) -> str:
        where = f"{self.location.file}:{self.location.line}:{self.location.column}"
        prefix = f"{self.path}: " if self.path else ""
        tag = f" [{self.rule}]" if self.rule else ""
        return f"{where}: {self.severity}: {prefix}{self.message}{tag}"

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR


@dataclass
class Report:
    """Collects diagnostics in the order found; sorting happens once, at the end."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, severity: str, location: Location, path: str, message: str, rule: str = "") -> None:
        if not location.file.isprintable():
            location = Location(printable(location.file), location.line, location.column)
        self.diagnostics.append(Diagnostic(severity, location, printable(path), printable(message), rule))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]

    def sorted(self) -> list[Diagnostic]:
        seen: set[tuple] = set()
        unique = []
        for d in self.diagnostics:
            key = (d.severity, d.location, d.path, d.message, d.rule)
            if key not in seen:
                seen.add(key)
                unique.append(d)
        return sorted(unique, key=lambda d: (d.location.file, d.location.line, d.location.column))


class SpecError(Exception):
    """Raised when a spec cannot be used; carries every diagnostic found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))


def printable(text: str) -> str:
    """TEXT with control and other non-printable characters written as escapes (\\x1b, \\n). Messages do not
    quote refused input (CONTRIBUTING.md: how diagnostics treat input); this is the net under that rule for
    what a diagnostic must name, such as a tenant file's own name, so that no newline forges another
    diagnostic line and no escape sequence reaches a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """' (did you mean "x"?)' when a close candidate exists, else ''."""
    close = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def one_of(candidates: Iterable[str], limit: int = 12) -> str:
    items = sorted(set(candidates))
    if not items:
        return "(none)"
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")
