"""`gpupool diff -o markdown`: the pull-request comment.

Built to always post: the verdict and a terraform-style summary line first, then (for an invalid side) its
errors and the alerts, then the details in collapsed sections. With a limit, the assembled text plus the
sticky-comment marker is measured and the least important items are cut until it fits (budget.py, `RANK_*`:
objects and preview lines go first, headroom rows last), each cut counted; `format_markdown(..., limit=None)`
gives the full, uncut comment (written with `--full-output`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpupool.analysis.diff import SpecDiff
from gpupool.present.diff.budget import GITHUB_COMMENT_LIMIT, STICKY_MARKER_MARGIN, comment_length, fit
from gpupool.present.diff.nodes import mig_lines
from gpupool.present.diff.sections import sections
from gpupool.present.diff.verdict import alert_lines, context_lines, no_changes, summary_line, unknown_lines, verdict
from gpupool.present.diff.words import counted
from gpupool.present.markdown import code, inline

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side
    from gpupool.spec.diagnostics import Diagnostic


MAX_ERRORS_SHOWN = 40  # in the markdown; the full diff and `gpupool validate` have them all
MAX_WARNINGS_SHOWN = 20


@dataclass(frozen=True)
class _Shown:
    """How much of the fixed parts is shown: all of it uncut, less when even they would not fit."""

    errors: int | None = MAX_ERRORS_SHOWN  # per side; None: all
    warnings: int | None = MAX_WARNINGS_SHOWN  # eviction sentences and items not compared
    names: int = 10  # per alert


# Tried in turn until the comment fits: fewer errors, alert names and lines (each says how many more there are).
_SHRINK = (_Shown(), _Shown(10, 10, 5), _Shown(3, 5, 3), _Shown(1, 2, 1), _Shown(0, 0, 0))


@dataclass(frozen=True)
class Heading:
    """What tells the dev comment from the prod one: the stack, the commit, where the full diff is."""

    stack: str | None = None
    commit: str | None = None
    artifact_url: str | None = None  # the workflow run whose artifacts hold the full diff
    artifact: str | None = None  # the artifact's name


_SAFE_URL = re.compile(r"https://[A-Za-z0-9._~:/?#@!$&'*+,;=%-]+")


def _linkable(url: str) -> bool:
    """An https URL of plain characters with no userinfo: a comment is read by everyone who can read the
    pull request, so a `https://user:token@host/...` is not linked (nor quoted)."""
    authority = url[len("https://") :].split("/", 1)[0]
    return bool(_SAFE_URL.fullmatch(url)) and "(" not in url and "@" not in authority


def _title(base: Side, head: Side, h: Heading) -> str:
    parts = ["## gpupool diff"]
    if h.stack:
        parts.append(f"stack {code(h.stack)}")
    if h.commit:
        parts.append(f"commit {code(h.commit[:12])}")
    line2 = f"{code(base.label)} → {code(head.label)}"
    if h.artifact_url and _linkable(h.artifact_url):
        name = f" {code(h.artifact)}" if h.artifact else ""
        line2 += f" · [full diff: artifact{name} of this run]({h.artifact_url.replace(')', '%29')})"
    return " · ".join(parts) + f"\n\n{line2}\n"


def _error_list(side: Side, listed: Sequence[Diagnostic]) -> str:
    """Errors as a list: the location in code, the message as text that wraps."""
    out = []
    for e in listed:
        loc = e.location
        where = code(f"{side.prefix}{loc.file}:{loc.line}:{loc.column}")
        rule = f" {e.rule}" if e.rule else ""
        path = f"{code(e.path)}: " if e.path else ""
        out.append(f"- {where} **{e.severity}{rule}**: {path}{inline(e.message)}")
    return "\n".join(out) + ("\n" if out else "")


def _fixed_parts(base: Side, head: Side, d: SpecDiff, ok: bool, shown: _Shown, heading: Heading) -> list[str]:
    out = [_title(base, head, heading), f"**{inline(verdict(base, head, d, ok))}** Plan: {summary_line(d)}\n"]
    boxes = []
    for side in (head, base):
        if side.valid or not side.exists:
            continue
        errs = side.error_diagnostics
        listed = errs if shown.errors is None else errs[: shown.errors]
        body = _error_list(side, listed)
        more = len(errs) - len(listed)
        if more:
            body += f"\n✂ {counted(more, 'more error')}: see the full diff or run `gpupool validate`.\n"
        these = "this error is" if len(errs) == 1 else f"these {len(errs):,} errors are"
        if side is head:
            # The errors inside the box: a list right after it would run into the next one.
            quoted = "".join(f"> {line}\n" if line else ">\n" for line in body.rstrip("\n").split("\n"))
            boxes.append(
                "> [!CAUTION]\n> **HEAD is invalid: this change cannot be applied** until "
                f"{these} fixed (shown as annotations on the changed lines in CI).\n>\n" + quoted
            )
        else:
            boxes.append(f"BASE has {counted(len(errs), 'error')} (compared with the parts that validated):\n\n" + body)
    out.extend(boxes)
    context = context_lines(base, head, d)
    if context:
        out.append("\n\n".join(inline(c) for c in context) + "\n")
    risks = [f"> - **{inline(title)}:** {inline(what)}" for title, what in alert_lines(d, shown.names)]
    warnings = [f"> - **{inline(sentence)}**" for sentence, _ in mig_lines(d)]
    warnings += [f"> - {inline(x)}" for x in unknown_lines(d)]
    if risks or warnings:
        listed_w = warnings if shown.warnings is None else warnings[: shown.warnings]
        more = len(warnings) - len(listed_w)
        if more:
            listed_w.append(f"> - ✂ … and {more:,} more (see the sections below and the full diff)")
        out.append("> [!WARNING]\n" + "\n".join(risks + listed_w) + "\n")
    nothing = no_changes(head, d)
    if nothing:
        out.append(nothing + "\n")
    return out


def format_markdown(
    base: Side,
    head: Side,
    d: SpecDiff,
    ok: bool,
    *,
    limit: int | None = GITHUB_COMMENT_LIMIT,
    preview: str | None = None,
    full_output: str | None = None,
    heading: Heading | None = None,
) -> str:
    """The pull-request comment. With a `limit` (characters) the comment, and the sticky-comment marker the
    workflow's action adds to it, always fit: the least important items are cut first (RANK_*), then
    fewer errors and alert lines are listed; None keeps everything."""
    heading = heading or Heading()
    parts = sections(d, preview)
    if limit is None:
        fixed = _fixed_parts(base, head, d, ok, _Shown(None, None, 10_000), heading)
        return "\n".join(fixed + [s.render() for s in parts])
    where = (
        f"the full diff is in {code(full_output)} (uploaded as a workflow artifact)"
        if full_output
        else "run `gpupool diff` with `--full-output FILE` for the full diff"
    )
    budget = limit - STICKY_MARKER_MARGIN if limit > 4 * STICKY_MARKER_MARGIN else limit
    for shown in _SHRINK:
        text = fit(_fixed_parts(base, head, d, ok, shown, heading), parts, budget, where)
        if text is not None:
            return text
    # Only the verdict and the summary line are left: pathological input (paths of thousands of characters).
    first = _fixed_parts(base, head, d, ok, _SHRINK[-1], heading)[:2]
    note = f"\n✂ Everything else was cut to fit the comment limit; {where}.\n"
    text = "\n".join(first)
    while comment_length(text + note) > budget and text:
        text = text[: max(0, len(text) - max(1, comment_length(text + note) - budget))]
    return text + note if comment_length(text + note) <= budget else note[:budget]
