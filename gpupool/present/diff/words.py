"""Wording the diff's text and markdown share: counted nouns and lists of names."""

from __future__ import annotations

from collections.abc import Iterable


def counted(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def name_list(names: Iterable[str], shown: int = 10) -> str:
    names = list(names)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" … and {more:,} more" if more > 0 else "")


def counts_text(parts: list[tuple[int, str]]) -> str:
    return ", ".join(f"{n:,} {what}" for n, what in parts if n) or "none"
