"""The tier priority record's Pulumi dynamic provider: what lets a *preview* of a tier's priority change pass.

A PriorityClass's `value` and `preemptionPolicy` are immutable, so gpupool replaces the class when they change
(gpupool.k8s.manifests, PRIORITY_IMMUTABLE). pulumi-kubernetes previews that replacement's create with a
server-side dry-run apply under the same name, which the API server takes for an update of the live class and
refuses ("value: Forbidden: may not be changed in an update"); it retries under another name only for "field is
immutable" (pulumi-kubernetes `provider/pkg/await/await.go`, Creation, 205-228). But it skips the dry run when
an input is unknown (`provider/pkg/provider/provider.go`, Create: `skipPreview := hasComputedValue(newInputs)`).

So each class carries the annotation `gpupool.dev/tier-priority` from this resource's `revision` output. A dynamic
provider does not support previews: in a preview the engine hands back the inputs as its state
(`sdk/go/common/resource/plugin/provider_plugin.go`, Create and Update: `!protocol.supportsPreview`), and the
Python SDK resolves an output the state lacks as unknown (`pulumi/runtime/rpc.py`, `resolve_properties`). So:
- value and policy unchanged: the record is `same`, its revision known from the state, the class unchanged;
- changed: the record updates, its revision is unknown in the preview, the class's create is previewed without
  the dry run, and the preview shows the replacement; in `up` the record returns the revision first.
The revision is `priority_revision()` of the tier, the same text the render writes. Nothing here touches a cluster.
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from gpupool.k8s.manifests import PRIORITY_IMMUTABLE, priority_revision


class TierPriorityProvider(ResourceProvider):
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in PRIORITY_IMMUTABLE))

    @staticmethod
    def _outs(props: dict[str, Any]) -> dict[str, Any]:
        return {**props, "revision": priority_revision(int(props["value"]), str(props["preemptionPolicy"]))}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(str(props["tier"]), self._outs(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._outs(news))
