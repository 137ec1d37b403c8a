"""The provider gpupool registers through carries the settings gpupool needs, exactly as users will run it.

pulumi-kubernetes 4.34.2 (what `pip install pulumi-kubernetes==4.34.2` makes the engine download) creates
with a client-side create that fails with AlreadyExists unless `upsertExistingObjects` is true
(provider/pkg/await/await.go `Creation`, pull request #4278), and replaces ConfigMaps on a data change
unless `enableConfigMapMutable` is true (provider/pkg/provider/diff.go `forceNewProperties`). Both are read
in provider.go `Configure`: the provider's own argument first, then the PULUMI_K8S_* variable.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from components import provider as gp_provider
from gpupool.rules.engine import load_valid_spec
from tests.pulumi_mocks import CollectingMocks, RecordingMonitor, run_program

ROOT = Path(__file__).resolve().parent.parent
NEEDED = {"upsertExistingObjects": "true", "enableConfigMapMutable": "true", "enableServerSideApply": "true"}


@pytest.fixture(autouse=True)
def _in_project_dir(monkeypatch):
    monkeypatch.chdir(ROOT)


def _providers(mocks: CollectingMocks) -> list:
    return [a for a in mocks.created if a.typ == "pulumi:providers:kubernetes"]


def test_the_programs_provider_carries_every_needed_setting(monkeypatch):
    """A stray PULUMI_K8S_* variable cannot switch a setting off: the argument is always explicit."""
    monkeypatch.setenv("PULUMI_K8S_UPSERT_EXISTING_OBJECTS", "false")
    monkeypatch.setenv("PULUMI_K8S_ENABLE_CONFIGMAP_MUTABLE", "false")
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    mocks, _, error = run_program({"spec": "stacks/dev/spec.yaml", "context": "ctx-a"})
    assert error is None, error
    (provider,) = _providers(mocks)
    assert NEEDED.items() <= provider.inputs.items(), provider.inputs
    assert provider.inputs["context"] == "ctx-a"


def _under_mocks(fn):
    mocks = CollectingMocks()
    pulumi.runtime.set_mocks(mocks, project="gpupool", stack="t", preview=True, monitor=RecordingMonitor(mocks))
    error: list[BaseException] = []

    @pulumi.runtime.test
    def _run():
        try:
            fn()
        except gp_provider.ProviderSettingsError as exc:
            error.append(exc)

    _run()
    return mocks, (error[0] if error else None)


def test_user_settings_are_kept_and_gpupools_merged_in():
    mocks, error = _under_mocks(
        lambda: gp_provider.kubernetes_provider("mine", namespace="apps", suppress_deprecation_warnings=True)
    )
    assert error is None
    (provider,) = _providers(mocks)
    assert provider.name == "mine"
    assert provider.inputs["namespace"] == "apps" and provider.inputs["suppressDeprecationWarnings"] == "true"
    assert NEEDED.items() <= provider.inputs.items(), provider.inputs


@pytest.mark.parametrize("key", sorted(gp_provider.REQUIRED))
def test_a_user_setting_against_gpupools_need_is_refused_by_name(key):
    _, config_key, _ = gp_provider.REQUIRED[key]
    mocks, error = _under_mocks(lambda: gp_provider.kubernetes_provider("mine", **{key: False}))
    assert isinstance(error, gp_provider.ProviderSettingsError)
    assert config_key in str(error) and "must be true" in str(error)
    assert not _providers(mocks)


def test_deploy_refuses_a_provider_gpupool_did_not_make():
    """Its settings cannot be read back from the SDK object, so a plain k8s.Provider is refused up front."""
    import pulumi_kubernetes as k8s

    from components.program import deploy

    spec = load_valid_spec("stacks/dev/spec.yaml")
    mocks, error = _under_mocks(lambda: deploy(spec, k8s.Provider("plain", enable_config_map_mutable=True)))
    assert isinstance(error, gp_provider.ProviderSettingsError)
    assert "upsertExistingObjects: true" in str(error) and "kubernetes_provider" in str(error)
    assert [a.typ for a in mocks.created] == ["pulumi:providers:kubernetes"]  # nothing of gpupool's


def test_deploy_accepts_the_merged_provider():
    from components.program import deploy

    spec = load_valid_spec("stacks/dev/spec.yaml")
    mocks, error = _under_mocks(lambda: deploy(spec, gp_provider.kubernetes_provider("mine", context="c")))
    assert error is None
    assert any(a.typ == "gpupool:tenancy:Tenant" for a in mocks.created)
