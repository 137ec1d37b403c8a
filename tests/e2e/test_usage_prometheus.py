"""`gpupool usage` against a real Prometheus holding generated series, compared figure by figure with each
scenario's truth computed here; and every dashboard panel's query returns data.

Two servers. The week (below) at 15-minute samples, reported at --resolution 15m. And six hours at
1-minute samples (the `awkward` fixture, section "The awkward six hours") for what a week of coarse samples
cannot show: a MIG re-layout mid-range, a node moving between pools, a node in no pool, pods shorter than a
step, bursty use, a price change, an exporter outage, recorded history starting after the range does, and
windows past the data and before it; its truth is added up minute by minute from the schedule, and
`--step 1m` and `--step 15m` must agree.

The scenario (one node per pool, 15-minute samples for 7 days):
- h100-mig: an H100 cut per GPU, GPU 0 as 2 x 3g.40gb (a stranded slice: each instance weighs 1/2 GPU),
  GPU 1 as 7 x 1g.10gb (1/7 each). alpha holds one 3g.40gb all week and the second from mid-week; beta holds
  three 1g.10gb and bursts to all seven for six hours (a tenant over its average);
- l4-ts: two L4s time-sliced 4 ways (1/4 GPU a replica). notebooks holds two replicas of GPU 0 all week
  and one of GPU 1 on weekdays; a pod of `ml-platform` (no tenant) shares GPU 1 all week. Device activity
  is per GPU, so the exporter copies it to every pod on the device;
- a100: whole A100s. `idle` holds one all week and never uses it; the other is never allocated.

The series are written in the formats of the exporters gpupool reads (see tests/e2e/test_monitoring_rules.py
for the sources), as OpenMetrics text, turned into TSDB blocks by `promtool tsdb create-blocks-from
openmetrics` and served by `prometheus`. Backfilled blocks carry no staleness markers (a scrape writes one
when a pod's series disappears), so the server runs with `--query.lookback-delta` equal to the sample
interval: a series that stopped is not seen at the next step, as after a real scrape.

Truth is computed from the schedule with NVIDIA's compute-slice counts (H100: 7 slices; 3g = 3, 1g = 1)
and the replicas, independently of gpupool's weight function: allocated GPU-hours, used GPU-hours (a shared
device's activity split equally among the pods on it), peaks, efficiency, charges per tenant and cost
centre, and per pool capacity, allocation, use, baseline utilisation and what the pool cost.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.monitoring import dashboard, rules
from gpupool.monitoring import promql as q
from gpupool.rules.engine import load_valid_spec

pytestmark = pytest.mark.e2e

STEP = 900  # seconds between samples, and the usage report's step and resolution
DAYS = 7
N = DAYS * 86400 // STEP  # samples per series
TAIL = 60  # seconds between samples after the range, the last ones repeated, up to now: the live rules read them
H100_SLICES, SLICES = 7, {"3g.40gb": 3, "1g.10gb": 1}  # NVIDIA MIG user guide, H100 profile table
W3G = SLICES["3g.40gb"] / (2 * SLICES["3g.40gb"])  # GPU 0 holds exactly two 3g.40gb
W1G = SLICES["1g.10gb"] / (7 * SLICES["1g.10gb"])  # GPU 1 holds seven 1g.10gb
REPLICAS = 4
PRICES = {"h100-mig": 4.0, "l4-ts": 0.8, "a100": 3.0}
GPUS = {"h100-mig": 2, "l4-ts": 2, "a100": 2}

SPEC = f"""\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {{name: scenario}}
monitoring: {{enabled: true}}
oversubscription: {{perResource: {{nvidia.com/gpu.shared: 2.0}}}}
nodePools:
  - name: h100-mig
    gpu: H100-80GB
    gpusPerNode: 2
    nodes: [h100-1]
    pricePerGpuHour: {PRICES["h100-mig"]}
    sharing:
      mig:
        perGpu:
          - {{gpus: [0], layout: {{3g.40gb: 2}}}}
          - {{gpus: [1], preset: all-1g.10gb}}
  - name: l4-ts
    gpu: L4
    gpusPerNode: 2
    nodes: [l4-1]
    pricePerGpuHour: {PRICES["l4-ts"]}
    sharing:
      timeSlicing: {{replicas: {REPLICAS}}}
  - name: a100
    gpu: A100-80GB
    gpusPerNode: 2
    nodes: [a100-1]
    pricePerGpuHour: {PRICES["a100"]}
tiers:
  - {{name: standard, priority: 100}}
tenants:
  - {{name: alpha, tier: standard, owners: [a], costCenter: cc-ml, gpus: {{nvidia.com/mig-3g.40gb: 2}}}}
  - {{name: beta, tier: standard, owners: [b], costCenter: cc-ml, gpus: {{nvidia.com/mig-1g.10gb: 7}}}}
  - {{name: idle, tier: standard, owners: [i], costCenter: cc-web, gpus: {{nvidia.com/gpu: 1}}}}
  - {{name: notebooks, tier: standard, owners: [n], costCenter: cc-web, gpus: {{nvidia.com/gpu.shared: 8}}}}
