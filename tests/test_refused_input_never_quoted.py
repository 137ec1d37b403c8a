"""Refused input is reported by location, never quoted back (CONTRIBUTING.md, "How diagnostics treat input").

Hostile keys and values (quotes, newlines that would forge another diagnostic or a GitHub workflow command,
terminal escape sequences, a very long string, shell metacharacters) go through `gpupool validate` in every
output format; none of their text may come out, and each is still located at its own FILE:LINE:COL with a
spec path that names a refused key by its position.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from gpupool.cli.main import main
from gpupool.present.diagnostics import FORMATS

MARK = "HOSTILE7"  # in every hostile string: a hit means some of it was quoted back
HOSTILE = {
    "quote": f"nvidia.com/{MARK}') x",
    "newline": f"a{MARK}\n::error file=x.yaml,line=1::{MARK} forged",
    "ansi": f"\x1b[31m{MARK}\x1b[0m\x1b]0;title\x07",
    "long": MARK + "A" * 5000,  # as a key, YAML itself refuses it (a plain key holds at most 1024 characters)
    "long-key": MARK + "A" * 900,
    # Every character allowed: only its length, or a rule (no pool advertises it), refuses it.
    "long-valid": f"nvidia.com/{MARK}" + "A" * 900,
    "shell": f"$(touch /tmp/{MARK})`id`;|&>x",
}

SPEC = """apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: dev}
nodePools:
  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], sharing: {timeSlicing: {replicas: 2}}}
tiers:
  - {name: standard, priority: 100}
