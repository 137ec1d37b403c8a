"""gpupool usage's arithmetic over a fake UsageSource (tests/usage_fake.py) answering per-step integrals as
Prometheus' queries do (gpupool.monitoring.usage_queries): GPU-hours, peaks, charges priced as they were,
the reconciliation of a pool's cost, days, idle spread, and each awkward case: a node in no pool, a retired
MIG profile, an unknown one, a node that moved pools, gaps in the data, in the exporter and in the history,
an empty window. Expected figures are computed here by hand; the end-to-end test
(tests/e2e/test_usage_prometheus.py) runs the same report against a real Prometheus."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest

from gpupool.analysis import usage
from gpupool.cli.main import main
from gpupool.cli.usage import calendar
from gpupool.monitoring.usage_queries import Queries, SpecValues, literal
from gpupool.present import usage as present
from gpupool.rules.engine import validate_file
from tests.usage_fake import FakeSource

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: small}
nodePools:
  - name: mig
    gpu: H100-80GB
    gpusPerNode: 1
    nodes: [m1]
    pricePerGpuHour: 4.00
    sharing:
      mig: {layout: {3g.40gb: 2}}
  - name: ts
    gpu: L4
    gpusPerNode: 1
    nodes: [t1]
    pricePerGpuHour: 1.00
    sharing:
      timeSlicing: {replicas: 4}
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: alpha, tier: standard, owners: [a], costCenter: cc-1, gpus: {nvidia.com/mig-3g.40gb: 2}}
  - {name: beta, tier: standard, owners: [b], costCenter: cc-2, gpus: {nvidia.com/gpu.shared: 4}}
"""

STEP = 300.0
WIN = usage.Window(0.0, 12 * STEP, STEP)  # one hour, 12 steps
TS = [STEP * (i + 1) for i in range(12)]
FULL = [STEP] * 12  # a step wholly covered


def _series(labels, values):
    """A series with VALUES at the steps' ends; None = no sample at that step."""
    return usage.Series(labels, tuple((t, v) for t, v in zip(TS, values, strict=True) if v is not None))


def covered(data=FULL, history=FULL, labels=FULL, exporter=None):
    out = [
        _series({"what": "data"}, data),
        _series({"what": "history"}, history),
        _series({"what": "labels"}, labels),
    ]
    for node, values in (exporter or {}).items():
        out.append(_series({"what": "exporter", "node": node}, values))
    return out


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    r = validate_file(p)
    assert r.spec is not None
    return r.spec


def _source(**over):
    """The hour: alpha holds one 3g.40gb (1/2 GPU) for 6 steps, then two; beta two L4 replicas (1/4 each)
    for 6 steps; a pod of kube-system one replica throughout. Values are GPU-equivalent-seconds per step."""
    alpha = [0.5 * STEP] * 6 + [1.0 * STEP] * 6
    beta = [0.5 * STEP] * 6 + [None] * 6
    system = [0.25 * STEP] * 12
    base = {
        "allocated": [
            _series({"namespace": "alpha", "pool": "mig"}, alpha),
            _series({"namespace": "beta", "pool": "ts"}, beta),
            _series({"namespace": "kube-system", "pool": "ts"}, system),
        ],
        "charged": [  # x the price at that moment: 4.00 and 1.00 per GPU-hour
            _series({"namespace": "alpha", "pool": "mig"}, [v * 4.0 for v in alpha]),
            _series({"namespace": "beta", "pool": "ts"}, [v and v * 1.0 for v in beta]),
            _series({"namespace": "kube-system", "pool": "ts"}, system),
        ],
        "peak": [
            _series({"namespace": "alpha"}, [0.5] * 6 + [1.0] * 6),
            _series({"namespace": "beta"}, [0.5] * 6 + [None] * 6),
            _series({"namespace": "kube-system"}, [0.25] * 12),
        ],
        "used": [
            _series({"namespace": "alpha", "pool": "mig"}, [0.25 * STEP] * 6 + [0.5 * STEP] * 6),
            _series({"namespace": "beta", "pool": "ts"}, [0.6 * STEP] * 6 + [None] * 6),
            _series({"namespace": "gpu-operator", "pool": "mig"}, [0.0] * 12),  # an idle device: no pod holds it
        ],
        "devices": [
            _series({"pool": "mig"}, [0.25 * STEP] * 6 + [0.5 * STEP] * 6),
            _series({"pool": "ts"}, [0.9 * STEP] * 12),
        ],
        "capacity": [
            _series({"pool": "mig", "what": "gpus"}, FULL),
            _series({"pool": "mig", "what": "cost"}, [STEP * 4.0] * 12),
            _series({"pool": "ts", "what": "gpus"}, FULL),
            _series({"pool": "ts", "what": "cost"}, [STEP * 1.0] * 12),
        ],
        "nodes": [_series({"node": "m1", "pool": "mig"}, FULL), _series({"node": "t1", "pool": "ts"}, FULL)],
        "coverage": covered(),
    }
    return FakeSource(**{**base, **over})


