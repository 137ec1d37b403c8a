"""One run reports every error: a capacity overrun is found even when something else is also wrong."""

from __future__ import annotations

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster:
  name: c1
  colour: blue
nodePools:
  - name: p1
    gpu: H100-80GB
    gpusPerNode: 8
    nodes: [n1]
tiers:
  - {name: std, priority: 10}
tenants:
  - {name: a, tier: std, owners: [g], gpus: {nvidia.com/gpu: 6}}
  - {name: b, tier: std, owners: [g], gpus: {nvidia.com/gpu: 6}}
"""


def test_capacity_is_checked_alongside_an_unrelated_schema_error(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    result = validate_file(path)
    messages = [(d.location.line, d.location.column, d.message) for d in result.report.errors]
    assert any(
        line == 5 and col == 3 and "unknown key; valid keys here: draDriver, gpuOperator, migStrategy, name" in msg
        for line, col, msg in messages
    ), messages
    assert any("granted 12 nvidia.com/gpu" in msg and "supply 8" in msg for _, _, msg in messages), messages
    assert result.spec is None


def test_an_internal_error_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    import gpupool.rules.engine as v

    def boom(*_a, **_k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(v, "validate_file", boom)
    monkeypatch.delenv("GPUPOOL_DEBUG", raising=False)
    (tmp_path / "x.yaml").write_text("{}\n")  # exists: a missing spec is a usage error (exit 2), not this
    assert main(["validate", str(tmp_path / "x.yaml")]) == 70
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: simulated bug" in err and "Traceback" not in err


def test_validation_pauses_the_collector_and_restores_it(tmp_path):
    import gc

    import gpupool.rules.engine as v

    seen = []
    real = v.load_spec
    v.load_spec = lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1]
    try:
        path = tmp_path / "spec.yaml"
        path.write_text(SPEC)
        assert gc.isenabled()
        v.validate_file(path)
        assert seen == [False] and gc.isenabled()
        gc.disable()  # a caller that paused it itself keeps it paused
        v.validate_file(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
        v.load_spec = real
