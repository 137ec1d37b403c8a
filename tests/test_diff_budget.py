"""The pull-request comment always posts: whatever the diff, the markdown plus the sticky-comment marker stays
within GitHub's 65,536 characters (GitHub refuses a longer body and the previous push's comment stays), and
what is cut is the least important part, never the verdict, the alerts or the headroom rows.

Property tests generate diffs directly (many tenants, resources, pools, a MIG change, a long preview, many
long errors); one test runs the real command on a 1,000-tenant change with a MIG re-layout and a preview,
the case that gave 66,309 characters before the budget measured the assembled text."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.analysis import diff as dm
from gpupool.analysis.diff import queues as qd
from gpupool.analysis.sides import Side
from gpupool.present import diff as present
from gpupool.spec.diagnostics import Diagnostic, Location
from tests.test_diff import POOLS, run, stack

LIMIT = present.GITHUB_COMMENT_LIMIT
# The marker marocchino/sticky-pull-request-comment appends (src/comment.ts: bodyWithHeader), for our header.
MARKER = "\n<!-- Sticky Pull Request Comment gpupool-diff-production-eu-west-1 -->"

names = st.from_regex(r"[a-z][a-z0-9-]{0,40}", fullmatch=True)


@st.composite
def diffs(draw):
    n_tenants = draw(st.integers(0, 3000))
    resources = [f"nvidia.com/res-{i}" for i in range(draw(st.integers(0, 40)))]
    tenants = []
    for i in range(n_tenants):
        kind = draw(st.sampled_from(["added", "removed", "changed"])) if i < 50 else "changed"
        quotas = tuple(dm.QuotaDelta(r, 4, 6) for r in resources[: draw(st.integers(0, 3))])
        tenants.append(
            dm.TenantChange(
                f"team-{i:05d}",
                kind,
                quotas,
                details=(dm.Detail(dm.Aspect.COST_CENTER, f"cost centre cc-{i} → cc-{i + 1}"),)
                * draw(st.integers(0, 1)),
                namespace="deleted" if kind == "removed" and i % 2 else "retained" if kind == "removed" else "",
                tier="standard",
                offboarded=kind == "removed" and i % 2 == 1,
            )
        )
    headroom = [dm.Headroom(r, 16, 16, 8, 12 + i, 8, 4 - i) for i, r in enumerate(resources)]
    mig = []
    for p in range(draw(st.integers(0, 12))):
        nodes = tuple(f"gpu-{p}-{k}" for k in range(draw(st.integers(1, 200))))
        mig.append(
            dm.MigChange(
                f"pool-{p}",
                "changed",
                "a100-80gb-all-balanced",
                "a100-80gb-3g.40gbx2",
                "all-balanced",
                "3g.40gb×2",
                nodes,
                {},
                len(nodes),
                draw(st.booleans()),
                "A100-80GB",
                "A100-80GB",
                ((tuple(range(4)), (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))),),
                ((tuple(range(4)), (("3g.40gb", 2),)),),
                tuple((n,) for n in nodes),
                (),
                1,
                True,
                1800,
            )
        )
    objects = [
        dm.ObjectChange(
            f"tenant-team-{i:05d}-gpu-quota.yaml",
            "changed",
            "ResourceQuota",
            f"team-{i:05d}/gpu",
            tuple(dm.FieldChange(f'spec.hard["requests.{r}"]', "4", "6") for r in resources[:3]),
        )
        for i in range(draw(st.integers(0, 3000)))
    ]
    configs = [
        dm.ConfigDiff(c.pool, "mig", c.config_before, c.config_after, "--- a\n+++ b\n" + "-  x: 1\n+  x: 2\n" * 30)
        for c in mig
    ]
    queues = qd.QueueDiff(True, draw(st.sampled_from([True, True, False])))
    if queues.enabled_after:
        for i in range(draw(st.integers(0, 3000))):
            lines = tuple(
                qd.QuotaLine(f"pool-{k}", r, 8, draw(st.sampled_from([4, 8, 12])), None, 2, 8, 4)
                for k, r in enumerate(resources[: draw(st.integers(0, 3))])
            )
            kind = draw(st.sampled_from(list(qd.Change))) if i < 50 else qd.Change.CHANGED
            queues.tenants.append(qd.TenantQueueChange(f"team-{i:05d}", kind, "standard", "root", "root", lines))
        queues.tiers = [
            qd.TierPolicyChange(
                f"tier-{i}", qd.PolicyField.LENDING_LIMIT, 0, None, "lends now" * draw(st.integers(0, 1))
            )
            for i in range(draw(st.integers(0, 30)))
        ]
    d = dm.SpecDiff(tenants=tenants, headroom=headroom, mig=mig, objects=objects, configs=configs, queues=queues)
    d.head_ok = all(h.headroom_after >= 0 for h in headroom)
    return d


@st.composite
def sides(draw):
    n_errors = draw(st.integers(0, 300))
    long_path = draw(st.integers(0, 3000))
    diags = [
        Diagnostic("error", Location("tenants/" + "x" * long_path + f"{i}.yaml", i + 1, 3), f"tenants[{i}].tier", "m")
        for i in range(n_errors)
    ]
    base = Side("BASE", "origin/main:stacks/prod/spec.yaml", valid=True)
    head = Side("HEAD", "stacks/prod/spec.yaml", valid=not diags, diagnostics=diags)
    return base, head


def _preview(n: int) -> str | None:
    if n < 0:
        return None
    body = "".join(f"    ~ kubernetes:core/v1:ConfigMap cm-{i} update [diff: ~data]\n" for i in range(n))
    return body + "Resources:\n    ~ 1000 to update\n    42 unchanged\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(diffs(), sides(), st.integers(-1, 20000))
def test_comment_always_fits_and_keeps_what_matters(d, sides_, preview_lines):
    base, head = sides_
    preview = _preview(preview_lines)
    md = present.format_markdown(base, head, d, d.head_ok and head.valid, preview=preview, full_output="full.md")
    assert present.comment_length(md + MARKER) <= LIMIT
    assert len(md + MARKER) <= LIMIT
    verdict = present._verdict(base, head, d, d.head_ok and head.valid)
    assert verdict in md
    # the alert box is always there when something warrants one, with its count of what is not listed
    if d.mig or any(t.kind == "removed" and t.namespace == "retained" for t in d.tenants):
        assert "> [!WARNING]" in md
    # queue risks are alerts like the others: always in the box, however many queue rows are cut
    for a in d.alerts():
        if a.risk in (dm.Risk.NOMINAL_REDUCED, dm.Risk.PREEMPTION_EXPOSED, dm.Risk.QUEUEING_OFF):
            assert present._ALERT_TITLE[a.risk] in md, a.risk
    # every headroom row is kept as long as the fixed parts leave any room (errors listed are few then)
    if not head.diagnostics or len(head.diagnostics[0].location.file) < 200:
        for h in d.headroom:
            assert f"| {h.resource} |" in md, h.resource
    if preview is not None and "pulumi preview --diff" in md:
        assert "Resources:\n    ~ 1000 to update" in md  # the preview's summary survives its lines
    # the cut note counts exactly what a section lost
    if "<summary>Tenants:" in md:
        cut = re.search(r"✂ ([\d,]+) more tenant rows cut", md)
        section = md.split("<summary>Tenants:")[1].split("</details>")[0]
        rows = present._tenant_rows(d, group=True)
        assert len(re.findall(r"^\| . \| ", section, re.M)) + (int(cut.group(1).replace(",", "")) if cut else 0) == len(
            rows
        )
    if "<summary>Queues (Kueue)" in md:
        cut = re.search(r"✂ ([\d,]+) more queue rows cut", md)
        section = md.split("<summary>Queues (Kueue)")[1].split("</details>")[0]
        shown = len(re.findall(r"^\| . \| ", section, re.M))
        assert shown + (int(cut.group(1).replace(",", "")) if cut else 0) == len(present.queue_rows(d.queues))


def test_pathological_fixed_parts_still_fit():
    """Errors whose paths are each longer than the whole limit: only the verdict and summary remain."""
    diags = [Diagnostic("error", Location("t/" + "x" * 70_000, 1, 1), "tenants[0]", "bad")]
    head = Side("HEAD", "spec.yaml", valid=False, diagnostics=diags)
    base = Side("BASE", "main:spec.yaml", valid=True)
    md = present.format_markdown(base, head, dm.SpecDiff(head_ok=False), False)
    assert present.comment_length(md + MARKER) <= LIMIT
    assert "cannot be applied" in md


def _tenants(n: int, quota: int, cc: str) -> dict:
    return {
        f"team-{i:04d}": {
            "name": f"team-{i:04d}",
            "tier": "standard",
            "owners": [f"g{i}"],
            "costCenter": f"{cc}-{i}",
            "gpus": {"nvidia.com/gpu.shared": quota},
        }
        for i in range(n)
    }


def test_thousand_tenants_with_mig_change_and_preview_posts(tmp_path, capsys):
    """The issue's worst case: 1,000 tenants change (cost centre and quota), a pool is re-laid out, and the
    preview is long. The comment fits with the marker and keeps headroom rows, the MIG evictions and the
    slice maps, and the preview's summary; what is cut first are objects and preview lines."""
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], nodes=None, nodeSelector={"pool": "l4"}, nodeCount=600)
    pools[0].pop("nodes")
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 1, "1g.10gb": 4}}})
    base = stack(tmp_path / "base", pools=[dict(pools[0]), POOLS[1], POOLS[2]], tenants=_tenants(1000, 2, "cc"))
    head = stack(tmp_path / "head", pools=pools, tenants=_tenants(1000, 3, "cd"))
    preview = tmp_path / "preview.txt"
    preview.write_text(
        "".join(f"    ~ kubernetes:core/v1:ResourceQuota team-{i:04d}/gpu update [diff: ~spec]\n" for i in range(2000))
        + "Resources:\n    ~ 2000 to update\n    1043 unchanged\n"
    )
    code, md, err = run(
        capsys, base, head, "-o", "markdown", "--preview-file", preview, "--full-output", tmp_path / "f.md"
    )
    assert code == 0, err
    assert present.comment_length(md + MARKER) <= LIMIT
    assert "Resources:\n    ~ 2000 to update" in md
    assert "| nvidia.com/gpu.shared |" in md and "| nvidia.com/mig-1g.10gb |" in md
    assert "EVICTS GPU WORKLOADS on nodes gpu-a100-1, gpu-a100-2" in md
    assert "MIG slices per GPU" in md and "after: A100-80GB GPU 0,1,2,3" in md
    assert "Cut to fit" in md and "more objects cut" in md
