"""Strings stay strings in render output, as kubectl's own YAML reader (Go, sigs.k8s.io/yaml) reads them.

PyYAML quotes only what its YAML 1.1 resolver would misread; Go's readers also take `0815` and `12e3` for
floats and `y`/`n` for booleans, so a cost centre `0815` or a config hash of digits, `e` and digits broke
`kubectl create` ("cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type
string"). `kubectl annotate --local -f - -o json` decodes the YAML exactly as `kubectl create/apply` do,
without a cluster (builtin kinds into their Go types, others as unstructured JSON), so these tests run
the real reader on every string.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.k8s import manifests, yaml_dump
from gpupool.k8s.delivery import MODES, VALUES_FILE
from gpupool.k8s.render import render_documents
from gpupool.rules.engine import load_valid_spec
from tests.e2e.cluster import _find_kubectl

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = _find_kubectl()


def kubectl_reads(text: str) -> list[dict]:
    """The objects of the YAML stream TEXT as kubectl decodes them (plus the probe annotation it adds)."""
    proc = subprocess.run(
        [KUBECTL, "annotate", "--local", "-f", "-", "gpupool.dev/probe=1", "-o", "json"],
        input=text,
        capture_output=True,
        text=True,
        env={"KUBECONFIG": "/dev/null", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    items, at, decoder = [], 0, json.JSONDecoder()
    text_out = proc.stdout.strip()
    while at < len(text_out):  # one JSON object per input object, back to back
        item, at = decoder.raw_decode(text_out, at)
        items.append(item)
        at = len(text_out) - len(text_out[at:].lstrip())
    for item in items:
        item["metadata"]["annotations"].pop("gpupool.dev/probe")
        if not item["metadata"]["annotations"]:
            del item["metadata"]["annotations"]
        if not item["metadata"]:  # the Kustomization has none; the probe made one
            del item["metadata"]
    return items


def test_kubectl_is_the_real_reader():
    assert shutil.which(KUBECTL) or Path(KUBECTL).exists(), KUBECTL
    # The reader misreads exactly what this module is about (so the tests below can fail):
    proc = subprocess.run(
        [KUBECTL, "annotate", "--local", "-f", "-", "a=b", "-o", "json"],
        input="apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {cost: 0815}}\n",
        capture_output=True,
        text=True,
        env={"KUBECONFIG": "/dev/null", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode != 0 and "cannot unmarshal number" in proc.stderr, proc.stderr


# Strings near numbers, booleans and null: digits, exponents, signs, dots, base prefixes, sexagesimal colons,
# the boolean/null words of YAML 1.1, and 16-character hashes of digits and `e` (content_hash's shape).
_NEAR = st.text(alphabet="0123456789eE.+-_:xXoObB~", min_size=0, max_size=10)
_WORDS = st.sampled_from(sorted(yaml_dump._NON_STRING_WORDS) + ["Yes", "NO", "True", "NULL", "Off", "Y", ".Inf"])
_HASH = st.text(alphabet="0123456789e", min_size=16, max_size=16)
_VALUE = st.one_of(_NEAR, _WORDS, _HASH, st.from_regex(r"\A[0-9]{1,6}[eE][0-9]{1,8}\Z"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_VALUE, min_size=1, max_size=40))
def test_every_string_reads_back_as_the_same_string(values):
    """Label values, ConfigMap data and operand env values, each read by PyYAML (YAML 1.1) and by kubectl."""
    keyed = {f"k{i}": v for i, v in enumerate(values)}
    docs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "labels": keyed}, "data": keyed},
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "probe"},
            "spec": {"devicePlugin": {"env": [{"name": k, "value": v} for k, v in keyed.items()]}},
        },
    ]
    text = "".join("---\n" + manifests.dump_yaml(d) for d in docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert kubectl_reads(text) == docs


def _stack_with_cost_center(tmp_path: Path, cost_center: str) -> Path:
    copy = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks" / "dev", copy)
    tenant = copy / "tenants" / "research.yaml"
    data = yaml.safe_load(tenant.read_text())
    data["costCenter"] = cost_center
    tenant.write_text(yaml.safe_dump(data))
    return copy / "spec.yaml"


@pytest.mark.parametrize("stack", ["dev", "prod", "dev-costCenter-0815"])
@pytest.mark.parametrize("mode", MODES)
def test_every_rendered_file_reads_the_same_in_kubectl(stack, mode, tmp_path):
    """What kubectl decodes from each rendered file is what gpupool meant (yaml.safe_load of the same text)."""
    if stack == "dev-costCenter-0815":
        spec = load_valid_spec(_stack_with_cost_center(tmp_path, "0815"))
    else:
        spec = load_valid_spec(ROOT / "stacks" / stack / "spec.yaml")
    documents = render_documents(manifests.build(spec), mode)
    objects = {n: t for n, t in documents.items() if n != VALUES_FILE}
    if VALUES_FILE in documents:  # helm reads it with the same Go reader; as an unstructured object here
        objects[VALUES_FILE] = (
            "apiVersion: gpupool.dev/v1\nkind: Values\nmetadata: {name: v}\n" + documents[VALUES_FILE]
        )
    text = "".join("---\n" + t for t in objects.values())
    assert kubectl_reads(text) == [yaml.safe_load(t) for t in objects.values()]
    if stack.endswith("0815"):
        assert "gpupool.dev/cost-center: '0815'" in text