def _report(spec, **over):
    return usage.compute(spec, WIN, _source(**over), prometheus="http://p")


def _tenant(r, name):
    return next(t for t in [*r.tenants, r.other] if t.name == name)


def test_tenant_figures(spec):
    r = _report(spec)
    alpha = _tenant(r, "alpha")
    assert alpha.allocated_hours == pytest.approx((6 * 0.5 + 6 * 1.0) * STEP / 3600)
    assert alpha.peak_allocated == pytest.approx(1.0)
    assert alpha.used_hours == pytest.approx((6 * 0.25 + 6 * 0.5) * STEP / 3600)
    assert alpha.efficiency == pytest.approx(0.5)
    assert alpha.charge == pytest.approx(alpha.allocated_hours * 4.0)
    assert alpha.granted == pytest.approx(1.0) and not alpha.used_shared
    beta = _tenant(r, "beta")
    assert beta.allocated_hours == pytest.approx(6 * 0.5 * STEP / 3600)
    assert beta.used_hours == pytest.approx(6 * 0.6 * STEP / 3600) and beta.used_shared
    assert r.other.allocated_hours == pytest.approx(12 * 0.25 * STEP / 3600)
    assert r.gaps == [] and r.untrusted == []


def test_pools_reconcile(spec):
    r = _report(spec)
    for p in r.pools:
        tenants = sum(t.by_pool.get(p.name, [0.0])[0] for t in [*r.tenants, r.other])
        assert tenants == pytest.approx(p.allocated_hours)
        assert p.capacity_hours == 1.0  # one GPU for one hour
        assert p.allocated_hours + p.unallocated_hours == pytest.approx(p.capacity_hours)
    mig = next(p for p in r.pools if p.name == "mig")
    assert mig.used_hours == pytest.approx((6 * 0.25 + 6 * 0.5) * STEP / 3600)
    rows = list(csv.DictReader(io.StringIO(present.format_csv(r))))
    for p in r.pools:
        charged = sum(float(x["charge"]) for x in rows if x["pool"] == p.name and x["charge"])
        assert charged == pytest.approx(p.cost, abs=0.01)


def test_the_history_prices_not_the_spec(spec):
    """The pool cost 8.00 per GPU-hour in the first half hour (recorded) and 4.00 now (the spec): alpha's
    charge and the pool's cost are priced at each moment's price; the unallocated cost is what is left."""
    alpha = [0.5 * STEP] * 6 + [1.0 * STEP] * 6
    prices = [8.0] * 6 + [4.0] * 6
    r = _report(
        spec,
        charged=[_series({"namespace": "alpha", "pool": "mig"}, [a * p for a, p in zip(alpha, prices, strict=True)])],
        capacity=[
            _series({"pool": "mig", "what": "gpus"}, FULL),
            _series({"pool": "mig", "what": "cost"}, [STEP * p for p in prices]),
        ],
    )
    want = (6 * 0.5 * 8.0 + 6 * 1.0 * 4.0) * STEP / 3600  # 2.00 + 2.00
    assert _tenant(r, "alpha").charge == pytest.approx(want)
    mig = next(p for p in r.pools if p.name == "mig")
    assert mig.cost == pytest.approx(0.5 * 8.0 + 0.5 * 4.0)
    assert mig.unallocated_cost == pytest.approx(mig.cost - want)
    assert mig.price == 4.0  # the spec's price now, shown beside


def test_idle_cost_spread_over_allocators_by_their_share(spec):
    r = usage.compute(spec, WIN, _source(), spread_idle=True)
    ts = next(p for p in r.pools if p.name == "ts")
    # ts: 1 GPU-hour at 1.00; beta held 0.25 h, kube-system 0.25 h: 0.50 idle, spread half and half
    assert ts.unallocated_cost == pytest.approx(0.5) and ts.idle_spread == pytest.approx(0.5)
    assert _tenant(r, "beta").idle_charge == pytest.approx(0.25)
    assert r.other.idle_charge == pytest.approx(0.25)
    alpha = _tenant(r, "alpha")  # mig: 4.00 cost, alpha charged 3.00, the only allocator: 1.00 idle to it
    assert alpha.idle_charge == pytest.approx(1.0) and alpha.total_charge == pytest.approx(4.0)
    rows = list(csv.DictReader(io.StringIO(present.format_csv(r))))
    for p in r.pools:  # charges + idle shares + what is left unallocated = the pool's cost
        total = sum(float(x["charge"] or 0) + float(x["idle_share"] or 0) for x in rows if x["pool"] == p.name)
        assert total == pytest.approx(p.cost, abs=0.01)
    assert "IDLE SHARE" in present.format_table(r)


