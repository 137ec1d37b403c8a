"""gpupool diff on invalid sides: errors first, "cannot be applied", and only what the valid parts support.

A tenant whose file failed to load (or that failed validation) is unreadable/invalid, never "removed", and
nothing derived from an invalid part (its namespace, quotas, a PriorityClass) is listed as a change."""

from __future__ import annotations

import json
import re

import yaml

from tests.test_diff import POOLS, TENANTS, base, run, stack, with_tenants  # noqa: F401 (base: fixture)


def _broken_yaml(root, name):
    (root / "tenants" / f"{name}.yaml").write_text("name: x\ngpus: [1\n")


def test_head_tenant_file_does_not_parse(base, tmp_path, capsys):
    head = stack(tmp_path / "head")
    _broken_yaml(head.parent, "notebooks")
    code, md, err = run(capsys, base, head, "-o", "markdown")
    assert code == 1
    first = md.split("\n\n")[2]  # after the title and the labels: the verdict and the summary line
    assert first.startswith("**✗ HEAD is INVALID (1 error): this change cannot be applied.**")
    assert "[!CAUTION]" in md
    # the error as a list item: the location as code (file, line, column), the message as text that wraps
    diag = next(line for line in err.splitlines() if "notebooks.yaml" in line)
    where, rest = diag.split(": error: ", 1)
    assert f"> - `{where}` **error GP001**: " in md  # inside the CAUTION box
    assert "```" not in md.split("[!CAUTION]")[1].split("[!WARNING]")[0]  # no non-wrapping code block
    assert "until this error is fixed" in md  # not "these 1 error are"
    assert "tenant notebooks is UNREADABLE in HEAD" in md
    assert "removed" not in md.replace("0 to remove", "").replace("**removed**", "")
    assert "RETAINED" not in md and "tenant-notebooks" not in md  # none of its objects listed as deleted
    assert "objects to" not in md.split("\n\n")[2]  # the summary counts only what is not zero
    assert "No changes." not in md and "HEAD's errors may hide changes" in md
    code, out, _ = run(capsys, base, head)  # text says the same
    assert "UNREADABLE" in out and "⚠ notebooks removed" not in out


def test_head_tenant_invalid_tier_is_invalid_not_removed(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="standrd")))
    code, out, err = run(capsys, base, head, "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["head"]["valid"] is False
    assert [t["name"] for t in doc["tenants"] if t["kind"] == "removed"] == []
    assert {(u["section"], u["name"], u["side"]) for u in doc["unknown"]} == {("tenant", "notebooks", "HEAD")}
    assert doc["objects"] == []
    assert doc["summary"]["tenantsRemoved"] == 0 and doc["summary"]["tenantsUnknown"] == 1
    rules = [d["rule"] for d in doc["head"]["diagnostics"] if d["severity"] == "error"]
    assert len(rules) == 1


def test_head_invalid_tier_is_not_a_removed_priority_class(base, tmp_path, capsys):
    """An invalid tier in HEAD: its PriorityClass is not "removed", and its tenants are not either."""
    head = stack(tmp_path / "head")
    spec = yaml.safe_load(head.read_text())
    spec["tiers"][1]["priority"] = "high"  # schema error: the tier drops out of HEAD's model
    head.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, _ = run(capsys, base, head, "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert not [o for o in doc["objects"] if o["objectKind"] == "PriorityClass"], doc["objects"]
    assert ("tier", "standard", "HEAD") in {(u["section"], u["name"], u["side"]) for u in doc["unknown"]}
    assert not [t for t in doc["tenants"] if t["kind"] == "removed"]


def test_head_invalid_keeps_valid_changes(base, tmp_path, capsys):
    """The valid parts still diff: a quota change next to a broken tenant file is reported."""
    t = dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 20})
    head = stack(tmp_path / "head", tenants=with_tenants(inference=t))
    _broken_yaml(head.parent, "notebooks")
    code, out, _ = run(capsys, base, head)
    assert code == 1
    assert "~ inference: nvidia.com/mig-3g.40gb 4 → 2 (-2)" in out
    assert "UNREADABLE" in out and "notebooks removed" not in out


def test_head_missing_tenant_file_is_a_real_removal(base, tmp_path, capsys):
    """A tenant file deleted from a valid HEAD is a removal (with its RETAINED warning), as before."""
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "⚠ notebooks removed without being offboarded" in out and "UNREADABLE" not in out


def test_head_missing_tenant_file_next_to_an_unreadable_one_is_not_called_removed(base, tmp_path, capsys):
    """HEAD deletes notebooks.yaml and adds a file that does not parse: notebooks may have moved into it."""
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    _broken_yaml(head.parent, "notebooks-moved")
    code, out, _ = run(capsys, base, head)
    assert code == 1
    assert "notebooks removed" not in out and "tenant notebooks is UNREADABLE in HEAD" in out


