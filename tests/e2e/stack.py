"""One gpupool stack driven through the real Pulumi engine (Automation API) with a local file backend.

The program is gpupool's own (components.program.main) run inline, so no language-host plugin is
needed; the engine, the kubernetes provider and every step it takes are the real ones.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from pulumi import automation as auto

PROVIDER_VERSION_FILE = Path(__file__).resolve().parents[2] / "toolchain" / "versions.env"


def _provider_version() -> str:
    for line in PROVIDER_VERSION_FILE.read_text().splitlines():
        if line.startswith("PULUMI_K8S_PROVIDER_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("PULUMI_K8S_PROVIDER_VERSION missing from toolchain/versions.env")


def _program():
    from components.program import main

    main()


class E2EStack:
    def __init__(
        self, bin_dir: Path, kubeconfig: Path, work: Path, *, spec: Path, chart: Path, stack_name: str = "dev"
    ):
        self.work = work
        self._tmp = Path(tempfile.mkdtemp(prefix="gpupool-pulumi-"))
        home = self._tmp / "home"
        plugin = home / "plugins" / f"resource-kubernetes-v{_provider_version()}"
        plugin.mkdir(parents=True)
        os.symlink(bin_dir / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
        state = self._tmp / "state"
        state.mkdir()
        env = {
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": "e2e",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_HOME": str(home),
            "KUBECONFIG": str(kubeconfig),
        }
        os.environ.update({k: v for k, v in env.items() if k != "KUBECONFIG"})
        command = auto.PulumiCommand(root=str(bin_dir.parent), skip_version_check=True)
        self.stack = auto.create_or_select_stack(
            stack_name,
            project_name="gpupool",
            program=_program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(self._tmp),
                pulumi_home=str(home),
                env_vars=env,
                pulumi_command=command,
                secrets_provider="passphrase",
                project_settings=auto.ProjectSettings(
                    name="gpupool", runtime="python", backend=auto.ProjectBackend(url=f"file://{state}")
                ),
            ),
        )
        self.stack.set_all_config(
            {
                "gpupool:spec": auto.ConfigValue(str(spec)),
                "gpupool:kubeconfig": auto.ConfigValue(str(kubeconfig)),
                "gpupool:operatorChartPath": auto.ConfigValue(str(chart)),
                "gpupool:skipAwait": auto.ConfigValue("true"),
            }
        )

    def up(self) -> auto.UpResult:
        return self.stack.up(on_output=lambda _: None, color="never")

    def preview_ops(self) -> dict[str, str]:
        """urn -> operation (same, create, update, replace, delete, ...) of every step the preview plans."""
        ops: dict[str, str] = {}

        def on_event(event: auto.EngineEvent) -> None:
            pre = event.resource_pre_event
            if pre is not None and pre.metadata.urn and "pulumi:pulumi:Stack" not in pre.metadata.type:
                op = pre.metadata.op
                ops[pre.metadata.urn] = op.value if hasattr(op, "value") else str(op)

        self.stack.preview(on_event=on_event, on_output=lambda _: None, color="never")
        return ops

    def preview_diff_text(self) -> str:
        """What a reviewer reads: the output of `pulumi preview --diff`."""
        return self.stack.preview(diff=True, color="never", on_output=lambda _: None).stdout

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.work / relative
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new, 1))

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)