tenantFiles: [tenants/]
"""


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


# Where the hostile text goes in tenants/team.yaml; "{h}" is the hostile text as a quoted scalar. Each case:
# (tenant file, the 1-based line and column of the refused key or value, what the path must read).
PLACES = {
    "gpus-key": ("gpus:\n  nvidia.com/gpu.shared: 1\n  {h}: 1\n", (6, 3), "tenants[team].gpus[key 1]"),
    "labels-key": ("gpus: {{nvidia.com/gpu.shared: 1}}\nlabels:\n  team: a\n  {h}: b\n", (7, 3), "labels[key 1]"),
    "max-per-pod-key": (
        "gpus: {{nvidia.com/gpu.shared: 1}}\nmaxPerPod:\n  {h}: 1\n",
        (6, 3),
        "tenants[team].maxPerPod[key 0]",
    ),
    "unknown-key": ("gpus: {{nvidia.com/gpu.shared: 1}}\n{h}: 1\n", (5, 1), "tenants[team][key 4]"),
    "duplicate-key": ("gpus:\n  {h}: 1\n  {h}: 2\n", (6, 3), ".gpus[key 0]"),
    "key-and-value": ("gpus:\n  {h}: {h}\n", (5, 3), "tenants[team].gpus[key 0]"),
    "cost-center": ("gpus: {{nvidia.com/gpu.shared: 1}}\ncostCenter: {h}\n", (5, 13), "tenants[team].costCenter"),
    "label-value": (
        "gpus: {{nvidia.com/gpu.shared: 1}}\nlabels: {{team: {h}}}\n",
        (5, 16),
        "tenants[team].labels.team",
    ),
    "owner-role": ("gpus: {{nvidia.com/gpu.shared: 1}}\nownerRole: {h}\n", (5, 12), "tenants[team].ownerRole"),
    "quota-type": ("gpus: {{nvidia.com/gpu.shared: {h}}}\n", (4, 31), 'tenants[team].gpus["nvidia.com/gpu.shared"]'),
    "quantity": ("gpus: {{nvidia.com/gpu.shared: 1}}\ncompute: {{cpu: {h}}}\n", (5, 16), "tenants[team].compute.cpu"),
    "offboarded-type": ("gpus: {{nvidia.com/gpu.shared: 1}}\noffboarded: {h}\n", (5, 13), "tenants[team].offboarded"),
    "owner-service-account": (
        "gpus: {{nvidia.com/gpu.shared: 1}}\nowners: [team, {sa}]\n",
        (4, 16),
        "tenants[team].owners[1]",
    ),
    "owner-system": ("gpus: {{nvidia.com/gpu.shared: 1}}\nowners: [team, {sys}]\n", (4, 16), "tenants[team].owners[1]"),
}


def _stack(tmp_path, body: str, hostile: str, *, name: str = "team", tier: str = "standard"):
    (tmp_path / "tenants").mkdir()
    (tmp_path / "spec.yaml").write_text(SPEC)
    text = body.format(h=_q(hostile), sa=_q("serviceaccount:" + hostile), sys=_q("system:" + hostile))
    owners = "" if "owners:" in body else "owners: [team]\n"
    (tmp_path / "tenants" / "team.yaml").write_text(f"name: {name}\ntier: {tier}\n{owners}{text}")
    return tmp_path / "spec.yaml"


def _validate(spec, fmt: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(spec.parent), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["validate", "-o", fmt, spec.name])
    return status, out.getvalue() + err.getvalue()


def _assert_not_quoted(output: str, hostile: str) -> None:
    assert MARK not in output, output[:2000]
    assert "\x1b" not in output and "\x07" not in output, output[:2000]
    assert "A" * 64 not in output
    for piece in ("$(touch", "`id`", "') x", "forged"):
        assert piece not in hostile or piece not in output, output[:2000]


def _diagnostics(spec) -> list[dict]:
    status, out = _validate(spec, "json")
    assert status == 1
    doc = json.loads(out[: out.rindex("}") + 1])
    return [d for s in doc["specs"] for d in s["diagnostics"]]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("place", sorted(PLACES))
def test_refused_text_never_comes_out(tmp_path, place, kind, fmt):
    body, _, _ = PLACES[place]
    spec = _stack(tmp_path, body, HOSTILE[kind])
    status, output = _validate(spec, fmt)
    assert status == 1, output
    assert "Traceback" not in output
    _assert_not_quoted(output, HOSTILE[kind])
    if fmt == "text":  # still one problem per line: a newline in the input forges nothing
        for line in output.splitlines()[:-1]:
            assert line.startswith("tenants/team.yaml:") and line.endswith("]"), line


@pytest.mark.parametrize("place", sorted(PLACES))
def test_refused_input_is_located_and_named_by_position(tmp_path, place):
    body, (line, column), path = PLACES[place]
    spec = _stack(tmp_path, body, HOSTILE["quote"])
    found = [
        d for d in _diagnostics(spec) if (d["file"], d["line"], d["column"]) == ("tenants/team.yaml", line, column)
    ]
    assert found, _diagnostics(spec)
    assert any(d["path"].endswith(path) for d in found), found
    for d in found:  # a message says what would be right, not only that something is wrong
        assert len(d["message"]) > 20 and d["rule"].startswith("GP"), d


@pytest.mark.parametrize("field", ["name", "tier"])
def test_a_refused_tenant_name_or_tier_is_not_quoted_in_any_path(tmp_path, field):
    hostile = HOSTILE["quote"].replace("nvidia.com/", "team")
    spec = _stack(tmp_path, "gpus: {{nvidia.com/gpu.shared: 1}}\n", "", **{field: _q(hostile)})
    for fmt in FORMATS:
        status, output = _validate(spec, fmt)
        assert status == 1
        _assert_not_quoted(output, hostile)
    paths = {d["path"] for d in _diagnostics(spec)}
    # A refused name is not used to name the tenant (its index is); a valid name still is.
    assert ("tenants[0].name" if field == "name" else "tenants[team].tier") in paths, paths


def test_the_known_gpus_key_case_reads_well(tmp_path):
    """The case that started this: a hostile quota key is named by position and told what is allowed."""
    spec = _stack(tmp_path, "gpus:\n  nvidia.com/mig-3g.40gb: 2\n  nvidia.com/mig-2g.20gb: 2\n  {h}: 1\n", "")
    (tmp_path / "tenants" / "team.yaml").write_text(
        'name: team\ntier: standard\nowners: [team]\ngpus:\n  nvidia.com/gpu.shared: 2\n  "nvidia.com/SECRET\') x": 1\n'
    )
    status, output = _validate(spec, "text")
    assert status == 1
    assert "SECRET" not in output
    assert (
        "tenants/team.yaml:6:3: error: tenants[team].gpus[key 1]: this key must be an NVIDIA resource name such as "
        "nvidia.com/gpu, nvidia.com/mig-1g.10gb or nvidia.com/gpu.shared [GP010]"
    ) in output


def test_accepted_keys_and_names_are_still_shown(tmp_path):
    """Only refused text is hidden: a valid tenant name and a valid quota key still name themselves."""
    spec = _stack(tmp_path, "gpus: {{nvidia.com/gpu.shared: -1}}\n", "")
    [d] = [d for d in _diagnostics(spec) if d["rule"] == "GP010"]
    assert d["path"] == 'tenants[team].gpus["nvidia.com/gpu.shared"]'
    assert d["message"] == "-1 is too small; must be at least 0"


def test_a_hostile_tenant_file_name_forges_no_line_and_reaches_no_terminal(tmp_path):
    """A file's name is its location, so it is shown, but with control characters escaped."""
    spec = _stack(tmp_path, "gpus: {{nvidia.com/gpu.shared: 1}}\n", "")
    hostile = tmp_path / "tenants" / f"te\x1b[31mam\n::error file=x.yaml::{MARK}.yaml"
    (tmp_path / "tenants" / "team.yaml").rename(hostile)
    for fmt in FORMATS:
        status, output = _validate(spec, fmt)
        assert status == 1, output
        assert "\x1b" not in output
        lines = output.splitlines()
        if fmt == "text":
            [line] = [line for line in lines if "[GP809]" in line]
            assert line.startswith("tenants/te\\x1b[31mam\\n::error file=x.yaml::") and "declared in a file" in line
        elif fmt == "github":
            assert all(line.startswith(("::error ", "::warning ", "spec.yaml: ")) for line in lines), lines


# Free text (a group owner): every printable character is allowed there (Kubernetes accepts any group name), so
# only the hostile strings holding a line break or a control character are refused: GP810, located, not quoted.
FREE_TEXT = {
    "owner-group": ("gpus: {{nvidia.com/gpu.shared: 1}}\nowners: [team, {h}]\n", (4, 16), "tenants[team].owners[1]"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["newline", "ansi"])
@pytest.mark.parametrize("place", sorted(FREE_TEXT))
def test_control_characters_in_free_text_are_refused_and_never_quoted(tmp_path, place, kind, fmt):
    body, (line, column), path = FREE_TEXT[place]
    spec = _stack(tmp_path, body, HOSTILE[kind])
    status, output = _validate(spec, fmt)
    assert status == 1 and "GP810" in output, output
    _assert_not_quoted(output, HOSTILE[kind])
    if fmt == "text":
        for text_line in output.splitlines()[:-1]:
            assert text_line.startswith("tenants/team.yaml:") and text_line.endswith("]"), text_line
    found = [d for d in _diagnostics(spec) if d["rule"] == "GP810"]
    assert [(d["file"], d["line"], d["column"], d["path"]) for d in found] == [
        ("tenants/team.yaml", line, column, path)
    ]
