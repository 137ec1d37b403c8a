"""Alert durations are checked with Prometheus' own grammar and range (issue 34 item 4): `30m2h` or `300000y`
validated before, then Prometheus refused the rule file and with it every gpupool rule.

The grammar is prometheus/common model/time.go ParseDuration (commit d2417e2, lines 183-253): units y, w, d, h,
m, s, ms at most once each and biggest first (lines 238-240), "0" the only number without a unit (line 201),
the total at most 2^63-1 ns, else "duration out of range" (lines 243-249). Expected values below are worked
out from those lines, not from gpupool's code."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from gpupool.model import platform as m
from gpupool.monitoring import rules as monitoring_rules
from gpupool.rules import monitoring as rule_module
from gpupool.rules.engine import load_valid_spec, validate_file
from gpupool.spec import schema
from tests.test_validate_rules import BASE

MAX_NS = 2**63 - 1
DAY_NS = 24 * 3600 * 10**9
# 2^63-1 ns is 106751 days 23:47:16.854775807: the last whole millisecond fits, the next does not.
LAST_FITTING = "106751d23h47m16s854ms"
FIRST_OVER = "106751d23h47m16s855ms"
ACCEPTED = ["0", "0s", "30m", "1h30m", "1d12h", "2w3d", "1m5ms", "01h", "292y", LAST_FITTING]
REFUSED = ["30m2h", "300000y", "293y", "1h1h", "1h30m1h", "5", "00", "1d1w", "99999999999999999999999h", FIRST_OVER]


def test_the_edges_are_worked_out_right():
    assert 106751 * DAY_NS + (23 * 3600 + 47 * 60 + 16) * 10**9 + 854 * 10**6 <= MAX_NS
    assert 106751 * DAY_NS + (23 * 3600 + 47 * 60 + 16) * 10**9 + 855 * 10**6 > MAX_NS
    assert 292 * 365 * DAY_NS <= MAX_NS < 293 * 365 * DAY_NS


def _validate(tmp_path, alerts: dict):
    spec = copy.deepcopy(BASE)
    spec["monitoring"] = {"enabled": True, "alerts": alerts}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path, validate_file(path, cwd=tmp_path)


@pytest.mark.parametrize("text", ACCEPTED)
def test_what_prometheus_accepts_validates_and_is_rendered_as_written(tmp_path, text):
    path, report = _validate(tmp_path, {"pendingFor": text, "idleFor": text, "migStuckFor": text})
    assert report.ok, [d.render() for d in report.report.diagnostics]
    alerts = {r["alert"]: r for g in monitoring_rules.groups(load_valid_spec(path)) for r in g["rules"] if "alert" in r}
    assert alerts["GpuPodsPending"]["for"] == text and alerts["GpuAllocatedButIdle"]["for"] == text


@pytest.mark.parametrize("field", ["idleFor", "pendingFor", "migStuckFor"])
@pytest.mark.parametrize("text", REFUSED)
def test_what_prometheus_refuses_is_gp163_at_the_field_without_the_value(tmp_path, field, text):
    path, report = _validate(tmp_path, {field: text})
    assert not report.ok
    [d] = report.report.errors
    # The schema's pattern refuses what is not number-unit pairs at all (GP010); GP163 the order and the range.
    assert d.rule == ("GP010" if text in ("5", "00") else "GP163") and d.path == f"monitoring.alerts.{field}"
    line = path.read_text().splitlines()[d.location.line - 1]
    assert line.strip().startswith(f"{field}:")
    assert text not in d.message and "Prometheus" in d.message
    if text in ("300000y", "293y", FIRST_OVER, "99999999999999999999999h"):
        assert "out of range" in d.message


def test_every_duration_field_of_the_schema_is_checked():
    """Whatever the schema types as $defs/duration is handed to Prometheus: the rule must know it."""
    found: list[tuple[str, ...]] = []

    def walk(node, path):
        if isinstance(node, dict):
            if node.get("$ref") == "#/$defs/duration":
                found.append(path)
            for k, v in node.items():
                walk(v, path + (k,))

    walk(schema.schema(), ())
    fields = {p[-1] for p in found}
    assert fields and fields == {p[-1] for p in rule_module.DURATIONS}
    assert json.dumps(schema.schema()).count('"#/$defs/duration"') == len(rule_module.DURATIONS)


def test_the_model_defaults_are_durations_prometheus_accepts():
    from gpupool.monitoring.duration import parse_ms

    defaults = [v for v in vars(m.Alerts()).values() if isinstance(v, str)]
    assert len(defaults) == len(rule_module.DURATIONS)
    for text in defaults:
        parse_ms(text)
