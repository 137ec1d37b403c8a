"""A tenant raising its own tier or lifting its per-pod GPU maximum is a ⚠ reason that names what it gains
(issue 34 item 3), in every format of `gpupool diff --base REF SPEC`; a lower tier or a tighter maximum stays
routine. The repository is built in tmp_path: BASE is its last commit, HEAD the working tree."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_diff import POOLS, TENANTS, run, stack

SPEC = "stacks/dev/spec.yaml"
TIERS = [
    {"name": "critical", "priority": 10000},
    {"name": "production", "priority": 1000, "isolation": "dedicated"},
    {"name": "standard", "priority": 100},
    {"name": "batch", "priority": 10},
]
MIG = "nvidia.com/mig-1g.10gb"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )


def _write(repo: Path, *, tiers=None, notebooks=None, queueing=None) -> None:
    tenants = {k: dict(v) for k, v in TENANTS.items()}
    if notebooks is not None:
        tenants["notebooks"] = notebooks
    path = stack(repo / "stacks" / "dev", pools=POOLS, tenants=tenants, tiers=tiers or TIERS)
    if queueing is not None:
        spec = yaml.safe_load(path.read_text())
        spec["queueing"] = queueing
        path.write_text(yaml.safe_dump(spec, sort_keys=False))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    monkeypatch.chdir(root)
    return root


def _base(repo: Path, **kw) -> None:
    _write(repo, **kw)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")


def _diff(capsys, fmt: str) -> tuple[int, str]:
    code, out, err = run(capsys, "--base", "HEAD", SPEC, "-o", fmt)
    assert "error" not in err, err
    return code, out


def _json(capsys) -> dict:
    code, out = _diff(capsys, "json")
    assert code == 0, out
    return json.loads(out)


def _notebooks(**changes) -> dict:
    return {**TENANTS["notebooks"], **changes}


# -- tier raises --------------------------------------------------------------------------------------


def test_tier_raise_is_a_reason_naming_priorities_and_newly_preemptible_tiers(repo, capsys):
    _base(repo)
    _write(repo, notebooks=_notebooks(tier="critical"))
    code, text = _diff(capsys, "text")
    assert code == 0
    verdict = text.splitlines()[1]
    assert verdict.startswith("⚠ HEAD applies") and "raises the tier (priority) of 1 tenant" in verdict
    alert = next(line for line in text.splitlines() if "tier raised" in line)
    assert "notebooks" in alert and "standard → critical" in alert and "priority 100 → 10,000" in alert
    # production and standard were not below standard's 100 before; batch (10) already was
    assert "preempt the workloads of tiers production, standard" in alert and "batch" not in alert
    assert "Kueue" not in alert  # no queueing block: nothing about queues
    assert any(line.startswith("  ⚠ notebooks: tier standard → critical") for line in text.splitlines())

    code, md = _diff(capsys, "markdown")
    assert code == 0
    assert "**⚠ HEAD applies, but it raises the tier (priority) of 1 tenant.**" in md
    box = md.split("> [!WARNING]\n")[1].split("\n\n")[0]
    assert "**tier raised: its pods can preempt more workloads:** 1 — notebooks (tier standard → critical;" in box
    assert "| ⚠ | notebooks: tier standard → critical" in md

    doc = _json(capsys)
    assert doc["verdict"] == "risky"
    assert [(a["risk"], a["names"]) for a in doc["alerts"]] == [("tierRaised", ["notebooks"])]
    [t] = doc["tenants"]
    r = t["tierRaise"]
    assert (r["tierBefore"], r["tierAfter"], r["priorityBefore"], r["priorityAfter"]) == (
        "standard",
        "critical",
        100,
        10000,
    )
    assert r["preempts"] == ["production", "standard"] and r["queueing"] is False
    assert t["maxPerPodLifts"] == []


def test_tier_raise_with_queueing_says_what_changes_in_kueue(repo, capsys):
    queueing = {"tiers": {"critical": {"isolated": True}}}
    _base(repo, queueing=queueing)
    _write(repo, notebooks=_notebooks(tier="critical"), queueing=queueing)
    code, text = _diff(capsys, "text")
    assert code == 0, text
    alert = next(line for line in text.splitlines() if "tier raised" in line)
    assert "WorkloadPriorityClass critical" in alert and "tier critical's queue policy" in alert
    assert "its ClusterQueue moves from cohort t to no cohort (isolated)" in alert
    r = _json(capsys)["tenants"][0]["tierRaise"]
    assert r["queueing"] is True and (r["cohortBefore"], r["cohortAfter"]) == ("t", None)


def test_a_lower_tier_stays_routine(repo, capsys):
    _base(repo)
    _write(repo, notebooks=_notebooks(tier="batch"))
    code, text = _diff(capsys, "text")
    assert code == 0 and text.splitlines()[1].startswith("✓"), text
    assert "tier raised" not in text and "~ notebooks: tier standard → batch" in text
    doc = _json(capsys)
    assert doc["verdict"] == "routine" and doc["alerts"] == [] and doc["tenants"][0]["tierRaise"] is None


# -- per-pod maximums ---------------------------------------------------------------------------------


def _lifts(doc: dict) -> list[tuple]:
    assert doc["verdict"] == "risky" and [a["risk"] for a in doc["alerts"]] == ["maxPerPodLifted"]
    [t] = doc["tenants"]
    return [(x["resource"], x["before"], x["after"]) for x in t["maxPerPodLifts"]]


def _tier(name: str, **changes) -> list[dict]:
    return [dict(t, **changes) if t["name"] == name else dict(t) for t in TIERS]


def test_raising_a_tenant_max_per_pod_is_a_reason_with_old_and_new(repo, capsys):
    _base(repo, notebooks=_notebooks(maxPerPod={MIG: 2}))
    _write(repo, notebooks=_notebooks(maxPerPod={MIG: 4}))
    code, text = _diff(capsys, "text")
    assert code == 0 and "lifts the per-pod GPU maximum of 1 tenant" in text.splitlines()[1]
    assert re.search(r"⚠ per-pod GPU maximum raised or removed: 1 — notebooks \(nvidia.com/mig-1g.10gb 2 → 4\)", text)
    code, md = _diff(capsys, "markdown")
    assert "**per-pod GPU maximum raised or removed:** 1 — notebooks (nvidia.com/mig-1g.10gb 2 → 4)" in md
    assert _lifts(_json(capsys)) == [(MIG, 2, 4)]


def test_removing_a_tenant_max_per_pod_falls_back_to_a_higher_tier_default(repo, capsys):
    tiers = _tier("standard", maxPerPod={MIG: 8})
    _base(repo, tiers=tiers, notebooks=_notebooks(maxPerPod={MIG: 2}))
    _write(repo, tiers=tiers)
    assert _lifts(_json(capsys)) == [(MIG, 2, 8)]


def test_removing_the_only_max_per_pod_is_no_limit(repo, capsys):
    _base(repo, notebooks=_notebooks(maxPerPod={MIG: 2}))
    _write(repo)
    code, text = _diff(capsys, "text")
    assert "notebooks (nvidia.com/mig-1g.10gb 2 → no limit)" in text
    code, md = _diff(capsys, "markdown")
    assert "notebooks (nvidia.com/mig-1g.10gb 2 → no limit)" in md
    assert _lifts(_json(capsys)) == [(MIG, 2, None)]


@pytest.mark.parametrize("after", [4, None])
def test_a_tier_max_per_pod_raised_or_removed_in_the_spec_lifts_its_tenants(repo, capsys, after):
    _base(repo, tiers=_tier("standard", maxPerPod={MIG: 2}))
    _write(repo, tiers=_tier("standard", maxPerPod={MIG: after}) if after else TIERS)
    assert _lifts(_json(capsys)) == [(MIG, 2, after)]


def test_a_tighter_max_per_pod_stays_routine(repo, capsys):
    _base(repo, notebooks=_notebooks(maxPerPod={MIG: 4}))
    _write(repo, notebooks=_notebooks(maxPerPod={MIG: 2}))
    code, text = _diff(capsys, "text")
    assert code == 0 and text.splitlines()[1].startswith("✓"), text
    assert "~ notebooks: max per pod nvidia.com/mig-1g.10gb 4 → 2" in text
    doc = _json(capsys)
    assert doc["verdict"] == "routine" and doc["tenants"][0]["maxPerPodLifts"] == []
    # a limit where there was none is a tightening too
    _base(repo)
    _write(repo, notebooks=_notebooks(maxPerPod={MIG: 2}))
    doc = _json(capsys)
    assert doc["verdict"] == "routine" and "no limit → 2" in doc["tenants"][0]["details"][0]["text"]


def test_the_new_json_keys_are_documented(repo, capsys):
    _base(repo, notebooks=_notebooks(maxPerPod={MIG: 2}))
    _write(repo, notebooks=_notebooks(tier="critical", maxPerPod={MIG: 4}))
    doc = _json(capsys)
    text = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "diff-json.md").read_text()
    t = doc["tenants"][0]
    keys = {"tierRaise", "maxPerPodLifts", *t["tierRaise"], *t["maxPerPodLifts"][0]}
    keys |= {a["risk"] for a in doc["alerts"]}
    assert {"tierRaised", "maxPerPodLifted"} <= keys
    assert sorted(k for k in keys if f"`{k}`" not in text) == []
