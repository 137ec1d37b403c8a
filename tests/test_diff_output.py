"""gpupool diff output contracts: --exit-code, -o/--format, camelCase JSON, unified config diffs, slice maps."""

from __future__ import annotations

import json
import re

from tests.test_diff import POOLS, TENANTS, base, run, stack, with_tenants  # noqa: F401 (base: fixture)


def test_exit_code_convention(base, tmp_path, capsys):
    same = stack(tmp_path / "same")
    assert run(capsys, base, same, "--exit-code")[0] == 0  # no changes
    changed = stack(tmp_path / "changed", tenants=with_tenants(notebooks=None))
    assert run(capsys, base, changed)[0] == 0  # without --exit-code, changes are fine
    assert run(capsys, base, changed, "--exit-code")[0] == 3  # valid with changes
    bad = stack(tmp_path / "bad", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="x")))
    assert run(capsys, base, bad, "--exit-code")[0] == 1  # invalid beats changes
    assert run(capsys, base, tmp_path / "nope.yaml", "--exit-code")[0] == 2  # usage


def test_output_flag_and_hidden_format_alias(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    a = run(capsys, base, head, "-o", "json")[1]
    b = run(capsys, base, head, "--output", "json")[1]
    c = run(capsys, base, head, "--format", "json")[1]
    assert a == b == c and json.loads(a)["schemaVersion"] == 3
    import contextlib
    import io

    from gpupool.cli.main import build_parser

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            build_parser().parse_args(["diff", "--help"])
        except SystemExit:
            pass
    assert "-o FORMAT, --output FORMAT" in buf.getvalue() and "--format" not in buf.getvalue()


def _keys(value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


def test_json_keys_are_camel_case(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    head = stack(
        tmp_path / "head",
        pools=pools,
        tenants=with_tenants(
            notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}),
            inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-1g.10gb": 20}),
        ),
    )
    doc = json.loads(run(capsys, base, head, "-o", "json")[1])
    # every key gpupool chose is camelCase; the only others are data (resource names, labels) under known maps
    ours = {k for k in _keys(doc, set()) if "_" in k}
    assert ours == set(), ours
    assert doc["mig"][0]["groupsAfter"] == [{"gpus": [0, 1, 2, 3], "layout": {"3g.40gb": 2}}]
    assert doc["summary"]["poolsRelaidOut"] == 1
    assert {"severity", "rule", "file", "line", "column", "path", "message"} <= set(
        (
            doc["head"]["diagnostics"]
            or [{"severity": 0, "rule": 0, "file": 0, "line": 0, "column": 0, "path": 0, "message": 0}]
        )[0]
    )


def test_time_slicing_edit_is_a_unified_diff(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], sharing={"timeSlicing": {"replicas": 5}})
    head = stack(tmp_path / "head", pools=pools)
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "pool l4-shared: device-plugin config l4-shared → l4-shared" in out
    block = out.split("pool l4-shared: device-plugin config")[1]
    assert re.search(r"^\s+-\s+replicas: 4$", block, re.M) and re.search(r"^\s+\+\s+replicas: 5$", block, re.M)
    assert "--- BASE gpupool-device-plugin-config: l4-shared" in block
    code, md, _ = run(capsys, base, head, "-o", "markdown")
    diff = md.split("```diff\n")[1].split("```")[0]
    assert re.search(r"^-\s+replicas: 4$", diff, re.M) and re.search(r"^\+\s+replicas: 5$", diff, re.M)
    assert "a100-mig" not in md.split("Config changes")[1].split("</details>")[0]  # unchanged pools: no diff


def test_mig_change_has_slice_maps_and_mig_parted_diff(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(
        pools[1],
        sharing={
            "mig": {"perGpu": [{"gpus": [0, 1], "layout": {"3g.40gb": 2}}, {"gpus": [2, 3], "preset": "all-balanced"}]}
        },
    )
    head = stack(
        tmp_path / "head",
        pools=pools,
        tenants=with_tenants(
            notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8, "nvidia.com/mig-1g.10gb": 4}),
            inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 6, "nvidia.com/mig-1g.10gb": 20}),
        ),
    )
    code, out, err = run(capsys, base, head)
    assert code == 0, err
    maps = out.split("MIG slices, pool a100-mig")[1].split("\n\n")[0]
    assert "before: A100-80GB GPU 0,1,2,3" in maps
    assert "after: A100-80GB GPU 0,1" in maps and "after: A100-80GB GPU 2,3" in maps
    after01 = maps.split("after: A100-80GB GPU 0,1")[1].splitlines()[2]
    assert after01.count("3g.40gb") == 2 and "1g.10gb" not in after01
    assert "MIG Manager config a100-80gb-all-balanced →" in out
    assert "h100-sel" not in out.split("MIG slices")[1]


