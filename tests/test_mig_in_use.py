"""Old MIG config names stay in the MIG ConfigMap while nodes carry them (gpupool.k8s.mig_in_use), outside the
config hash: keeping them and dropping them later restarts no MIG Manager.
tests/e2e/test_mig_rollout.py runs the same against the API server and the MIG Manager simulator."""

from __future__ import annotations

import pytest
import yaml

from gpupool.cli.main import main as cli_main
from gpupool.k8s import manifests, mig_in_use
from tests.test_rollout import _spec

OLD, NEW = "a100-80gb-all-balanced", "a100-80gb-all-1g.10gb"
OLD_ENTRIES = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]


def _node(name: str, config: str | None) -> dict:
    labels = {"kubernetes.io/hostname": name, **({mig_in_use.LABEL_MIG_CONFIG: config} if config else {})}
    return {"metadata": {"name": name, "labels": labels}}


def _config_map(configs: dict) -> dict:
    return {"data": {"config.yaml": manifests.dump_yaml({"version": "v1", "mig-configs": configs})}}


def test_only_names_a_node_carries_that_the_spec_dropped_and_the_live_configmap_holds_are_kept():
    wanted, _ = manifests.mig_configs(_spec("all-1g.10gb"))
    live = {OLD: OLD_ENTRIES, "gone-unused": OLD_ENTRIES, "all-1g.10gb": wanted["all-1g.10gb"]}
    in_use = mig_in_use.names_in_use(
        [_node("a", OLD), _node("b", NEW), _node("c", "all-1g.10gb"), _node("d", "not-in-live"), _node("e", None)]
    )
    assert in_use == {OLD, NEW, "all-1g.10gb", "not-in-live"}
    # The preset is in the spec's configs already; the unused name goes; a name the live ConfigMap lacks was
    # never there to keep.
    assert mig_in_use.kept(in_use, live, wanted) == {OLD: OLD_ENTRIES}


def test_kept_configs_are_written_but_leave_every_hash_and_step_as_without_them():
    spec = _spec("all-1g.10gb")
    plain, keeping = manifests.build(spec), manifests.build(spec, {OLD: OLD_ENTRIES})
    cm = {o.name: o for o in keeping.objects}["mig-config"].manifest
    configs = yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]
    assert configs[OLD] == OLD_ENTRIES and NEW in configs
    assert cm["metadata"]["annotations"] == {manifests.ANNOTATION_KEPT: OLD}
    assert keeping.mig_configs[OLD] == OLD_ENTRIES
    # The operator's env hash (the MIG Manager roll) and every other object are the same.
    assert keeping.chart.values == plain.chart.values
    for a, b in zip(plain.objects, keeping.objects, strict=True):
        if a.name != "mig-config":
            assert a == b, a.name
    plain_cm = {o.name: o for o in plain.objects}["mig-config"].manifest
    assert "annotations" not in plain_cm["metadata"] and OLD not in plain_cm["data"]["config.yaml"]


def test_a_kept_name_the_spec_uses_again_is_the_specs():
    spec = _spec("all-balanced")
    built = manifests.build(spec, {OLD: [{"devices": "all", "mig-enabled": False}]})
    assert built.mig_configs[OLD] == manifests.mig_configs(spec)[0][OLD]
    assert "annotations" not in {o.name: o for o in built.objects}["mig-config"].manifest["metadata"]


class FakeApi:
    """The two calls read_kept makes, answered as the API server does (a 404 Status, paged lists)."""

    def __init__(self, config_map: dict | None, pages: list[list[dict]], node_status: int = 200):
        self.config_map, self.pages, self.node_status = config_map, pages, node_status
        self.paths: list[str] = []

    def __call__(self, method: str, path: str, body=None):
        self.paths.append(path)
        if "/configmaps/" in path:
            return (200, self.config_map) if self.config_map else (404, {"kind": "Status", "code": 404})
        if self.node_status != 200:
            return self.node_status, {"kind": "Status", "code": self.node_status}
        page = int(path.split("continue=")[1]) if "continue=" in path else 0
        more = {"continue": str(page + 1)} if page + 1 < len(self.pages) else {}
        return 200, {"items": self.pages[page], "metadata": more}