"""
POOL_OF_NODE = {"h100-1": "h100-mig", "l4-1": "l4-ts", "a100-1": "a100"}
CC = {"alpha": "cc-ml", "beta": "cc-ml", "idle": "cc-web", "notebooks": "cc-web"}


def hour_of(i: int) -> float:
    return (i * STEP / 3600) % 24


def day_of(i: int) -> int:
    return int(i * STEP / 86400)


@dataclass
class Device:
    node: str
    uuid: str
    profile: str = ""  # MIG profile; "" = a whole GPU
    gi: str = ""
    model: str = ""
    weight: float = 1.0


@dataclass
class Pod:
    ns: str
    name: str
    node: str
    resource: str  # as kube-state-metrics writes it
    device: Device
    present: callable = lambda i: True  # noqa: E731
    units: int = 1
    weight: float = 1.0  # GPU-equivalents of one unit


@dataclass
class Scenario:
    devices: list[Device] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    activity: dict[str, callable] = field(default_factory=dict)  # device uuid+gi -> activity(i)


def dev_key(d: Device) -> str:
    return f"{d.uuid}/{d.gi}"


def scenario() -> Scenario:
    s = Scenario()
    h100 = "NVIDIA H100 80GB HBM3"
    g0 = [Device("h100-1", "GPU-h100-0", "3g.40gb", str(k), h100, W3G) for k in (1, 2)]
    g1 = [Device("h100-1", "GPU-h100-1", "1g.10gb", str(k), h100, W1G) for k in range(7, 14)]
    a100 = [Device("a100-1", f"GPU-a100-{k}", model="NVIDIA A100-SXM4-80GB") for k in (0, 1)]
    l4 = [Device("l4-1", f"GPU-l4-{k}", model="NVIDIA L4") for k in (0, 1)]
    s.devices = g0 + g1 + a100 + l4

    def day_busy(hi: float, lo: float):
        return lambda i: hi if 8 <= hour_of(i) < 20 else lo

    def burst(i: int) -> bool:  # day 3, 12:00-18:00
        return day_of(i) == 3 and 12 <= hour_of(i) < 18

    def weekday(i: int) -> bool:
        return day_of(i) < 5

    def second_half(i: int) -> bool:
        return i >= N // 2

    mig3, mig1 = "nvidia_com_mig_3g_40gb", "nvidia_com_mig_1g_10gb"
    s.pods += [
        Pod("alpha", "a-0", "h100-1", mig3, g0[0], weight=W3G),
        Pod("alpha", "a-1", "h100-1", mig3, g0[1], second_half, weight=W3G),
        *[Pod("beta", f"b-{k}", "h100-1", mig1, g1[k], weight=W1G) for k in range(3)],
        *[Pod("beta", f"b-{k}", "h100-1", mig1, g1[k], burst, weight=W1G) for k in range(3, 7)],
        Pod("idle", "i-0", "a100-1", "nvidia_com_gpu", a100[0]),
        Pod("notebooks", "n-0", "l4-1", "nvidia_com_gpu_shared", l4[0], weight=1 / REPLICAS),
        Pod("notebooks", "n-1", "l4-1", "nvidia_com_gpu_shared", l4[0], weight=1 / REPLICAS),
        Pod("notebooks", "n-2", "l4-1", "nvidia_com_gpu_shared", l4[1], weekday, weight=1 / REPLICAS),
        Pod("ml-platform", "m-0", "l4-1", "nvidia_com_gpu_shared", l4[1], weight=1 / REPLICAS),
    ]
    s.activity = {
        dev_key(g0[0]): day_busy(0.9, 0.3),
        dev_key(g0[1]): lambda i: 0.5 if second_half(i) else 0.0,
        **{dev_key(d): (lambda i: 0.4) for d in g1[:3]},
        **{dev_key(d): (lambda i: 0.95 if burst(i) else 0.0) for d in g1[3:]},
        dev_key(a100[0]): lambda i: 0.0,
        dev_key(a100[1]): lambda i: 0.0,
        dev_key(l4[0]): lambda i: 0.7,
        dev_key(l4[1]): lambda i: 0.2 if weekday(i) else 0.1,
    }
    return s


# -- the series, as the exporters write them ---------------------------------------------------------------


def _l(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


EXPORTER = {"job": "nvidia-dcgm-exporter", "instance": "10.0.0.7:9400", "service": "nvidia-dcgm-exporter"}


def openmetrics(s: Scenario, start: int, static: list[dict] = (), now: int = 0) -> str:
    """The series of S, a sample every STEP from START; then, up to NOW, a sample every TAIL seconds
    repeating the last (after the report's range: the rules evaluated live read them; a sample after now
    would put the blocks' end in the future, and Prometheus refuses the rules' samples before it)."""
    ts = [start + (i + 1) * STEP for i in range(N)]
    ts += list(range(ts[-1] + TAIL, now, TAIL))
    fams: dict[str, list[str]] = {}

    def emit(name: str, labels: dict[str, str], value_at, present=lambda i: True) -> None:
        lines = fams.setdefault(name, [])
        head = name + _l(labels)
        last = N - 1
        lines.extend(f"{head} {value_at(min(i, last))} {t}" for i, t in enumerate(ts) if present(min(i, last)))

    for rule in static:  # the static recording rules' history: they ran all week
        value = float(rule["expr"][len("vector(") : -1])
        emit(rule["record"], rule["labels"], lambda i, v=value: v, lambda i: i < N)

    for node, pool in POOL_OF_NODE.items():
        emit("kube_node_labels", {"node": node, "label_gpupool_dev_pool": pool}, lambda i: 1)
    allocatable = {
        "h100-1": {"nvidia_com_mig_3g_40gb": 2, "nvidia_com_mig_1g_10gb": 7},
        "l4-1": {"nvidia_com_gpu_shared": 2 * REPLICAS},
        "a100-1": {"nvidia_com_gpu": 2},
    }
    for node, resources in allocatable.items():
        for resource, n in resources.items():
            labels = {"node": node, "resource": resource, "unit": "integer"}
            emit("kube_node_status_allocatable", labels, lambda i, n=n: n)
    for p in s.pods:
        base = {"namespace": p.ns, "pod": p.name, "uid": f"uid-{p.name}"}
        emit(
            "kube_pod_container_resource_requests",
            {**base, "container": "main", "node": p.node, "resource": p.resource, "unit": "integer"},
            lambda i, p=p: p.units,
            p.present,
        )
        emit("kube_pod_status_phase", {**base, "phase": "Running"}, lambda i: 1, p.present)
    # dcgm-exporter in virtual-GPU mode: one series per pod on a device; a device no pod holds keeps one
    # series without pod labels, which the scrape target's namespace/pod fill in (honorLabels).
    for d in s.devices:
        dev = {"gpu": d.uuid[-1], "UUID": d.uuid, "pci_bus_id": "00000000:1B:00.0", "device": "nvidia0"}
        dev["modelName"] = d.model
        if d.profile:
            dev.update(GPU_I_PROFILE=d.profile, GPU_I_ID=d.gi)
        dev["hostname"] = d.node
        act = s.activity[dev_key(d)]
        holders = [p for p in s.pods if p.device is d]
        for k, p in enumerate(holders):
            extra = {"pod": p.name, "namespace": p.ns, "container": "main"}
            if d.node == "l4-1":
                extra["vgpu"] = str(k)
            emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {**dev, **extra, **EXPORTER}, act, p.present)
        emit(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            {**dev, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1", **EXPORTER},
            act,
            lambda i, holders=holders: not any(p.present(i) for p in holders),
        )
    out = []
    for name, lines in fams.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"


# -- the truth -----------------------------------------------------------------------------------------------


def truth(s: Scenario) -> dict:
    h = STEP / 3600
    t: dict[str, dict] = {
        ns: {"alloc": 0.0, "used": 0.0, "peak": 0.0, "charge": 0.0, "shared": False}
        for ns in ["alpha", "beta", "idle", "notebooks", "ml-platform"]
    }
    pools = {p: {"alloc": 0.0, "used": 0.0} for p in GPUS}
    for i in range(N):
        now = {ns: 0.0 for ns in t}
        for p in s.pods:
            if p.present(i):
                eq = p.units * p.weight
                now[p.ns] += eq
                t[p.ns]["alloc"] += eq * h
                t[p.ns]["charge"] += eq * h * PRICES[POOL_OF_NODE[p.node]]
                pools[POOL_OF_NODE[p.node]]["alloc"] += eq * h
        for ns, v in now.items():
            t[ns]["peak"] = max(t[ns]["peak"], v)
        for d in s.devices:
            a = s.activity[dev_key(d)](i) * d.weight
            pools[POOL_OF_NODE[d.node]]["used"] += a * h
            on = [p for p in s.pods if p.device is d and p.present(i)]
            for p in on:
                t[p.ns]["used"] += a / len(on) * h
                t[p.ns]["shared"] |= d.node == "l4-1" and a > 0
    return {"tenants": t, "pools": pools, "hours": N * h}


# -- Prometheus ------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 (loopback)
        return json.loads(r.read().decode())


@pytest.fixture(scope="module")
def world(prometheus_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("usage")
    (d / "spec.yaml").write_text(SPEC)
    spec = load_valid_spec(d / "spec.yaml")
    s = scenario()
    # The range ends at a 15-minute mark before now (the report's steps sit on multiples of its resolution).
    now = int(time.time())
    end = (now - 60) // STEP * STEP
    start = end - N * STEP
    static = rules.static_rules(spec)
    with serve(prometheus_bin, d, openmetrics(s, start, static, now), STEP, rules.groups(spec)) as url:
        yield {"url": url, "spec": d / "spec.yaml", "start": start, "end": end, "scenario": s}


@contextlib.contextmanager
def serve(prometheus_bin, d: Path, om: str, lookback: int, groups=None):
    """Prometheus on 127.0.0.1 serving the OpenMetrics OM (backfilled with promtool), with the rule GROUPS.
    Backfilled blocks carry no staleness markers, so the lookback is the samples' interval: a series that
    stopped is not seen at the next sample's time, as after a real scrape."""
    (d / "series.om").write_text(om)
    data = d / "data"
    p = subprocess.run(
        [str(prometheus_bin / "promtool"), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
         str(d / "series.om"), str(data)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    config = "global: {evaluation_interval: 2s}\n"
    if groups:
        (d / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        config += "rule_files: [rules.yaml]\n"
    (d / "prometheus.yml").write_text(config)
    port = _free_port()
    log = open(d / "prometheus.log", "w")  # noqa: SIM115 (closed in the finally)
    proc = subprocess.Popen(
        [str(prometheus_bin / "prometheus"), f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", f"--query.lookback-delta={lookback}s",
         "--storage.tsdb.retention.time=3650d"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if _get(url + "/api/v1/status/runtimeinfo")["status"] == "success":
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (d / "prometheus.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_usage(url: str, spec: Path, start: int, end: int, *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["usage", str(spec), "--prometheus", url, "--start", str(start), "--end", str(end), *flags])
    return code, out.getvalue()


def _usage(world, fmt: str = "json") -> str:
    step = f"{STEP // 60}m"
    code, out = run_usage(
        world["url"], world["spec"], world["start"], world["end"], "--step", step, "--resolution", step, "-o", fmt
    )
    assert code == 0
    return out


def test_every_figure_matches_the_truth(world):
    doc = json.loads(_usage(world))
    want = truth(world["scenario"])
    assert doc["hours"] == pytest.approx(want["hours"]) == DAYS * 24
    approx = lambda x: pytest.approx(x, rel=1e-3, abs=2e-3)  # noqa: E731 (JSON rounds to 4 places)
    got = {t["name"]: t for t in doc["tenants"]}
    for name in ("alpha", "beta", "idle", "notebooks"):
        w, g = want["tenants"][name], got[name]
        assert g["allocatedGpuHours"] == approx(w["alloc"]), name
        assert g["usedGpuHours"] == approx(w["used"]), name
        assert g["allocatedPeak"] == approx(w["peak"]), name
        assert g["allocatedAverage"] == approx(w["alloc"] / want["hours"]), name
        assert g["efficiency"] == approx(w["used"] / w["alloc"]), name
        assert g["idleGpuHours"] == approx(max(w["alloc"] - w["used"], 0)), name  # held and not used
        assert g["charge"] == pytest.approx(w["charge"], abs=0.01), name
        assert g["usedIncludesSharedDevices"] is w["shared"], name
        assert g["costCenter"] == CC[name]
    # the scenario's shape: an idle tenant, a tenant whose peak is far over its average
    assert got["idle"]["usedGpuHours"] == 0 and got["idle"]["allocatedGpuHours"] == pytest.approx(DAYS * 24)
    assert got["beta"]["allocatedPeak"] == pytest.approx(1.0)  # all seven 1g.10gb during the burst
    assert got["beta"]["allocatedPeak"] > 2 * got["beta"]["allocatedAverage"]
    other = doc["otherNamespaces"]
    assert other["allocatedGpuHours"] == approx(want["tenants"]["ml-platform"]["alloc"])
    assert other["usedGpuHours"] == approx(want["tenants"]["ml-platform"]["used"])
    for cc in doc["costCenters"]:
        members = [n for n, c in CC.items() if c == cc["name"]]
        assert cc["allocatedGpuHours"] == approx(sum(want["tenants"][n]["alloc"] for n in members))
        assert cc["usedGpuHours"] == approx(sum(want["tenants"][n]["used"] for n in members))
        assert cc["charge"] == pytest.approx(sum(want["tenants"][n]["charge"] for n in members), abs=0.02)
    for p in doc["pools"]:
        w = want["pools"][p["name"]]
        cap = GPUS[p["name"]] * want["hours"]
        assert p["capacityGpuHours"] == approx(cap)
        assert p["allocatedGpuHours"] == approx(w["alloc"]), p["name"]
        assert p["usedGpuHours"] == approx(w["used"]), p["name"]
        assert p["utilisation"] == approx(w["used"] / cap), p["name"]
        assert p["unallocatedGpuHours"] == approx(cap - w["alloc"]), p["name"]
        assert p["cost"] == pytest.approx(cap * PRICES[p["name"]], abs=0.01)
    assert doc["outsidePools"] == [] and doc["unweighed"] == [] and doc["trusted"] is True
    assert doc["gaps"] == []  # the data, the history and the labels cover the whole week


def test_the_other_formats_show_the_same_report(world):
    table = _usage(world, "table")
    assert "idle" in table and "cc-ml" in table and "includes an equal share" in table
    assert _usage(world, "markdown").startswith("## gpupool usage: cluster scenario")
    rows = _usage(world, "csv").splitlines()
    assert rows[0].startswith("cost_center,tenant,pool") and any(
        r.startswith("cc-web,idle,a100,168.0000") for r in rows
    )


def _doc_block(path: Path, after: str) -> list[str]:
    """The lines of the first fenced block after the line AFTER in PATH."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    return lines[fence + 1 : end]


@pytest.mark.parametrize(
    "doc, after",
    [("README.md", "<!-- usage-report:"), ("docs/explanation/monitoring.md", "`gpupool usage` on it")],
)
def test_the_report_shown_in_the_docs_is_what_the_command_prints(world, doc, after):
    """The usage report the README and docs/explanation/monitoring.md show is this scenario's, line for line, in order."""
    block = _doc_block(Path(__file__).resolve().parents[2] / doc, after)
    printed = _usage(world, "table").splitlines()
    assert len(block) >= 5
    first = printed.index(block[0])  # ValueError: the doc's first line is not printed at all
    assert printed[first : first + len(block)] == block


def test_every_dashboard_panel_returns_data(world):
    """The recording rules evaluated live over the scenario's last samples feed every panel's query."""
    names = [r["record"] for g in rules.groups(load_valid_spec(world["spec"])) for r in g["rules"] if "record" in r]
    deadline = time.monotonic() + 60
    missing = names
    while missing and time.monotonic() < deadline:
        time.sleep(1)
        missing = [
            n for n in set(names)
            if not _get(world["url"] + "/api/v1/query?" + urllib.parse.urlencode({"query": n}))["data"]["result"]
        ]  # fmt: skip
    assert not missing, missing
    for title, _unit, targets, _ in dashboard.panel_queries():
        for expr, _legend in targets:
            result = _get(world["url"] + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]
            assert result, (title, expr)


# -- The awkward six hours: minute samples, truth added up minute by minute ------------------------------------
#
# Minute k (1..M) is the minute ending at S + 60k; a series present at minute k has a sample at S + 60k, and
# the server's lookback of 60 s makes the evaluation at S + 60k see exactly that sample.

M = 360  # minutes of data
HISTORY_FROM = 30  # the recording rules were installed after minute 30: before, the spec prices
RELAYOUT = 180  # m-1's H100: 2 x 3g.40gb up to minute 180, then 7 x 1g.10gb
MOVE = 120  # node `mover` is in pool a up to minute 120, then in pool b
PRICE_CHANGE = 240  # pool a costs 3.0 per GPU-hour up to minute 240 (history), then 2.0 (as the spec says)
OUTAGE = (240, 280)  # b-1's DCGM exporter reports nothing in minutes 241..280
PAST = 30  # minutes the past-the-data window runs beyond the data

AWKWARD_SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: awkward}
monitoring: {enabled: true}
nodePools:
  - name: mig
    gpu: H100-80GB
    gpusPerNode: 1
    nodes: [m-1]
    pricePerGpuHour: 4.0
    sharing:
      mig: {layout: {1g.10gb: 7}}
  - name: a
    gpu: A100-80GB
    gpusPerNode: 1
    nodes: [a-1]
    pricePerGpuHour: 2.0
  - name: b
    gpu: L4
    gpusPerNode: 1
    nodes: [b-1, mover]
    pricePerGpuHour: 1.0
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: alpha, tier: standard, owners: [a], gpus: {nvidia.com/mig-1g.10gb: 7}}
  - {name: shorty, tier: standard, owners: [s], gpus: {nvidia.com/gpu: 1}}
  - {name: steady, tier: standard, owners: [t], gpus: {nvidia.com/gpu: 1}}
  - {name: bursty, tier: standard, owners: [u], gpus: {nvidia.com/gpu: 1}}
"""
# NVIDIA's MIG user guide, H100 profiles: 3g.40gb has 3 compute slices, 1g.10gb 1.
MIG_SLICES = {"3g.40gb": 3, "1g.10gb": 1}


def pool_at(node: str, k: int) -> str | None:
    return {"m-1": "mig", "a-1": "a", "b-1": "b", "mover": "a" if k <= MOVE else "b"}.get(node)


def history_at(k: int) -> dict:
    """What the recording rules recorded at minute k (None before they were installed)."""
    if k <= HISTORY_FROM:
        return {}
    mig_weight = {"nvidia_com_mig_3g_40gb": 0.5} if k <= RELAYOUT else {"nvidia_com_mig_1g_10gb": 1 / 7}
    return {
        "weight": {("mig", r): w for r, w in mig_weight.items()} | {("a", "nvidia_com_gpu"): 1.0, ("b", "nvidia_com_gpu"): 1.0},
        "price": {"mig": 4.0, "a": 3.0 if k <= PRICE_CHANGE else 2.0, "b": 1.0},
        "gpus": {"mig": 1, "a": 2 if k <= MOVE else 1, "b": 1 if k <= MOVE else 2},
    }  # fmt: skip


# The spec as written now, what a moment without history is priced with (docs/explanation/monitoring.md).
SPEC_NOW = {
    "weight": {("mig", "nvidia_com_mig_1g_10gb"): 1 / 7, ("a", "nvidia_com_gpu"): 1.0, ("b", "nvidia_com_gpu"): 1.0},
    "price": {"mig": 4.0, "a": 2.0, "b": 1.0},
    "gpus": {"mig": 1, "a": 1, "b": 2},
}


@dataclass
class Dev:
    node: str
    uuid: str
    activity: callable  # minute -> busy fraction, None while the device does not exist
    profile: str = ""
    gi: str = ""


@dataclass
class APod:
    ns: str
    name: str
    node: str
    resource: str
    dev: Dev
    present: callable


def short_pod_starts() -> list[int]:
    return [k0 for k0 in range(7, M - 2, 20)]  # 3-minute pods, none across a quarter hour


def awkward() -> tuple[list[Dev], list[APod]]:
    old = lambda a: lambda k: a if k <= RELAYOUT else None  # noqa: E731
    new = lambda a: lambda k: a if k > RELAYOUT else None  # noqa: E731
    g3 = [Dev("m-1", "GPU-m1", old(a), "3g.40gb", str(gi)) for gi, a in ((1, 0.6), (2, 0.2))]
    g1 = [Dev("m-1", "GPU-m1", new(0.5 if gi < 9 else 0.0), "1g.10gb", str(gi)) for gi in range(7, 14)]
    starts = short_pod_starts()
    shorty_on = lambda k: any(k0 <= k <= k0 + 2 for k0 in starts)  # noqa: E731
    a1 = Dev("a-1", "GPU-a1", lambda k: 0.8 if shorty_on(k) else 0.0)
    mover = Dev("mover", "GPU-mv", lambda k: 0.4)
    b1 = Dev("b-1", "GPU-b1", lambda k: None if OUTAGE[0] < k <= OUTAGE[1] else (0.0 if k % 10 == 0 else 1.0))
    stray = Dev("stray", "GPU-st", lambda k: 0.9)
    always = lambda k: True  # noqa: E731
    pods = [
        APod("alpha", "a-3g", "m-1", "nvidia_com_mig_3g_40gb", g3[0], lambda k: k <= RELAYOUT),
        *[APod("alpha", f"a-1g-{j}", "m-1", "nvidia_com_mig_1g_10gb", g1[j], lambda k: k > RELAYOUT) for j in (0, 1)],
        *[APod("shorty", f"s-{k0}", "a-1", "nvidia_com_gpu", a1, lambda k, k0=k0: k0 <= k <= k0 + 2) for k0 in starts],
        APod("steady", "st-0", "mover", "nvidia_com_gpu", mover, always),
        APod("bursty", "bu-0", "b-1", "nvidia_com_gpu", b1, always),
        APod("ops", "o-0", "stray", "nvidia_com_gpu", stray, always),
    ]  # fmt: skip
    return [*g3, *g1, a1, mover, b1, stray], pods


def awkward_openmetrics(start: int) -> str:
    devs, pods = awkward()
    fams: dict[str, list[str]] = {}

    def emit(name: str, labels: dict[str, str], value_at) -> None:
        head = name + _l(labels)
        for k in range(1, M + 1):
            v = value_at(k)
            if v is not None:
                fams.setdefault(name, []).append(f"{head} {v} {start + 60 * k}")

    for node in ("m-1", "a-1", "b-1"):
        emit("kube_node_labels", {"node": node, "label_gpupool_dev_pool": pool_at(node, 1)}, lambda k: 1)
    emit("kube_node_labels", {"node": "mover", "label_gpupool_dev_pool": "a"}, lambda k: 1 if k <= MOVE else None)
    emit("kube_node_labels", {"node": "mover", "label_gpupool_dev_pool": "b"}, lambda k: 1 if k > MOVE else None)
    emit("kube_node_labels", {"node": "stray"}, lambda k: 1)  # no gpupool.dev/pool label, not in the spec
    for p in pods:
        base = {"namespace": p.ns, "pod": p.name, "uid": f"uid-{p.name}"}
        on = lambda k, p=p: 1 if p.present(k) else None  # noqa: E731
        labels = {**base, "container": "main", "node": p.node, "resource": p.resource, "unit": "integer"}
        emit("kube_pod_container_resource_requests", labels, on)
        emit("kube_pod_status_phase", {**base, "phase": "Running"}, on)
    for d in devs:
        dev = {"gpu": "0", "UUID": d.uuid, "device": "nvidia0", "modelName": "x", "hostname": d.node}
        if d.profile:
            dev.update(GPU_I_PROFILE=d.profile, GPU_I_ID=d.gi)
        holders = [p for p in pods if p.dev is d]
        for p in holders:
            extra = {"pod": p.name, "namespace": p.ns, "container": "main"}
            emit(
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                {**dev, **extra, **EXPORTER},
                lambda k, p=p, d=d: d.activity(k) if p.present(k) else None,
            )
        idle = {**dev, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1", **EXPORTER}
        emit(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            idle,
            lambda k, d=d, h=holders: None if any(p.present(k) for p in h) else d.activity(k),
        )
    # the static recording rules' history, from minute HISTORY_FROM + 1
    for kind, name, key in (
        ("weight", q.RESOURCE_WEIGHT, ("pool", "resource")),
        ("price", q.POOL_PRICE, ("pool",)),
        ("gpus", q.POOL_GPUS, ("pool",)),
    ):
        keys = {x for k in range(1, M + 1) for x in history_at(k).get(kind, {})}
        for x in sorted(keys):
            labels = dict(zip(key, x if isinstance(x, tuple) else (x,), strict=True))
            emit(name, labels, lambda k, kind=kind, x=x: history_at(k).get(kind, {}).get(x))
    out = []
    for name, lines in fams.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"  # fmt: skip


def awkward_truth(last: int = M) -> dict:
    """Minute by minute over minutes 1..LAST, from the schedule above, with the documented rules: a moment
    is priced with the history recorded then, else with the spec as written; a MIG instance's activity
    weighs its slices over the slices present on its GPU; a request on a node of no pool, or of a resource
    no weight is known for, is reported apart; use is what the exporter reported."""
    devs, pods = awkward()
    h = 1 / 60
    t = {ns: {"alloc": 0.0, "used": 0.0, "charge": 0.0} for ns in ("alpha", "shorty", "steady", "bursty", "ops")}
    pools = {p: {"cap": 0.0, "cost": 0.0, "alloc": 0.0, "used": 0.0} for p in ("mig", "a", "b")}
    outside: dict = {}
    unweighed: dict = {}
    for k in range(1, last + 1):
        now = history_at(k) or SPEC_NOW
        for name, pool in pools.items():
            pool["cap"] += now["gpus"][name] * h
            pool["cost"] += now["gpus"][name] * now["price"][name] * h
        for p in pods:
            if not p.present(k):
                continue
            pool = pool_at(p.node, k)
            w = now["weight"].get((pool, p.resource))
            if pool is None:
                outside[(p.node, p.ns, p.resource)] = outside.get((p.node, p.ns, p.resource), 0.0) + h
            elif w is None:
                unweighed[(pool, p.resource, p.ns)] = unweighed.get((pool, p.resource, p.ns), 0.0) + h
            else:
                t[p.ns]["alloc"] += w * h
                t[p.ns]["charge"] += w * now["price"][pool] * h
                pools[pool]["alloc"] += w * h
        on_gpu = {}
        for d in devs:
            if d.profile and d.activity(k) is not None:
                on_gpu[d.uuid] = on_gpu.get(d.uuid, 0) + MIG_SLICES[d.profile]
        for d in devs:
            a, pool = d.activity(k), pool_at(d.node, k)
            if a is None or pool is None:
                continue
            w = MIG_SLICES[d.profile] / on_gpu[d.uuid] if d.profile else 1.0
            pools[pool]["used"] += a * w * h
            for p in pods:
                if p.dev is d and p.present(k):
                    t[p.ns]["used"] += a * w * h
    return {"tenants": t, "pools": pools, "outside": outside, "unweighed": unweighed}


@pytest.fixture(scope="module")
def awkward_world(prometheus_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("awkward")
    (d / "spec.yaml").write_text(AWKWARD_SPEC)
    start = (int(time.time()) - 2 * 86400) // 3600 * 3600  # two days ago, on the hour: all in the past
    with serve(prometheus_bin, d, awkward_openmetrics(start), 60) as url:
        yield {"url": url, "spec": d / "spec.yaml", "start": start, "reports": {}}


def _awkward(w, step: str, end_minute: int = M, start_minute: int = 0) -> tuple[int, dict]:
    """`gpupool usage -o json` over minutes START_MINUTE..END_MINUTE (each report run once per module)."""
    key = (step, end_minute, start_minute)
    if key not in w["reports"]:
        start, end = w["start"] + 60 * start_minute, w["start"] + 60 * end_minute
        code, out = run_usage(w["url"], w["spec"], start, end, "--step", step, "-o", "json")
        w["reports"][key] = (code, json.loads(out))
    return w["reports"][key]


def _figures(doc: dict) -> dict:
    """Every figure of a report that must not depend on --step, by name."""
    out = {}
    for t in [*doc["tenants"], doc["otherNamespaces"]]:
        for key in ("allocatedGpuHours", "usedGpuHours", "charge"):
            out[f"{t['name']}.{key}"] = t[key]
    for p in doc["pools"]:
        for key in ("capacityGpuHours", "allocatedGpuHours", "usedGpuHours", "cost", "unallocatedCost"):
            out[f"{p['name']}.{key}"] = p[key]
    for row in doc["outsidePools"] + doc["unweighed"]:
        out[f"apart.{row.get('node', row.get('pool'))}.{row['namespace']}"] = row["unitHours"]
    return out


def test_the_awkward_hours_match_the_minute_by_minute_truth(awkward_world):
    """A re-layout, a node moving pools, a node in no pool, 3-minute pods, bursty use, a price change, an
    exporter outage and history starting late: every tenant and pool figure equals the truth added up minute
    by minute, the gaps are named with their durations, and the exit status says the report has gaps."""
    code, doc = _awkward(awkward_world, "15m")
    want = awkward_truth()
    approx = lambda x: pytest.approx(x, rel=1e-3, abs=2e-3)  # noqa: E731 (JSON rounds to 4 places)
    got = {t["name"]: t for t in doc["tenants"]}
    for ns in ("alpha", "shorty", "steady", "bursty"):
        assert got[ns]["allocatedGpuHours"] == approx(want["tenants"][ns]["alloc"]), ns
        assert got[ns]["usedGpuHours"] == approx(want["tenants"][ns]["used"]), ns
        assert got[ns]["charge"] == pytest.approx(want["tenants"][ns]["charge"], abs=0.01), ns
    pools = {p["name"]: p for p in doc["pools"]}
    for name, w in want["pools"].items():
        assert pools[name]["capacityGpuHours"] == approx(w["cap"]), name
        assert pools[name]["cost"] == pytest.approx(w["cost"], abs=0.01), name
        assert pools[name]["allocatedGpuHours"] == approx(w["alloc"]), name
        assert pools[name]["usedGpuHours"] == approx(w["used"]), name
    # the node in no pool: reported apart, charged to nobody
    assert {(r["node"], r["namespace"], r["resource"]): r["unitHours"] for r in doc["outsidePools"]} == {
        k: approx(v) for k, v in want["outside"].items()
    }
    assert doc["otherNamespaces"]["allocatedGpuHours"] == 0 and doc["otherNamespaces"]["charge"] == 0
    # the retired profile before the history starts: named, not charged, no AssertionError
    assert (
        {(r["pool"], r["resource"], r["namespace"]): r["unitHours"] for r in doc["unweighed"]}
        == {k: approx(v) for k, v in want["unweighed"].items()}
        == {("mig", "nvidia_com_mig_3g_40gb", "alpha"): approx(HISTORY_FROM / 60)}
    )
    # the node that moved: its minutes in each pool
    mover = next(n for n in doc["nodes"] if n["node"] == "mover")
    assert {p["pool"]: p["hours"] for p in mover["pools"]} == {"a": approx(MOVE / 60), "b": approx((M - MOVE) / 60)}
    gaps = {(g["kind"], g.get("node", "")): g for g in doc["gaps"]}
    assert set(gaps) == {("exporter", "b-1"), ("history", "")}
    assert gaps[("exporter", "b-1")]["seconds"] == 60 * (OUTAGE[1] - OUTAGE[0])
    assert gaps[("history", "")]["seconds"] == 60 * HISTORY_FROM
    assert code == 3 and doc["trusted"] is False


def test_short_pods_and_bursts_count_what_step_end_samples_miss(awkward_world):
    """The scenario is one where sampling at step ends is wrong: 3-minute pods fall between quarter hours
    and bursty's pauses land on them; the report (any step) counts them as the truth does."""
    want = awkward_truth()
    starts = short_pod_starts()
    sampled_shorty = sum(1 for k in range(15, M + 1, 15) for k0 in starts if k0 <= k <= k0 + 2)
    assert sampled_shorty == 0 and want["tenants"]["shorty"]["alloc"] == pytest.approx(len(starts) * 3 / 60)
    bursty_sampled = sum(0.0 if k % 10 == 0 else 1.0 for k in range(15, M + 1, 15) if not OUTAGE[0] < k <= OUTAGE[1])
    assert bursty_sampled * 0.25 < 0.9 * want["tenants"]["bursty"]["used"]  # sampling under-counts by > 10 %
    _, doc = _awkward(awkward_world, "15m")
    got = {t["name"]: t for t in doc["tenants"]}
    assert got["shorty"]["allocatedGpuHours"] == pytest.approx(want["tenants"]["shorty"]["alloc"], abs=2e-3)
    assert got["bursty"]["usedGpuHours"] == pytest.approx(want["tenants"]["bursty"]["used"], abs=2e-3)


def test_step_1m_and_15m_agree(awkward_world):
    """The totals do not depend on --step: every figure of --step 1m equals --step 15m's (JSON rounding)."""
    _, fine = _awkward(awkward_world, "1m")
    _, coarse = _awkward(awkward_world, "15m")
    a, b = _figures(fine), _figures(coarse)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=0.011), key


def test_a_window_past_the_data_says_how_much_is_missing(awkward_world):
    """A window running PAST minutes beyond the data: the same figures, a no-data gap of that length at the
    end, exit 3."""
    code, doc = _awkward(awkward_world, "15m", end_minute=M + PAST)
    _, whole = _awkward(awkward_world, "15m")
    gap = next(g for g in doc["gaps"] if g["kind"] == "no-data")
    assert gap["seconds"] == 60 * PAST and gap["end"] == doc["end"]
    assert code == 3 and any("no data for 30m" in why for why in doc["untrusted"])
    assert _figures(doc) == pytest.approx(_figures(whole), abs=0.011)  # capacity too: it stops with the data


def test_an_empty_window_is_all_gap(awkward_world):
    """A window before any data: zeros, one no-data gap of the whole window, exit 3."""
    code, doc = _awkward(awkward_world, "15m", end_minute=-60, start_minute=-180)
    assert code == 3
    assert [(g["kind"], g["seconds"]) for g in doc["gaps"]] == [("no-data", 2 * 3600)]
    assert all(t["allocatedGpuHours"] == 0 for t in doc["tenants"])
    assert all(p["capacityGpuHours"] == 0 and p["cost"] == 0 for p in doc["pools"])  # no data, nothing priced
