"""The one place text becomes markdown: every string gpupool did not write itself goes through here.

Tenant files are untrusted, and what gpupool prints from them (owners, names, cost centres, descriptions,
messages that name them) lands in a pull-request comment a reviewer trusts. Validation refuses control
characters and line breaks in free text (GP810); these functions are the second line of defence, so that even
text that got past validation shows as the characters it is and never changes the comment's structure:

- `inline(text)` for paragraphs, list items, table cells (it escapes `|`) and bold text: no
  line break (shown as `\\n`), no escape sequence, no emphasis, code span, link, HTML, mention or math, and no
  block marker at its start (`#`, `-`, `1.`): it can add no block, end no table row and open no fence.
- `html_text(text)` for text inside gpupool's own HTML (`<summary>`): an HTML block is not markdown, so only
  `&`, `<`, `>` and mentions are escaped there (a backslash would show), and no line break can end the block.
- `code(text)` for a code span (not in a table cell: GFM splits cells at `|` even inside code spans).
- `fenced(body, lang)` for a fenced block whose fence no line of the body can close.
- `mermaid_text(text)` for a label inside a Mermaid diagram's quoted string.

Control characters are written as the escapes `gpupool.present.text.safe` writes in terminals (`\\x1b`).
"""

from __future__ import annotations

import re

from gpupool.present.text import safe

# Characters with a meaning in inline markdown (CommonMark, plus GitHub's strikethrough, tables and math),
# written with a backslash: any ASCII punctuation may be escaped so, and shows as itself.
_BACKSLASHED = frozenset("\\`*_~|[]$")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MENTION = "@\u200b"  # a zero-width space after @: no @user or @org/team mention (and no notification)
# What opens a block when it starts a line (or a list item's content): an ATX heading, a list item, an ordered
# list item. Thematic breaks and fences start with a character escaped anyway (`*`, `_`, backtick, `~`), and
# `-` is caught here; `>` and `<` become entities.
_BLOCK_START = re.compile(r"^(#{1,6}|[-+]|\d{1,9}[.)])(?=[ \t]|$)")
_EDGE_SPACE = re.compile(r"^ +| +$")


def inline(text: object) -> str:
    """TEXT as inline markdown that shows as itself (see the module docstring)."""
    out = []
    for c in safe(str(text)):
        if c in _BACKSLASHED:
            out.append("\\" + c)
        elif c in _ENTITIES:
            out.append(_ENTITIES[c])
        elif c == "@":
            out.append(_MENTION)
        else:
            out.append(c)
    escaped = "".join(out)
    # Spaces at the edges, as entities: leading ones would indent a list item's content into a code block,
    # and either would keep the `**` gpupool puts around the text from opening or closing (a delimiter run
    # next to whitespace does not count). Tabs are shown as `\t` already.
    escaped = _EDGE_SPACE.sub(lambda m: "&#32;" * len(m.group(0)), escaped)
    marker = _BLOCK_START.match(escaped)
    if marker:
        mark = marker.group(1)
        escaped = (mark[:-1] + "\\" + mark[-1] if mark[-1] in ".)" else "\\" + mark) + escaped[len(mark) :]
    return escaped


def html_text(text: object) -> str:
    """TEXT inside an HTML block gpupool writes (`<details><summary>TEXT</summary>`): entities for `&<>`, no
    mention, control characters and line breaks shown as escapes (a blank line would end the block)."""
    return "".join(_ENTITIES.get(c, _MENTION if c == "@" else c) for c in safe(str(text)))


def cell(text: object) -> str:
    """TEXT as one table cell (GFM): `inline`, whose `\\|` keeps a pipe from ending the cell."""
    return inline(text)


def code(text: object) -> str:
    """A code span no content can break out of: backticks in it get a longer fence, line breaks and control
    characters are shown as escapes. Not for table cells (a `|` in it would still split the cell)."""
    shown = safe(str(text))
    longest = max((len(r) for r in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def fenced(body: str, lang: str = "") -> str:
    """BODY in a fenced code block: the fence is longer than any backtick run in it, and each line is shown
    with its control characters escaped (so no line of it is a longer fence or a terminal escape)."""
    shown = "\n".join(safe(line) for line in body.rstrip("\n").split("\n"))
    longest = max((len(r) for r in re.findall(r"`{3,}", shown)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{shown}\n{fence}\n"


def mermaid_text(text: object) -> str:
    """TEXT for inside a Mermaid quoted string: no quote to end it early and no backtick (Mermaid renders
    "`...`" labels as markdown); control characters shown as escapes."""
    return safe(str(text)).replace('"', "'").replace("`", "'")