def test_a_node_in_no_pool_is_reported_apart_and_charged_to_nobody(spec):
    outside = [_series({"namespace": "alpha", "node": "stray", "resource": "nvidia_com_gpu"}, [STEP] * 12)]
    r = _report(spec, outside_pools=outside)
    assert r.outside_pools == {("stray", "alpha", "nvidia_com_gpu"): pytest.approx(1.0)}
    assert _tenant(r, "alpha").allocated_hours == pytest.approx(_tenant(_report(spec), "alpha").allocated_hours)
    assert r.untrusted == []  # reported apart, by design: not a gap
    assert "outside every pool: alpha held 1.00 unit-hours of nvidia_com_gpu on node stray" in present.format_table(r)
    assert json.loads(present.format_json(r))["outsidePools"] == [
        {"node": "stray", "namespace": "alpha", "resource": "nvidia_com_gpu", "unitHours": 1.0}
    ]


def test_a_retired_profile_is_named_never_asserted(spec):
    """Allocations of 1g.10gb in a pool that (in the spec and any recorded history) has no such resource."""
    unweighed = [
        _series({"namespace": "alpha", "pool": "mig", "resource": "nvidia_com_mig_1g_10gb"}, [STEP] * 6 + [None] * 6)
    ]
    r = _report(spec, unweighed=unweighed, unknown_profiles=[_series({"GPU_I_PROFILE": "9g.99gb"}, [STEP] * 12)])
    assert r.unweighed == {("mig", "nvidia_com_mig_1g_10gb", "alpha"): pytest.approx(0.5)}
    assert r.unknown_profiles == {"9g.99gb": pytest.approx(1.0)}
    assert len(r.untrusted) == 2
    table = present.format_table(r)
    assert "no weight: alpha held 0.50 unit-hours of nvidia_com_mig_1g_10gb in pool mig" in table
    assert "unknown MIG profile 9g.99gb" in table


def test_a_node_that_moved_pools_is_shown_with_its_time_in_each(spec):
    nodes = [
        _series({"node": "m1", "pool": "mig"}, FULL),
        _series({"node": "t1", "pool": "mig"}, [STEP] * 4 + [None] * 8),
        _series({"node": "t1", "pool": "ts"}, [None] * 4 + [STEP] * 8),
    ]
    r = _report(spec, nodes=nodes)
    assert r.node_pools["t1"] == {"mig": pytest.approx(4 * STEP / 3600), "ts": pytest.approx(8 * STEP / 3600)}
    assert "node t1 moved between pools: mig 0.3 h, ts 0.7 h" in present.format_table(r)


def test_gaps_are_named_with_their_periods_and_durations(spec):
    data = FULL[:2] + [None, 100.0] + FULL[4:]  # steps 3 and 4: no data at all, then 200 s missing
    history = [None, None] + [STEP] * 10  # the rules ran from step 3
    exporter = {"m1": [None] * 6 + [120.0, STEP] + [None] * 4}  # m1's pods held GPUs, no DCGM series
    r = _report(spec, coverage=covered(data=data, history=history, exporter=exporter))
    gaps = [(g.kind, g.node, g.start, g.end, g.seconds) for g in r.gaps]
    assert gaps == [
        ("no-data", "", 2 * STEP, 4 * STEP, STEP + STEP - 100.0),
        ("history", "", 0.0, 2 * STEP, 2 * STEP),
        ("exporter", "m1", 6 * STEP, 8 * STEP, 120.0 + STEP),
    ]
    assert r.untrusted == ["no data for 8m of the range", "a node's DCGM exporter reported nothing for 7m of the range"]
    doc = json.loads(present.format_json(r))
    assert doc["trusted"] is False and doc["gaps"][2] == {
        "kind": "exporter", "start": "1970-01-01T00:30:00Z", "end": "1970-01-01T00:40:00Z", "seconds": 420.0, "node": "m1"
    }  # fmt: skip
    assert "gap: DCGM exporter silent while pods held GPUs (their use is unknown) on m1" in present.format_table(r)