def test_preview_file_is_a_collapsed_section_and_is_cut_to_fit(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    preview = tmp_path / "preview.txt"
    preview.write_text(
        "".join(f"    ~ kubernetes:core/v1:ConfigMap cm-{i} update [diff: ~data]\n" for i in range(5000))
        + "```\n<details>@everyone\n"
    )
    code, md, _ = run(capsys, base, head, "-o", "markdown", "--preview-file", preview)
    assert code == 0 and len(md) < 65_536
    section = md.split("<details><summary>pulumi preview --diff</summary>")[1].split("</details>")[0]
    assert section.lstrip().startswith("````diff")  # a fence longer than any in the preview
    assert "cm-0 update" in section and "cm-4999" not in section
    assert re.search(r"✂ [\d,]+ more preview lines cut", section)
    assert "Cut to fit GitHub's" in md
    assert run(capsys, base, head, "--preview-file", tmp_path / "missing.txt")[0] == 2


def _specs_with_config_changes(tmp_path):
    from gpupool.rules.engine import validate_file

    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], sharing={"timeSlicing": {"replicas": 3}})
    pools[1] = dict(pools[1], sharing={"mig": {"perGpu": [{"gpus": [0, 1], "layout": {"3g.40gb": 2}}]}})
    paths = [stack(tmp_path / "fixture"), stack(tmp_path / "changed", pools=pools), "stacks/dev/spec.yaml"]
    paths.append("stacks/prod/spec.yaml")
    out = []
    for p in paths:
        result = validate_file(p)
        assert result.ok and result.spec is not None, p
        out.append(result.spec)
    return out


def test_config_facts_come_from_the_build_not_from_parsing_its_yaml(tmp_path, capsys):
    """Issue 20, item 6: the diff reads the MIG Manager entries and the device-plugin sharing from the data
    manifests.build dumps the two ConfigMaps from. Proven the same as parsing the rendered ConfigMaps back
    (what the diff did before), on the dev and prod stacks and on MIG/time-slicing variants of the fixture."""
    import yaml

    from gpupool.analysis.diff import configs as dm
    from gpupool.k8s import manifests

    specs = _specs_with_config_changes(tmp_path)
    for spec in specs:
        built = manifests.build(spec)
        by_name = {o.name: o.manifest for o in built.objects}
        parsed_mig = yaml.safe_load(by_name["mig-config"]["data"]["config.yaml"])["mig-configs"]
        assert built.mig_configs == parsed_mig
        data = by_name["device-plugin-config"]["data"]
        assert {k: yaml.safe_load(v) for k, v in data.items()} == built.plugin_configs
        assert dm._plugin_entries_text(built) == data  # the unified diffs compare the ConfigMap's own text
        assert dm._mig_entries_text(built) == {n: manifests.dump_yaml({n: e}) for n, e in parsed_mig.items()}
    # and the diff of two of them: device-plugin summaries as the parsed text gives them
    changes, _ = dm.plugin_changes(manifests.build(specs[0]), manifests.build(specs[1]))
    summary = {c.key: (c.sharing_before, c.replicas_before, c.sharing_after, c.replicas_after) for c in changes}
    assert summary == {"l4-shared": ("time-slicing", 4, "time-slicing", 3)}
    # the diff modules parse no YAML at all (gitspec reads spec files, not rendered objects)
    from pathlib import Path

    import gpupool

    root = Path(gpupool.__file__).parent
    for f in [*sorted((root / "analysis" / "diff").rglob("*.py")), *sorted((root / "present").rglob("*.py"))]:
        assert "yaml." not in f.read_text(), f
