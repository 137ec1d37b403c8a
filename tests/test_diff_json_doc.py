"""docs/reference/diff-json.md documents every key `gpupool diff -o json` emits (on a diff that fills every list)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.test_diff import POOLS, TENANTS, base, run, stack, with_tenants  # noqa: F401 (base: fixture)

DOC = Path(__file__).resolve().parent.parent / "docs" / "reference" / "diff-json.md"
DATA_MAPS = {"layout", "nodeSelector"}  # their keys are data (profile names, labels), not schema


def _keys(value, out, skip=False):
    if isinstance(value, dict):
        for k, v in value.items():
            if not skip:
                out.add(k)
            _keys(v, out, skip=k in DATA_MAPS)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


def test_every_key_is_documented(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], sharing={"timeSlicing": {"replicas": 5}})
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    head = stack(
        tmp_path / "head",
        pools=pools,
        tenants=with_tenants(
            notebooks=None,
            vision={"name": "vision", "tier": "nope", "owners": ["v"]},
            inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 8}),
        ),
    )
    doc = json.loads(run(capsys, base, head, "-o", "json")[1])
    for key in ("tenants", "headroom", "mig", "devicePlugin", "configs", "objects", "unknown"):
        assert doc[key], key  # the example fills every list, so their keys are all seen
    text = DOC.read_text()
    documented = {w for span in re.findall(r"`([^`]+)`", text) for w in re.findall(r"[A-Za-z]+", span)}
    missing = sorted(_keys(doc, set()) - documented)
    assert missing == [], f"not in docs/reference/diff-json.md: {missing}"
    assert f"`schemaVersion` is **{doc['schemaVersion']}**" in text


def test_every_queue_key_is_documented(tmp_path, capsys):
    """The same for `queues` (a diff that fills its lists: a cohort, a tier policy, quota changes)."""
    from tests.test_queueing import SMALL

    b, h = tmp_path / "b.yaml", tmp_path / "h.yaml"
    b.write_text(SMALL)
    h.write_text(
        SMALL.replace("queueing:\n", "queueing:\n  cohorts:\n    - {name: research, tenants: [train]}\n").replace(
            "inference: {lendingLimit: 0}", "inference: {lendingLimit: 1}"
        )
    )
    doc = json.loads(run(capsys, b, h, "-o", "json")[1])
    for key in ("tenants", "tiers", "cohorts"):
        assert doc["queues"][key], key
    documented = {w for span in re.findall(r"`([^`]+)`", DOC.read_text()) for w in re.findall(r"[A-Za-z]+", span)}
    assert sorted(_keys(doc, set()) - documented) == []
