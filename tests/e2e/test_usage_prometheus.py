"""`gpupool usage` against a real Prometheus holding a week of generated series, compared figure by figure
with the scenario's truth computed here; and every dashboard panel's query returns data.

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
from gpupool.rules.engine import load_valid_spec

pytestmark = pytest.mark.e2e

STEP = 900  # seconds between samples, and the usage report's step
DAYS = 7
N = DAYS * 86400 // STEP  # samples per series
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


def openmetrics(s: Scenario, start: int) -> str:
    ts = [start + (i + 1) * STEP for i in range(N)]
    fams: dict[str, list[str]] = {}

    def emit(name: str, labels: dict[str, str], value_at, present=lambda i: True) -> None:
        lines = fams.setdefault(name, [])
        head = name + _l(labels)
        lines.extend(f"{head} {value_at(i)} {ts[i]}" for i in range(N) if present(i))

    for node, pool in POOL_OF_NODE.items():
        emit("kube_node_labels", {"node": node, "label_gpupool_dev_pool": pool}, lambda i: 1)
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
    end = int(time.time()) - 1  # the last sample just before now, so the rules evaluated now see it
    start = end - N * STEP
    (d / "series.om").write_text(openmetrics(s, start))
    data = d / "data"
    p = subprocess.run(
        [str(prometheus_bin / "promtool"), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
         str(d / "series.om"), str(data)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (d / "rules.yaml").write_text(yaml.safe_dump({"groups": rules.groups(spec)}, sort_keys=False))
    (d / "prometheus.yml").write_text("global: {evaluation_interval: 2s}\nrule_files: [rules.yaml]\n")
    port = _free_port()
    log = open(d / "prometheus.log", "w")  # noqa: SIM115 (closed in the finally)
    proc = subprocess.Popen(
        [str(prometheus_bin / "prometheus"), f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", f"--query.lookback-delta={STEP}s",
         "--storage.tsdb.retention.time=30d"],
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
        yield {"url": url, "spec": d / "spec.yaml", "start": start, "end": end, "scenario": s}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _usage(world, fmt: str = "json") -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            ["usage", str(world["spec"]), "--prometheus", world["url"], "--start", str(world["start"]),
             "--end", str(world["end"]), "--step", f"{STEP // 60}m", "-o", fmt]
        )  # fmt: skip
    assert code == 0
    return out.getvalue()


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
    assert doc["unattributedGpuHours"] == 0


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
    [("README.md", "<!-- usage-report:"), ("docs/monitoring.md", "`gpupool usage` on it")],
)
def test_the_report_shown_in_the_docs_is_what_the_command_prints(world, doc, after):
    """The usage report the README and docs/monitoring.md show is this scenario's, line for line, in order."""
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
