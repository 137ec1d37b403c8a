"""Every relative link in README.md, CONTRIBUTING.md and docs/ points at a file that exists, and every
`#anchor` at a heading of that file (GitHub's anchor rules), so moving text between documents cannot
leave a dead link behind."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    dead = []
    for target in links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            dead.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            dead.append(f"{target}: no such heading")
    assert not dead, f"{doc.relative_to(ROOT)}: " + "; ".join(dead)


def test_the_checker_finds_a_dead_link(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# A title\n[ok](#a-title) [bad](#nope) [gone](b.md) `[code](c.md)`\n")
    assert links(doc) == ["#a-title", "#nope", "b.md"]
    assert "a-title" in anchors(doc) and "nope" not in anchors(doc)
