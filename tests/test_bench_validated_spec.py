"""bench/bench_validated_spec.py at its smallest size, so the benchmark keeps working: it offers the validated
spec, checks that the model taken equals the one validated, and prints both sides' CPU time and their ratio."""

from __future__ import annotations

import re

from bench import bench_validated_spec


def test_the_benchmark_prints_both_sides_and_their_ratio(capsys):
    assert bench_validated_spec.main(["--tenants", "3", "--pools", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    validate = re.search(r"validate the spec\s+([0-9.]+) s", out)
    take = re.search(r"take the validated model\s+([0-9.]+) s", out)
    ratio = re.search(r"ratio take/validate\s+([0-9.]+)", out)
    assert validate and take and ratio, out
    assert float(validate.group(1)) > 0 and float(take.group(1)) > 0
    assert abs(float(ratio.group(1)) - float(take.group(1)) / float(validate.group(1))) < 0.03, out  # (printed rounded)
