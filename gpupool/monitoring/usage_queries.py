"""The PromQL `gpupool usage` runs over a time range: every figure integrated at a fixed resolution and priced
with the history the recording rules wrote (gpupool.monitoring.rules' static series), the spec's values
standing in where that history is missing.

Integration. Each query is evaluated by query_range at the report's --step, and each step's figure is
`sum_over_time((X)[step:res]) * res`: X evaluated at every multiple of the resolution inside the step, so a
pod shorter than the step and a job pausing a minute in ten count what they held, and the sum over steps does
not depend on --step (prometheus promql/engine.go, evaluator.eval, `case *parser.SubqueryExpr`: the subquery
starts at "the first timestamp after (ev.startTimestamp - offset - range) that is aligned with the step
(multiple of 'newEv.interval')", so the points of consecutive steps tile the range). `sum_over_time`, not
`avg_over_time`: an average over the points where a short pod exists would count it for the whole step.

History. Each moment is priced with what was true at that moment: the pool of a node from its
`gpupool.dev/pool` label (kube_node_labels), a resource's weight, a pool's price and GPUs from the recorded
static series (`max by` so a duplicated series from two Prometheus replicas joins once); where a series is
absent at a moment (before the rules were installed, a node without the label), the spec's value is used
(`or on(...)` a literal vector), and the coverage query says for how long that happened.

MIG. A MIG instance's activity is weighed by its own GPU's layout at that moment: its compute slices over
the slices of the instances present on the same GPU (`UUID` is the parent GPU's in dcgm-exporter's MIG
series), the weight gpupool.gpu.mig.layout_weights defines, so a GPU's instances add up to one GPU whatever
the pool's other GPUs hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpupool.monitoring import promql as q


def _num(x: float) -> str:
    return f"{float(x):.12g}"


def literal(rows: Iterable[tuple[Sequence[tuple[str, str]], float]]) -> str | None:
    """A PromQL vector of the given (labels, value) rows, built with label_replace; None when empty."""
    terms = []
    for labels, value in rows:
        expr = f"vector({_num(value)})"
        for name, val in labels:
            # label_replace's replacement expands $1 and ${x}: a literal $ is written $$
            expr = f'label_replace({expr}, "{name}", {q.quoted(val.replace("$", "$$"))}, "", "")'
        terms.append(expr)
    return " or ".join(terms) if terms else None


def _with_fallback(recorded: str, by: str, fallback: str | None, key: str = "") -> str:
    """RECORDED (one series per BY), and FALLBACK's series for the KEYs (default BY) it has none of."""
    head = f"max by ({by}) ({recorded})"
    return f"({head} or on({key or by}) ({fallback}))" if fallback else f"({head})"


@dataclass(frozen=True)
class SpecValues:
    """The spec's values, used at the moments the recorded history lacks them."""

    weights: tuple[tuple[str, str, float], ...] = ()  # (pool, resource as kube-state-metrics writes it, GPUs)
    prices: tuple[tuple[str, float], ...] = ()  # (pool, price per GPU-hour)
    gpus: tuple[tuple[str, int], ...] = ()  # (pool, GPUs)
    nodes: tuple[tuple[str, str], ...] = ()  # (node, pool) as the spec lists them
    slices: tuple[tuple[str, int], ...] = ()  # (MIG profile, compute slices): the profiles of the pools' models
    dra_devices: tuple[tuple[str, str, str], ...] = ()  # (pool, driver's profile key, resource): DRA pools' devices


