"""Tenant text cannot change the structure of what reviewers read (issue 34, class 3).

Two lines of defence. Validation refuses line breaks and control characters in every string of a spec or
tenant file (GP810), by location and without quoting them. And whatever reaches the presenters anyway (an
invalid HEAD is still diffed; the rule may be suppressed or a field added later) is escaped: the pull-request
comment is parsed with a CommonMark parser (markdown-it-py, with GitHub's tables and strikethrough), and its
structure (every block token, every table row and cell, every fence, heading and HTML block, the inline
markup) must be the same for hostile text as for benign text of the same length; the text output must hold
no control character but the newlines gpupool puts between lines.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from gpupool.analysis import diff as diffmod
from gpupool.analysis.sides import load_side
from gpupool.cli.main import main
from gpupool.present import diff as present
from gpupool.present import markdown as md
from gpupool.present import plan as planfmt
from gpupool.present.text import safe
from gpupool.rules.engine import validate_file
from gpupool.rules.registry import RULES, Rule
from tests.test_diff import POOLS, TENANTS, TIERS, stack, with_tenants

PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])

# Each tries to change the comment's structure one way; each is also tried at the start of a field.
PAYLOADS = {
    "verdict": "x\n\n**✓ Routine** nothing to see\n\n",
    "fence": "\n```mermaid\ngraph TD; A-->B\n```\n",
    "tilde-fence": "\n~~~\n",
    "open-fence": "```",
    "table-row": " | forged | cell |\n| --- | --- |\n| a | b |",
    "pipe": "a|b",
    "html": "<details open><summary>ok</summary>\n\n<!-- ",
    "heading": "\n# ✓ Routine\n",
    "heading-inline": "# ✓ Routine",
    "setext": "\n===\n",
    "list": "\n- [x] approved\n1. one",
    "ordered": "1. one",
    "bullet": "- one",
    "quote": "\n> [!CAUTION]\n> ok",
    "emphasis": "**✓ Routine** _a_ ~~b~~ `c` *d*",
    "backslash": "\\",
    "code-span": "``",
    "links": "&lt;b&gt; [link](https://x) ![i](https://x) <https://x> @org/team",
    "math": "$\\color{green}{ok}$",
    "indent": "    code",
    "terminal": "\x1b[2K\x1b[1A\r\x08\x9b2K\x1b]0;t\x07\x7f",
    "unicode-lines": "\u2028\u2029\u0085\u202e\t",
}

# Characters that must not reach a terminal: C0 (newline aside, between gpupool's own lines), DEL, C1, Unicode
# line separators and bidirectional controls.
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _raw_controls(text: str) -> list[str]:
    return [repr(c) for c in text if (c != "\n" and unicodedata.category(c) in ("Cc", "Zl", "Zp")) or c in _BIDI]


def structure(markdown: str, fence_lines: bool = True) -> list[tuple]:
    """What a reviewer's eye takes for structure: each token's type, tag, nesting and level, a fence's
    language and line count, and the inline markup (adjacent text tokens counted as one)."""
    out = []
    for t in PARSER.parse(markdown):
        kids: list[str] = []
        for c in t.children or []:
            if not (c.type == "text" and kids and kids[-1] == "text"):
                kids.append(c.type)
        fence = (t.info, t.content.count("\n") if fence_lines else 0) if t.type in ("fence", "code_block") else None
        out.append((t.type, t.tag, t.nesting, t.level, fence, tuple(kids)))
    return out


def benign(payload: str) -> str:
    return "b" * len(payload)


# -- the escapers, in every context the comment uses -------------------------------------------------

CONTEXTS = {
    "paragraph": "{x} and more\n",
    "bold": "**{x}** Plan: 1 tenant\n",
    "list-item": "- {x}\n- next\n",
    "alert-box": "> [!WARNING]\n> - **title:** {x}\n> - next\n",
    "table-cell": "|  | TENANT CHANGE |\n|---|---|\n| ⚠ | {x} |\n| ~ | next |\n",
    "summary": "<details open><summary>{x}</summary>\n\n- item\n\n</details>\n",
    "nested-list": "- **sentence**\n  - {x}\n  - next\n",
}


@pytest.mark.parametrize("context", sorted(CONTEXTS))
@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("where", ["start", "end"])
def test_inline_text_adds_no_structure_in_any_context(context, name, where):
    payload = PAYLOADS[name]

    def doc(x: str) -> str:
        field = x + "team" if where == "start" else "team" + x
        return CONTEXTS[context].format(x=(md.html_text if context == "summary" else md.inline)(field))

    assert structure(doc(payload)) == structure(doc(benign(payload)))
    assert _raw_controls(doc(payload)) == []


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_code_spans_and_fences_hold_any_text(name):
    payload = PAYLOADS[name]

    def span(x: str) -> str:
        return f"- changed {md.code(x)}: {md.code(x + '`')} → {md.code('`' + x)}\n"

    def fence(x: str) -> str:  # a fence's body is lines by design: whatever they hold, the fence holds them
        return "intro\n\n" + md.fenced(f"line {x}\n```\n~~~\nend", "diff") + "\nafter\n"

    assert structure(span(payload)) == structure(span(benign(payload)))
    assert structure(fence(payload), fence_lines=False) == structure(fence(benign(payload)), fence_lines=False)
    assert _raw_controls(span(payload) + fence(payload)) == []


def test_ordinary_text_reads_as_before():
    """Escaping changes nothing for the names gpupool normally prints."""
    for text in ("team-a", "nvidia.com/mig-3g.40gb", "serviceaccount:ci:deployer", "cc-4100", "2 → 1 (-1)"):
        assert md.inline(text) == text
        assert safe(text) == text
    assert md.code("tenant-a-owners.yaml") == "`tenant-a-owners.yaml`"
    assert safe("a\x1bb\nc") == "a\\x1bb\\nc"


# -- the diff, end to end, with validation off -------------------------------------------------------


@pytest.fixture
def rules_off(monkeypatch):
    """Bypass the first line of defence (GP810, and the owner and node-name rules that refuse some of the
    payloads), as a suppressed rule, an invalid HEAD or a field added later would."""
    for rule_id in ("GP803", "GP804", "GP810", "GP902"):
        r = RULES[rule_id]  # GP810 is new with this test: before it, only the escaping stood in the way
        monkeypatch.setitem(RULES, rule_id, Rule(r.id, r.title, None, r.doc))


def _head(root: Path, text: str) -> Path:
    """A change whose owners, tier description and node names all carry TEXT (between letters: an owner
    with spaces at its ends is no group, and would not be rendered; the payload at the very start of a field
    is tried on the presenter directly below)."""
    text = f"o{text}o"
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], nodes=[*pools[0]["nodes"], "gpu-" + text])
    tiers = [dict(t) for t in TIERS]
    tiers[1] = dict(tiers[1], description=text + " standard")
    owners = dict(TENANTS["inference"], owners=["oncall", text, text + "-2"])
    vision = {"name": "vision", "tier": "standard", "owners": [text], "gpus": {"nvidia.com/gpu.shared": 1}}
    return stack(root, pools=pools, tiers=tiers, tenants=with_tenants(inference=owners, vision=vision))


def _diff(capsys, base: Path, head: Path, fmt: str) -> str:
    code = main(["diff", str(base), str(head), "-o", fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_a_hostile_tenant_forges_no_structure_in_the_comment(rules_off, tmp_path, capsys, name):
    payload = PAYLOADS[name]
    base = stack(tmp_path / "base")
    hostile = _diff(capsys, base, _head(tmp_path / "hostile", payload), "markdown")
    plain = _diff(capsys, base, _head(tmp_path / "plain", benign(payload)), "markdown")
    assert "owners or ownerRole change" in hostile and "vision" in hostile  # the payload did reach the comment
    assert structure(hostile) == structure(plain)
    assert _raw_controls(hostile) == []


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_a_hostile_tenant_sends_no_control_character_to_the_terminal(rules_off, tmp_path, capsys, name):
    payload = PAYLOADS[name]
    base = stack(tmp_path / "base")
    hostile = _diff(capsys, base, _head(tmp_path / "hostile", payload), "text")
    plain = _diff(capsys, base, _head(tmp_path / "plain", benign(payload)), "text")
    assert _raw_controls(hostile) == []
    assert len(hostile.splitlines()) == len(plain.splitlines())  # no line added, none overwritten


# -- the presenter fed directly: every string of the diff hostile ------------------------------------

# Strings the presenter compares with its own words to choose a branch, and the config diff (lines by design:
# a unified diff of YAML gpupool dumped, whose strings the YAML emitter quotes); the rest is text from specs.
_KEEP = {"kind", "side", "section", "config", "cause", "unified"}


def _mutate(value, f):
    if isinstance(value, enum.Enum):
        return value
    if isinstance(value, str):
        return f(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            fl.name: _mutate(getattr(value, fl.name), f)
            for fl in dataclasses.fields(value)
            if fl.init and fl.name not in _KEEP
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, (list, tuple)):
        return type(value)(_mutate(v, f) for v in value)
    if isinstance(value, dict):
        return {_mutate(k, f): _mutate(v, f) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return type(value)(_mutate(v, f) for v in value)
    return value


@pytest.fixture(scope="module")
def rich_diff(tmp_path_factory):
    """A diff with a bit of everything: tenants onboarded, changed, removed; owners, nodes, MIG, objects."""
    root = tmp_path_factory.mktemp("rich")
    base = stack(root / "base")
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], nodes=["gpu-l4-2"], sharing={"timeSlicing": {"replicas": 2}})
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    tiers = [dict(TIERS[0], description="Customer-facing"), TIERS[1]]
    head = stack(
        root / "head",
        pools=pools,
        tiers=tiers,
        tenants=with_tenants(
            inference=dict(
                TENANTS["inference"], owners=["oncall", "sre"], costCenter="cc-2", gpus={"nvidia.com/mig-3g.40gb": 2}
            ),
            notebooks=None,
            vision={"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 1}},
        ),
    )
    b, h = load_side("BASE", base, "base/spec.yaml"), load_side("HEAD", head, "head/spec.yaml")
    return b, h, diffmod.compare(b, h)


@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("where", ["start", "end"])
def test_no_string_of_a_diff_changes_the_comments_structure(rich_diff, name, where):
    base, head, d = rich_diff
    payload = PAYLOADS[name]

    def text(p: str):
        return (lambda s: p + s) if where == "start" else (lambda s: s + p)

    hostile, plain = _mutate(d, text(payload)), _mutate(d, text(benign(payload)))
    for fmt in (
        lambda x: present.format_markdown(base, head, x, True, limit=None),
        lambda x: present.format_markdown(base, head, x, True),
    ):
        out = fmt(hostile)
        assert structure(out) == structure(fmt(plain))
        assert _raw_controls(out) == []
    out = present.format_text(base, head, hostile, True)
    assert _raw_controls(out) == []
    assert len(out.splitlines()) == len(present.format_text(base, head, plain, True).splitlines())


def test_the_rich_diff_has_what_the_mutation_test_needs(rich_diff):
    _, _, d = rich_diff
    kinds = {t.kind for t in d.tenants}
    assert kinds == {diffmod.Kind.ADDED, diffmod.Kind.CHANGED, diffmod.Kind.REMOVED}
    assert d.objects and d.pools and d.configs and d.evicting


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_plan_output_holds_any_name(name):
    """gpupool plan's markdown and tables: no name, cost centre or path that got this far adds structure to
    the markdown, a line to the table, or an escape sequence to the terminal."""
    from gpupool.analysis import plan as planmod

    result = validate_file(Path(__file__).parent.parent / "stacks" / "dev" / "spec.yaml")
    assert result.spec is not None
    plan = planmod.compute(result.spec)
    payload = PAYLOADS[name]

    def render(p: str) -> tuple[str, str]:
        mutated = _mutate(plan, lambda s: s + p)
        return planfmt.format_markdown(mutated), planfmt.format_table(mutated)

    (hostile_md, hostile_table), (plain_md, plain_table) = render(payload), render(benign(payload))
    assert structure(hostile_md) == structure(plain_md)
    assert _raw_controls(hostile_md + hostile_table) == []
    assert len(hostile_table.splitlines()) == len(plain_table.splitlines())


# -- validation: GP810 ------------------------------------------------------------------------------

HOSTILE = {
    "newline": "team\nforged",
    "crlf": "team\r\n**✓ Routine**",
    "tab": "team\tx",
    "esc": "team\x1b[2K",
    "osc": "team\x1b]0;title\x07",
    "backspace": "team\x08\x08",
    "nul": "team\x00",
    "del": "team\x7f",
    "csi-c1": "team\x9b2K",
    "nel": "team\x85",
    "line-separator": "team\u2028x",
    "bidi": "team\u202ex",
}

SPEC = """apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster:
  name: dev
  gpuOperator: {{chartVersion: v26.7.0, repository: {repository}, values: {{{values}}}}}