def test_an_empty_window_is_one_gap_and_zeros(spec):
    r = usage.compute(spec, WIN, FakeSource())
    assert [(g.kind, g.seconds) for g in r.gaps] == [("no-data", 3600.0)]
    assert all(t.allocated_hours == 0 and t.charge == 0 for t in r.tenants) and r.untrusted


def test_days_add_up_to_the_totals(spec):
    """Steps ending at midnight count on the day before; every day's figures add up to the range's."""
    day = 86400.0
    w = usage.Window(day - 3 * 3600, day + 3 * 3600, 3600.0)  # 21:00 to 03:00
    ends = [w.start + 3600 * (i + 1) for i in range(6)]
    alloc = usage.Series({"namespace": "alpha", "pool": "mig"}, tuple((t, 1800.0) for t in ends))
    r = usage.compute(
        spec,
        w,
        FakeSource(allocated=[alloc], coverage=[usage.Series({"what": "data"}, tuple((t, 3600.0) for t in ends))]),
    )
    assert [d.date for d in r.days] == ["1970-01-01", "1970-01-02"]
    assert [d.tenants["alpha"][0] for d in r.days] == [pytest.approx(1.5), pytest.approx(1.5)]
    assert "Per day (UTC)" in present.format_table(r, daily=True)
    rows = list(csv.DictReader(io.StringIO(present.format_csv(r, daily=True))))
    assert [(x["date"], x["allocated_gpu_hours"]) for x in rows] == [("1970-01-01", "1.5000"), ("1970-01-02", "1.5000")]


def test_json_document(spec):
    doc = json.loads(present.format_json(_report(spec)))
    assert doc["schemaVersion"] == 2 and doc["hours"] == 1.0 and doc["stepSeconds"] == STEP
    assert doc["trusted"] is True and doc["gaps"] == [] and doc["resolutionSeconds"] == 60.0
    assert {t["name"] for t in doc["tenants"]} == {"alpha", "beta"}
    assert set(doc["pools"][0]) >= {"capacityGpuHours", "usedGpuHours", "utilisation", "recoverableGpuHours", "cost"}
    assert doc["tenants"][1]["usedIncludesSharedDevices"] is True
    assert doc["days"][0]["date"] == "1970-01-01"


def test_table_and_markdown(spec):
    r = _report(spec)
    assert "includes an equal share of time-sliced/MPS devices" in present.format_table(r)
    assert present.format_markdown(r).startswith("## gpupool usage: cluster small")


def test_cli_rejects_a_range_shorter_than_a_step(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    code = main(["usage", str(p), "--prometheus", "http://127.0.0.1:9", "--since", "1m", "--step", "5m"])
    assert code == 2 and "at least one --step" in capsys.readouterr().err


def test_cli_step_must_be_a_multiple_of_the_resolution(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    code = main(["usage", str(p), "--prometheus", "http://127.0.0.1:9", "--step", "90s", "--resolution", "1m"])
    assert code == 2 and "multiple of --resolution" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "now", "start", "end"),
    [
        ("lastmonth", "2026-03-15T12:00:00", "2026-02-01", "2026-03-01"),
        ("lastmonth", "2026-01-10T08:00:00", "2025-12-01", "2026-01-01"),
        ("month", "2026-03-15T12:00:00", "2026-03-01", "2026-03-15T12:00:00"),
        ("yesterday", "2026-03-01T05:00:00", "2026-02-28", "2026-03-01"),
        ("lastweek", "2026-12-05T06:00:00", "2026-11-23", "2026-11-30"),  # 2026-12-05 is a Saturday
        ("week", "2026-12-05T06:00:00", "2026-11-30", "2026-12-05T06:00:00"),
        ("today", "2026-12-05T06:00:00", "2026-12-05", "2026-12-05T06:00:00"),
    ],
)
def test_calendar_windows_are_utc(name, now, start, end):
    def ts(text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()

    assert calendar(name, ts(now)) == (ts(start), ts(end))


def test_the_history_query_lets_a_node_label_win_over_the_spec():
    """The spec's node list stands in only for nodes without a pool label: matched on the node alone
    (matching on node and pool would add the spec's pool beside the label's, and a moved node would be in
    two pools at once)."""
    qs = Queries(SpecValues(nodes=(("n1", "a"),)), 900, 60)
    assert qs.node_pool.endswith(
        'or on(node) (label_replace(label_replace(vector(1), "node", "n1", "", ""), "pool", "a", "", "")))'
    )
    assert literal([((("pool", "p$1"),), 0.5)]) == 'label_replace(vector(0.5), "pool", "p$$1", "", "")'
    assert "sum_over_time((" in qs.allocated() and "[900s:60s]) * 60" in qs.allocated()