class Queries:
    """The range queries of one report: STEP and RES in seconds, RES dividing STEP."""

    def __init__(self, spec: SpecValues, step: float, res: float):
        self.step, self.res = int(step), int(res)
        self.node_pool = _with_fallback(
            f'label_replace({q.NODE_LABELS}{{{q.NODE_POOL_LABEL}!=""}}, "pool", "$1", "{q.NODE_POOL_LABEL}", "(.+)")',
            "node, pool",
            literal(((("node", n), ("pool", p)), 1) for n, p in spec.nodes),
            key="node",  # a node's label wins over the spec's node list
        )
        self.weight = _with_fallback(
            q.RESOURCE_WEIGHT,
            "pool, resource",
            literal(((("pool", p), ("resource", r)), w) for p, r, w in spec.weights),
        )
        self.price = _with_fallback(q.POOL_PRICE, "pool", literal(((("pool", p),), x) for p, x in spec.prices))
        self.gpus = _with_fallback(q.POOL_GPUS, "pool", literal(((("pool", p),), n) for p, n in spec.gpus))
        self.dra_devices = _with_fallback(
            q.DRA_DEVICE_RESOURCE,
            "pool, device_profile, resource",
            literal(((("pool", p), ("device_profile", k), ("resource", r)), 1) for p, k, r in spec.dra_devices),
            key="pool, device_profile",
        )
        self.slices = _with_fallback(
            q.MIG_PROFILE_SLICES, "GPU_I_PROFILE", literal(((("GPU_I_PROFILE", name),), n) for name, n in spec.slices)
        )

    def integral(self, expr: str) -> str:
        """EXPR integrated over each step: value x seconds, at every multiple of the resolution in the step."""
        return f"sum_over_time(({expr})[{self.step}s:{self.res}s]) * {self.res}"

    # -- the joins --------------------------------------------------------------------------------------------

    def requests(self) -> str:
        return f"sum by (namespace, node, resource) ({self.holdings()})"

    def holdings(self) -> str:
        """Running pods' GPU requests and their claims' DRA devices (promql.running_gpu_requests)."""
        return q.running_gpu_requests(self.node_pool, self.dra_devices)

    def requests_in_pools(self) -> str:
        return f"{self.requests()} * on(node) group_left(pool) {self.node_pool}"

    def allocated_eq(self) -> str:
        return f"{self.requests_in_pools()} * on(pool, resource) group_left() {self.weight}"

    def active(self, matchers: str) -> str:
        return f"{q.dcgm(q.GR_ENGINE_ACTIVE, matchers)} * on(node) group_left(pool) {self.node_pool}"

    def weighted_active(self) -> str:
        """Activity in GPU-equivalents, a MIG instance weighed on its own GPU (promql.weighted_active)."""
        return q.weighted_active(self.active('GPU_I_PROFILE!=""'), self.active('GPU_I_PROFILE=""'), self.slices)

    # -- the queries the source runs --------------------------------------------------------------------------

    def allocated(self) -> str:
        """{namespace, pool}: GPU-equivalent-seconds held by running pods, weighed as at each moment."""
        return self.integral(f"sum by (namespace, pool) ({self.allocated_eq()})")

    def charged(self) -> str:
        """{namespace, pool}: GPU-equivalent-seconds x the price per GPU-hour at each moment (priced pools)."""
        return self.integral(f"sum by (namespace, pool) ({self.allocated_eq()} * on(pool) group_left() {self.price})")

    def peak(self) -> str:
        """{namespace}: the most GPU-equivalents held at once within each step."""
        return f"max_over_time((sum by (namespace) ({self.allocated_eq()}))[{self.step}s:{self.res}s])"

    def used(self) -> str:
        """{namespace, pool}: each namespace's share of its devices' activity, GPU-equivalent-seconds."""
        return self.integral(f"sum by (namespace, pool) ({q.share_of_device(self.weighted_active())})")

    def devices(self) -> str:
        """{pool}: every device's activity once, GPU-equivalent-seconds."""
        dev = ", ".join(q.DEVICE)
        return self.integral(f"sum by (pool) (max by (pool, {dev}, GPU_I_PROFILE) ({self.weighted_active()}))")

    def capacity(self) -> str:
        """{pool, what="gpus"|"cost"}: GPU-seconds of the pool, and GPU-seconds x price (priced pools); only
        at moments with kube-state-metrics data (a window past the data has no capacity to price)."""
        seen = f"and on() count({q.NODE_LABELS})"
        gpus = self.integral(f"sum by (pool) ({self.gpus}) {seen}")
        cost = self.integral(f"sum by (pool) ({self.gpus} * on(pool) group_left() {self.price}) {seen}")
        return f'label_replace({gpus}, "what", "gpus", "", "") or label_replace({cost}, "what", "cost", "", "")'

    def nodes(self) -> str:
        """{node, pool}: seconds the node was in the pool."""
        return self.integral(f"{self.node_pool} * 0 + 1")

    def outside_pools(self) -> str:
        """{namespace, node, resource}: unit-seconds of GPU requests on nodes of no pool (never charged)."""
        return self.integral(f"{self.requests()} unless on(node) {self.node_pool}")

    def unweighed(self) -> str:
        """{namespace, pool, resource}: unit-seconds of requests the pool has no weight for at that moment."""
        return self.integral(f"{self.requests_in_pools()} unless on(pool, resource) {self.weight}")

    def unknown_profiles(self) -> str:
        """{GPU_I_PROFILE}: device-seconds of MIG activity of a profile gpupool's catalog does not know."""
        mig = 'GPU_I_PROFILE!=""'
        return self.integral(
            f"count by (GPU_I_PROFILE) ({q.dcgm(q.GR_ENGINE_ACTIVE, mig)} unless on(GPU_I_PROFILE) ({self.slices}))"
        )

    def coverage(self) -> str:
        """{what}: seconds of each step with kube-state-metrics data ("data"), with the recorded history
        ("history"), with node pool labels ("labels"); {what="exporter", node}: seconds a node's pods held
        GPUs while its DCGM exporter reported nothing."""
        r = f"[{self.step}s:{self.res}s]) * {self.res}"
        parts = {
            "data": f"count_over_time(count({q.NODE_LABELS}){r}",
            "history": f"count_over_time(count({q.POOL_GPUS}){r}",
            "labels": f'count_over_time(count({q.NODE_LABELS}{{{q.NODE_POOL_LABEL}!=""}}){r}',
        }
        out = [f'label_replace({e}, "what", "{k}", "", "")' for k, e in parts.items()]
        gap = f"count by (node) ({self.holdings()}) unless on(node) count by (node) ({q.dcgm(q.GR_ENGINE_ACTIVE)})"
        out.append(f'label_replace({self.integral(f"{gap} * 0 + 1")}, "what", "exporter", "", "")')
        return " or ".join(out)
