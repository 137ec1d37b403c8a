"""Property tests: whatever the input, the validator returns located diagnostics and never raises.

(a) arbitrary YAML documents (built from recursive strategies and dumped with yaml.safe_dump) and arbitrary
    raw text/bytes; (b) the dev stack (spec plus tenants, as one inline spec) after random mutations:
    deleting a key, replacing a value with one of another type, inserting an unknown key, duplicating a list
    item, changing a number. Every diagnostic must name a file, a line >= 1 and a column >= 1 and have a
    message; the CLI must exit 0 or 1.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file

REPO = Path(__file__).resolve().parent.parent
SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        [
            "gpupool.dev/v1alpha1",
            "GpuPlatform",
            "nvidia.com/gpu",
            "nvidia.com/gpu.shared",
            "A100-80GB",
            "all-balanced",
            "1g.10gb",
            "500m",
            "16Gi",
            "dedicated",
            "mixed",
            "none",
            "tenants/",
            "*.yaml",
        ]
    ),
)
KEYS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "apiVersion",
            "kind",
            "cluster",
            "name",
            "nodePools",
            "tiers",
            "tenants",
            "tenantFiles",
            "gpu",
            "gpusPerNode",
            "nodes",
            "sharing",
            "mig",
            "layout",
            "preset",
            "perGpu",
            "timeSlicing",
            "mps",
            "replicas",
            "gpus",
            "tier",
            "oversubscription",
            "maxRatio",
            "perResource",
            "nodeSelector",
            "nodeCount",
            "containerDefaults",
        ]
    ),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(KEYS, children, max_size=6)),
    max_leaves=40,
)


def _check(path: Path) -> None:
    result = validate_file(path, cwd=path.parent)
    for d in result.report.sorted():
        assert d.location.file and d.location.line >= 1 and d.location.column >= 1, d
        assert d.message.strip(), d
        assert d.severity in ("error", "warning")
    assert (result.spec is None) == bool(result.report.errors)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["validate", str(path)])
    assert status in (0, 1)
    assert "Traceback" not in out.getvalue() + err.getvalue()


def _write(tmp_path_factory, content: bytes | str) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


@SETTINGS
@given(doc=documents)
def test_arbitrary_yaml_documents(tmp_path_factory, doc):
    _check(_write(tmp_path_factory, yaml.safe_dump(doc, allow_unicode=True)))


@SETTINGS
@given(text=st.text(alphabet=st.sampled_from(list("abc:-[]{}&*!|>'\"#%@`,?\n\t 0123456789.~")), max_size=200))
def test_arbitrary_yaml_like_text(tmp_path_factory, text):
    _check(_write(tmp_path_factory, text))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(tmp_path_factory, data):
    _check(_write(tmp_path_factory, data))


def _dev_stack() -> dict:
    spec = yaml.safe_load((REPO / "stacks/dev/spec.yaml").read_text())
    spec.pop("tenantFiles")
    spec["tenants"] = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "stacks/dev/tenants").glob("*.yaml"))]
    return spec


DEV = _dev_stack()


def _containers(node, out):
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


@st.composite
def mutated_specs(draw):
    spec = copy.deepcopy(DEV)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        nodes = _containers(spec, [])
        node = nodes[draw(st.integers(min_value=0, max_value=len(nodes) - 1))]
        op = draw(st.sampled_from(["delete", "retype", "unknown", "duplicate", "number"]))
        if isinstance(node, dict):
            if not node:
                continue
            key = draw(st.sampled_from(sorted(node)))
            if op == "delete":
                del node[key]
            elif op == "unknown":
                node[draw(KEYS) or "x"] = draw(scalars)
            elif op == "number":
                node[key] = draw(st.one_of(st.integers(-5, 100), st.floats(-1, 100, allow_nan=False)))
            elif op == "duplicate" and isinstance(node[key], list) and node[key]:
                node[key].append(copy.deepcopy(node[key][0]))
            else:
                node[key] = draw(documents)
        elif node:
            i = draw(st.integers(min_value=0, max_value=len(node) - 1))
            if op == "delete":
                del node[i]
            elif op == "duplicate":
                node.append(copy.deepcopy(node[i]))
            elif op == "number":
                node[i] = draw(st.integers(-5, 100))
            else:
                node[i] = draw(documents)
    return spec


@SETTINGS
@given(spec=mutated_specs())
def test_mutated_dev_stack(tmp_path_factory, spec):
    _check(_write(tmp_path_factory, yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)))


def test_dev_stack_as_inline_spec_is_valid(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(DEV, sort_keys=False))
    result = validate_file(path, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
