"""Fitting the comment into GitHub's limit: sections of ranked items, cut least important first."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.present.markdown import html_text

GITHUB_COMMENT_LIMIT = 65_536  # characters GitHub accepts in one comment body


# What is kept longest when the comment must be cut (lower first). The verdict, the summary line, the errors
# and the alerts are never cut: they are the fixed parts, outside every section.
RANK_HEADROOM = 1
RANK_MIG = 2  # evictions and slice maps
RANK_TENANT_RISK = 3  # access, offboarding, removal, stack moves
RANK_CONFIG = 4
RANK_QUOTA = 5
RANK_METADATA = 6
RANK_OBJECT = 7
RANK_PREVIEW = 8


# marocchino/sticky-pull-request-comment adds "\n<!-- Sticky Pull Request Comment{header} -->" to the body
# (src/comment.ts, headerComment/bodyWithHeader); the header is gpupool-diff-<stack>. Kept free for it.
STICKY_MARKER_MARGIN = 256


def comment_length(text: str) -> int:
    """The length GitHub's limit is checked against, counted so that it can only over-estimate: UTF-16 code
    units (an astral character counts twice), never fewer than characters."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Item:
    text: str
    rank: int


@dataclass
class Section:
    """A collapsible part of the comment whose items can be cut to fit. Items are shown by rank (most
    important first), so cutting from the end of a section cuts its least important items."""

    key: str  # what the cut note calls its items
    summary: str
    items: list[Item]
    head: str = ""  # fixed text before the items (a table header, an intro)
    tail: str = ""  # fixed text after them (the chart, the preview's summary)
    sep: str = "\n"
    open: bool = False

    def __post_init__(self) -> None:
        self.items = sorted(self.items, key=lambda i: i.rank)  # stable: equal ranks keep their order

    def render(self, kept: int | None = None) -> str:
        shown = self.items if kept is None else self.items[:kept]
        texts = [i.text for i in shown]
        body = self.head + self.sep.join(texts) + ("\n" if texts and not self.sep.endswith("\n\n") else "")
        cut = len(self.items) - len(shown)
        if cut:
            body += f"\n✂ {cut:,} more {self.key} cut to fit the comment limit; see the full diff.\n"
        attr = " open" if self.open else ""
        return f"<details{attr}><summary>{html_text(self.summary)}</summary>\n\n{body}{self.tail}\n</details>\n"


def _cut_note(sections: list[Section], kept: list[int], where: str) -> str:
    cut = [(s.key, len(s.items) - k) for s, k in zip(sections, kept) if len(s.items) > k]
    if not cut:
        return ""
    counts = ", ".join(f"{n:,} {key}" for key, n in cut)
    return f"✂ **Cut to fit GitHub's {GITHUB_COMMENT_LIMIT:,}-character comment limit:** {counts}; {where}.\n"


def _assemble(fixed: list[str], sections: list[Section], kept: list[int], where: str) -> str:
    parts = fixed + [s.render(k) for s, k in zip(sections, kept)]
    note = _cut_note(sections, kept, where)
    return "\n".join(parts + ([note] if note else []))


def fit(fixed: list[str], sections: list[Section], budget: int, where: str) -> str | None:
    """The comment with as many items as fit in BUDGET, the least important cut first; None when even the
    fixed parts with every section emptied do not fit."""
    full = [len(s.items) for s in sections]
    text = _assemble(fixed, sections, full, where)
    if comment_length(text) <= budget:
        return text
    # Every item in the order it is cut: highest rank first, and within a rank the later ones first.
    order = sorted(((it.rank, si, ii) for si, s in enumerate(sections) for ii, it in enumerate(s.items)), reverse=True)

    def kept_after(n: int) -> list[int]:
        kept = list(full)
        for _rank, si, ii in order[:n]:
            kept[si] = min(kept[si], ii)
        return kept

    def fits(n: int) -> str | None:
        t = _assemble(fixed, sections, kept_after(n), where)
        return t if comment_length(t) <= budget else None

    if fits(len(order)) is None:
        return None
    # Fewest cuts that fit: length falls with every cut but for the one-off cut notes, so search, then
    # step on until the measured text fits (it does at len(order)).
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    for n in range(lo, len(order) + 1):
        t = fits(n)
        if t is not None:
            return t
    return None  # unreachable: fits(len(order)) held