def test_the_cluster_read_follows_every_page_and_selects_labelled_nodes_only():
    wanted, _ = manifests.mig_configs(_spec("all-1g.10gb"))
    api = FakeApi(_config_map({OLD: OLD_ENTRIES, **wanted}), [[_node("a", NEW)], [_node("b", OLD)]])
    assert mig_in_use.read_kept(api, "gpu-operator", manifests.MIG_CONFIGMAP, wanted) == {OLD: OLD_ENTRIES}
    assert api.paths[0] == "/api/v1/namespaces/gpu-operator/configmaps/gpupool-mig-config"
    assert all("labelSelector=nvidia.com%2Fmig.config" in p for p in api.paths[1:]) and len(api.paths) == 3


def test_the_convergence_check_counts_the_configs_the_live_configmap_says_it_keeps():
    """Right after the up that finished a re-layout, no node carries OLD, but that up wrote it (and said so in the
    annotation): the convergence check (as_written) keeps it, so it plans nothing; a plain read drops it."""
    wanted, _ = manifests.mig_configs(_spec("all-1g.10gb"))
    live = _config_map({OLD: OLD_ENTRIES, "unlisted": OLD_ENTRIES, **wanted})
    live["metadata"] = {"annotations": {manifests.ANNOTATION_KEPT: OLD}}
    api = FakeApi(live, [[_node("a", NEW)]])
    assert mig_in_use.read_kept(api, "ns", "cm", wanted) == {}
    assert mig_in_use.read_kept(api, "ns", "cm", wanted, as_written=True) == {OLD: OLD_ENTRIES}
    assert mig_in_use.ANNOTATION_KEPT == manifests.ANNOTATION_KEPT


def test_no_configmap_yet_keeps_nothing_and_a_denied_list_is_an_error():
    wanted, _ = manifests.mig_configs(_spec("all-1g.10gb"))
    assert mig_in_use.read_kept(FakeApi(None, [[_node("a", OLD)]]), "ns", "cm", wanted) == {}
    denied = FakeApi(_config_map({OLD: OLD_ENTRIES}), [[]], node_status=403)
    with pytest.raises(mig_in_use.LiveReadError, match="HTTP 403"):
        mig_in_use.read_kept(denied, "ns", "cm", wanted)
    with pytest.raises(mig_in_use.LiveReadError, match="not YAML"):
        mig_in_use.live_configs({"data": {"config.yaml": "a: [b"}})


def test_render_context_needs_kubeconfig_and_an_unreachable_cluster_renders_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli_main(["render", "stacks/dev/spec.yaml", "--output-dir", str(out), "--context", "x"]) == 2
    kubeconfig = _unreachable(tmp_path)
    code = cli_main(["render", "stacks/dev/spec.yaml", "--output-dir", str(out), "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert code == 1 and "cannot read which MIG configs" in err and "nothing was changed" in err, err
    assert not out.exists()


def _unreachable(tmp_path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c"}}],
                "current-context": "c",
                "users": [],
            }
        )
    )
    return str(path)


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_unreadable_cluster_warns_in_a_preview_and_stops_an_update(tmp_path, monkeypatch, dry_run):
    import pulumi

    from components import live_mig_configs

    warnings: list[str] = []
    monkeypatch.setattr(live_mig_configs, "_under_mocks", lambda: False)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
    spec = _spec("all-1g.10gb")
    if dry_run:
        assert live_mig_configs.kept(spec, (_unreachable(tmp_path), None)) == {}
        assert len(warnings) == 1 and "preview shows the spec's MIG configs only" in warnings[0], warnings
    else:
        with pytest.raises(pulumi.RunError, match="nothing was registered.*keepMigConfigsInUse"):
            live_mig_configs.kept(spec, (_unreachable(tmp_path), None))
    # A kubeconfig only known as an Output cannot be read before registration: said, and nothing kept.
    warnings.clear()
    assert live_mig_configs.kept(spec, (pulumi.Output.from_input("x"), None)) == {}
    assert "is an Output" in warnings[0]
