"""What `gpupool stacks` reports per stack: the operation, its result and the changes, as lines or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


class StackError(Exception):
    """A stack operation failed; the message says which stack and why (exit status 1)."""


@dataclass
class Outcome:
    stack: str
    op: str
    result: str  # succeeded, failed, skipped
    changes: dict[str, int] = field(default_factory=dict)
    note: str = ""

    def line(self) -> str:
        if self.result in ("failed", "skipped"):
            return f"{self.stack}: {self.op} {self.result} ({self.note})"
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.changes.items()) if k != "same" and n)
        detail = "; ".join(x for x in (counts or "no changes", self.note) if x)
        return f"{self.stack}: {self.op} {self.result} ({detail})"


def summary(outcomes: list[Outcome]) -> str:
    return "".join(o.line() + "\n" for o in outcomes)


def as_json(outcomes: list[Outcome]) -> str:
    return json.dumps([o.__dict__ for o in outcomes], indent=2)