def test_base_invalid_head_valid(base, tmp_path, capsys):
    """Fixing a broken tenant in the PR: HEAD valid gates (exit 0); the tenant is not "onboarded"."""
    bad = stack(tmp_path / "bad", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="nope")))
    head = stack(tmp_path / "head")
    code, out, err = run(capsys, bad, head, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["base"]["valid"] is False and doc["head"]["valid"] is True
    assert not [t for t in doc["tenants"] if t["kind"] == "added"]
    assert {(u["name"], u["side"]) for u in doc["unknown"]} == {("notebooks", "BASE")}
    code, md, _ = run(capsys, bad, head, "-o", "markdown")
    assert "BASE has 1 error" in md and "unknown tier" in md and "nope" not in md
    assert "cannot be applied" not in md


def test_base_unreadable_tenant_file(base, tmp_path, capsys):
    bad = stack(tmp_path / "bad")
    _broken_yaml(bad.parent, "notebooks")
    head = stack(tmp_path / "head")
    code, out, _ = run(capsys, bad, head)
    assert code == 0
    assert "notebooks onboarded" not in out and "tenant notebooks is UNREADABLE in BASE" in out


def test_both_invalid(base, tmp_path, capsys):
    bad = stack(tmp_path / "bad", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="nope")))
    head = stack(tmp_path / "head", tenants=with_tenants(inference=dict(TENANTS["inference"], tier="nope")))
    code, out, _ = run(capsys, bad, head, "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert {(u["name"], u["side"]) for u in doc["unknown"]} == {("notebooks", "BASE"), ("inference", "HEAD")}
    assert doc["tenants"] == [] and doc["objects"] == []


def test_head_without_a_model_compares_nothing(base, tmp_path, capsys):
    head = stack(tmp_path / "head")
    head.write_text("apiVersion: [\n")
    code, md, _ = run(capsys, base, head, "-o", "markdown")
    assert code == 1
    assert "Nothing was compared" in md and "cannot be applied" in md
    assert "removed" not in md.replace("0 to remove", "")


def test_head_over_capacity_is_not_applicable_but_fully_diffed(base, tmp_path, capsys):
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 20, "nvidia.com/mig-1g.10gb": 8})
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, md, _ = run(capsys, base, head, "-o", "markdown")
    assert code == 1
    assert "cannot be applied" in md and "8 → -4 ⚠" in md
    assert "UNREADABLE" not in md and "INVALID in HEAD" not in md


def test_new_invalid_tenant_in_head_is_listed_not_counted(base, tmp_path, capsys):
    new = {"name": "vision", "tier": "nope", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 4}}
    head = stack(tmp_path / "head", tenants=with_tenants(vision=new))
    code, out, _ = run(capsys, base, head, "-o", "json")
    doc = json.loads(out)
    assert code == 1
    assert doc["tenants"] == [] and doc["objects"] == []
    assert [(u["name"], u["side"]) for u in doc["unknown"]] == [("vision", "HEAD")]


def test_invalid_pool_in_head_is_compared_as_base(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], gpusPerNode=0)  # schema error: the pool drops out of HEAD's model
    head = stack(tmp_path / "head", pools=pools)
    code, out, _ = run(capsys, base, head, "-o", "json")
    doc = json.loads(out)
    assert code == 1
    assert ("pool", "a100-mig", "HEAD") in {(u["section"], u["name"], u["side"]) for u in doc["unknown"]}
    assert doc["objects"] == [] and doc["mig"] == []  # no node-label patch "removed", no capacity drop
    assert all(h["headroomBefore"] == h["headroomAfter"] for h in doc["headroom"])


# -- fits GitHub: the comment is cut, the summary never -------------------------------------------


def _many(n: int, quota: int) -> dict:
    return {
        f"team-{i:04d}": {
            "name": f"team-{i:04d}",
            "tier": "standard",
            "owners": [f"g{i}"],
            "gpus": {"nvidia.com/gpu.shared": quota},
        }
        for i in range(n)
    }


def test_thousand_tenant_change_fits_a_comment(tmp_path, capsys):
    pools = [
        {
            "name": "l4",
            "gpu": "L4",
            "gpusPerNode": 8,
            "nodeSelector": {"pool": "l4"},
            "nodeCount": 500,
            "sharing": {"timeSlicing": {"replicas": 4}},
        }
    ]
    base = stack(tmp_path / "base", pools=pools, tenants=_many(1000, 4))
    head = stack(tmp_path / "head", pools=pools, tenants=_many(1000, 6))
    full = tmp_path / "full.md"
    code, md, _ = run(capsys, base, head, "-o", "markdown", "--full-output", full)
    assert code == 0
    assert len(md) < 65_536, len(md)
    assert "Plan: 1,000 tenants to change · 1,000 objects to change" in md
    assert "Cut to fit GitHub's 65,536-character comment limit" in md and "full.md" in md
    # 1,000 identical quota changes are one row that counts them, not 1,000 rows
    assert "| ~ | nvidia.com/gpu.shared 4 → 6 (+2): 1,000 tenants (team-0000, team-0001," in md
    assert md.count("| ~ | team-") == 0
    note = md.split("limit:** ")[1].split(";")[0]
    cut = {key: int(n.replace(",", "")) for n, key in re.findall(r"([\d,]+) (tenant rows|objects)", note)}
    assert cut.get("objects", 0) > 0 and "tenant rows" not in cut  # objects are cut before tenant rows
    assert md.count("- **changed** `tenant-team-") + cut["objects"] == 1000
    text = full.read_text()
    assert text.count("- **changed** `tenant-team-") == 1000 and "Cut to fit" not in text
    # the sections stay closed <details> blocks, balanced even when cut
    assert md.count("<details") == md.count("</details>")


def test_small_limit_still_keeps_summary_and_errors(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="nope")))
    code, md, _ = run(capsys, base, head, "-o", "markdown", "--max-chars", "3000")
    assert code == 1 and len(md) < 3000
    assert "cannot be applied" in md and "unknown tier" in md and "Plan: " in md
