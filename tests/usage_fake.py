"""A UsageSource for unit tests (gpupool.analysis.usage_source): it answers each call with the series it was
given, per-step integrals as Prometheus' queries return them; a call it was given nothing for answers no
series, as a query matching nothing does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpupool.analysis.usage_source import METHODS
from gpupool.monitoring.series import Series, Window


class FakeSource:
    def __init__(self, resolution: float = 60.0, **series: Sequence[Series]):
        unknown = set(series) - set(METHODS)
        assert not unknown, f"FakeSource: no such call {unknown}"
        self.resolution = resolution
        self.series: Mapping[str, Sequence[Series]] = series
        self.calls: list[tuple[str, Window]] = []

    def _answer(self, name: str, window: Window) -> list[Series]:
        self.calls.append((name, window))
        return list(self.series.get(name, ()))

    def allocated(self, window: Window) -> list[Series]:
        return self._answer("allocated", window)

    def charged(self, window: Window) -> list[Series]:
        return self._answer("charged", window)

    def peak(self, window: Window) -> list[Series]:
        return self._answer("peak", window)

    def used(self, window: Window) -> list[Series]:
        return self._answer("used", window)

    def devices(self, window: Window) -> list[Series]:
        return self._answer("devices", window)

    def capacity(self, window: Window) -> list[Series]:
        return self._answer("capacity", window)

    def nodes(self, window: Window) -> list[Series]:
        return self._answer("nodes", window)

    def outside_pools(self, window: Window) -> list[Series]:
        return self._answer("outside_pools", window)

    def unweighed(self, window: Window) -> list[Series]:
        return self._answer("unweighed", window)

    def unknown_profiles(self, window: Window) -> list[Series]:
        return self._answer("unknown_profiles", window)

    def coverage(self, window: Window) -> list[Series]:
        return self._answer("coverage", window)
