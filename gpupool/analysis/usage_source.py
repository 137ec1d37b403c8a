"""Where `gpupool usage` reads its figures: one typed interface, UsageSource, served by Prometheus
(PrometheusSource, the queries of gpupool.monitoring.usage_queries) and by a fake in the unit tests.

Every call answers, for each step of the window, series whose samples are already integrated over the step
(value x seconds at the source's resolution; see gpupool.monitoring.usage_queries), labelled as each method
says. A step with no sample for a series contributed nothing to it. gpupool.analysis.usage turns them into
GPU-hours, charges, gaps and the report.
"""

from __future__ import annotations

from typing import Protocol

from gpupool.model import platform as m
from gpupool.monitoring import promql as q
from gpupool.monitoring.rules import dra_device_kinds, mig_profile_slices
from gpupool.monitoring.series import Series, Window
from gpupool.monitoring.usage_queries import Queries, SpecValues


class UsageSource(Protocol):
    """Per-step integrals over WINDOW (its resolution is the source's)."""

    def allocated(self, window: Window) -> list[Series]:
        """{namespace, pool}: GPU-equivalent-seconds held by running pods, each moment weighed as it was."""
        ...

    def charged(self, window: Window) -> list[Series]:
        """{namespace, pool}: GPU-equivalent-seconds x the pool's price per GPU-hour at each moment."""
        ...

    def peak(self, window: Window) -> list[Series]:
        """{namespace}: the most GPU-equivalents held at once within each step (not integrated)."""
        ...

    def used(self, window: Window) -> list[Series]:
        """{namespace, pool}: the namespace's share of its devices' activity, GPU-equivalent-seconds."""
        ...

    def devices(self, window: Window) -> list[Series]:
        """{pool}: every device's activity counted once, GPU-equivalent-seconds."""
        ...

    def capacity(self, window: Window) -> list[Series]:
        """{pool, what="gpus"}: GPU-seconds of the pool; {pool, what="cost"}: GPU-seconds x price per hour."""
        ...

    def nodes(self, window: Window) -> list[Series]:
        """{node, pool}: seconds the node belonged to the pool."""
        ...

    def outside_pools(self, window: Window) -> list[Series]:
        """{namespace, node, resource}: unit-seconds of GPU requests on nodes of no pool."""
        ...

    def unweighed(self, window: Window) -> list[Series]:
        """{namespace, pool, resource}: unit-seconds of requests with no weight, recorded or in the spec."""
        ...

    def unknown_profiles(self, window: Window) -> list[Series]:
        """{GPU_I_PROFILE}: device-seconds of MIG activity of a profile no GPU model of the catalog has."""
        ...

    def coverage(self, window: Window) -> list[Series]:
        """{what="data"|"history"|"labels"}: seconds of each step with kube-state-metrics' series, with the
        recorded history, with node pool labels; {what="exporter", node}: seconds a node's pods held GPUs
        while no DCGM series of the node was there."""
        ...


def spec_values(spec: m.Spec) -> SpecValues:
    """What the spec says now: the fallback for moments the recorded history does not cover."""
    weights: list[tuple[str, str, float]] = []
    prices: list[tuple[str, float]] = []
    gpus: list[tuple[str, int]] = []
    nodes: list[tuple[str, str]] = []
    for p in spec.pools:
        gpus.append((p.name, p.total_gpus))
        if p.price_per_gpu_hour is not None:
            prices.append((p.name, float(p.price_per_gpu_hour)))
        nodes.extend((n, p.name) for n in p.nodes)
        for adv in p.resources_per_node():
            weights.append((p.name, q.ksm_resource(adv), float(p.unit_gpu_fraction(adv))))
    dra = tuple((p.name, key, resource) for p in spec.pools for key, resource in dra_device_kinds(p))
    return SpecValues(tuple(weights), tuple(prices), tuple(gpus), tuple(nodes), tuple(mig_profile_slices(spec)), dra)


DAY = 86400.0


class PrometheusSource:
    """UsageSource over Prometheus' HTTP API (gpupool.monitoring.prometheus), RESOLUTION seconds apart."""

    def __init__(self, conn, spec: m.Spec, resolution: float):
        self.conn = conn
        self.values = spec_values(spec)
        self.resolution = resolution

    def _run(self, window: Window, name: str) -> list[Series]:
        """The query NAME over WINDOW, a day of steps per request at most: each step is evaluated
        step/resolution times inside Prometheus, and its --query.max-samples (50 million by default) bounds
        what one request may load."""
        from gpupool.monitoring.prometheus import query_range

        query = getattr(Queries(self.values, window.step, self.resolution), name)()
        per = max(1, int(DAY // window.step))
        samples: dict[tuple, dict[float, float]] = {}
        labels: dict[tuple, dict[str, str]] = {}
        for first in range(0, window.steps, per):
            part = Window(
                window.start + first * window.step,
                window.start + min(first + per, window.steps) * window.step,
                window.step,
            )
            for s in query_range(self.conn, query, part):
                key = tuple(sorted(s.labels.items()))
                labels[key] = dict(s.labels)
                samples.setdefault(key, {}).update(s.samples)
        return [Series(labels[k], tuple(sorted(v.items()))) for k, v in samples.items()]

    def allocated(self, window: Window) -> list[Series]:
        return self._run(window, "allocated")

    def charged(self, window: Window) -> list[Series]:
        return self._run(window, "charged")

    def peak(self, window: Window) -> list[Series]:
        return self._run(window, "peak")

    def used(self, window: Window) -> list[Series]:
        return self._run(window, "used")

    def devices(self, window: Window) -> list[Series]:
        return self._run(window, "devices")

    def capacity(self, window: Window) -> list[Series]:
        return self._run(window, "capacity")

    def nodes(self, window: Window) -> list[Series]:
        return self._run(window, "nodes")

    def outside_pools(self, window: Window) -> list[Series]:
        return self._run(window, "outside_pools")

    def unweighed(self, window: Window) -> list[Series]:
        return self._run(window, "unweighed")

    def unknown_profiles(self, window: Window) -> list[Series]:
        return self._run(window, "unknown_profiles")

    def coverage(self, window: Window) -> list[Series]:
        return self._run(window, "coverage")


METHODS = (
    "allocated",
    "charged",
    "peak",
    "used",
    "devices",
    "capacity",
    "nodes",
    "outside_pools",
    "unweighed",
    "unknown_profiles",
    "coverage",
)