nodePools:
  - {{name: l4, gpu: {gpu}, gpusPerNode: 4, nodes: [gpu-l4-1, {node}], sharing: {{timeSlicing: {{replicas: 2}}}}}}
tiers:
  - {{name: standard, priority: 100, description: {description}}}
tenantFiles: [tenants/]
"""
TENANT = "name: team\ntier: standard\nowners: [team, {owner}]\ngpus: {{nvidia.com/gpu.shared: 1}}\n"
# Field: (the file it is in, its spec path).
FIELDS = {
    "owner": ("tenants/team.yaml", "tenants[team].owners[1]"),
    "description": ("spec.yaml", "tiers[standard].description"),
    "node": ("spec.yaml", "nodePools[l4].nodes[1]"),
    "gpu": ("spec.yaml", "nodePools[l4].gpu"),
    "repository": ("spec.yaml", "cluster.gpuOperator.repository"),
    "values": ("spec.yaml", "cluster.gpuOperator.values.note"),
}
PLAIN = {
    "owner": "team-b",
    "description": "Batch",
    "node": "gpu-l4-2",
    "gpu": "L4",
    "repository": "https://helm.ngc.nvidia.com/nvidia",
    "values": "note: x",
}


def _write(tmp_path: Path, field: str, text: str) -> Path:
    values = dict(PLAIN)
    values[field] = f"note: {json.dumps(text)}" if field == "values" else json.dumps(text)
    for k in FIELDS:  # every other field as a one-character value, so the columns below hold
        if k != field:
            values[k] = "note: x" if k == "values" else "x"
    (tmp_path / "tenants").mkdir(exist_ok=True)
    (tmp_path / "spec.yaml").write_text(SPEC.format(**{k: v for k, v in values.items() if k != "owner"}))
    (tmp_path / "tenants" / "team.yaml").write_text(TENANT.format(owner=values["owner"]))
    return tmp_path / "spec.yaml"


def _gp810(tmp_path: Path, field: str, text: str):
    path = _write(tmp_path, field, text)
    return [d for d in validate_file(path, cwd=tmp_path).report.sorted() if d.rule == "GP810"]


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_control_characters_are_refused_in_every_free_text_field(tmp_path, field, kind):
    text = HOSTILE[kind]
    found = _gp810(tmp_path, field, text)
    if field == "values" and kind in ("newline", "tab"):
        assert found == []  # Helm values are passed as written: a multi-line string is ordinary there
        return
    file, path = FIELDS[field]
    # Where the quoted value starts in the file we wrote (1-based line and column).
    lines = (tmp_path / file).read_text().splitlines()
    [(line, column)] = [(i + 1, x.index(json.dumps(text)) + 1) for i, x in enumerate(lines) if json.dumps(text) in x]
    assert [(d.location.file, d.location.line, d.location.column, d.path) for d in found] == [
        (file, line, column, path)
    ]
    [d] = found
    assert d.is_error and "team" not in d.message and "one line of printable text" in d.message


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_plain_text_passes(tmp_path, field):
    assert _gp810(tmp_path, field, PLAIN[field] if field != "values" else "multi\nline\tconfig") == []


def test_markdown_characters_stay_allowed_in_owners(tmp_path):
    """Kubernetes accepts any non-empty group name and identity providers issue names with `_` and more:
    GP810 refuses no printable character; the presenters escape them."""
    assert _gp810(tmp_path, "owner", "gpu_admins*|`<b>[x]~") == []


def test_a_control_character_in_a_key_is_refused_by_position(tmp_path):
    path = _write(tmp_path, "values", "x")
    path.write_text(path.read_text().replace('values: {note: "x"}', 'values: {"no\\x1bte": 1}'))
    found = [d for d in validate_file(path, cwd=tmp_path).report.sorted() if d.rule == "GP810"]
    assert [(d.location.line, d.path) for d in found] == [(5, "cluster.gpuOperator.values[key 0]")]
    assert "\x1b" not in found[0].message and "\\x1b" not in found[0].message


def test_the_diff_of_an_invalid_head_names_gp810(tmp_path, capsys):
    base = stack(tmp_path / "base")
    head = _head(tmp_path / "head", PAYLOADS["verdict"])
    code = main(["diff", str(base), str(head), "-o", "markdown"])
    out, err = capsys.readouterr()
    assert code == 1 and "error GP810" in out and "[GP810]" in err
    assert "✗ HEAD is INVALID" in out


def test_the_removal_row_keeps_its_code_span(rich_diff):
    """The one row with gpupool's own markup in it reads as before: its text escaped, the field as code."""
    base, head, d = rich_diff
    out = present.format_markdown(base, head, d, True, limit=None)
    assert "To delete it, mark the tenant `offboarded: true` first, apply, then remove it |" in out
    assert "&#32;" not in out
