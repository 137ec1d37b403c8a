"""A stack's inputs fingerprint: one sha256 over everything a `gpupool stacks up` of that stack writes from.

`gpupool stacks preview|up` skips a stack whose fingerprint equals the one recorded after its last successful
up (gpupool.deploy.unchanged). So the fingerprint covers what the program registers, computed here in pure
Python without reading the cluster:

- the gpupool version (the code that turns a spec into objects);
- the project's Pulumi.yaml (its config defaults) and its program's entry file;
- the stack's config as `gpupool stacks` passes it: the stack file's values (a shard's are the platform
  stack's plus `gpupool:shard`: shard_config), then this run's `-c` values (gpupool.deploy.run_config);
- the desired objects of the stack's role, from `gpupool.k8s.manifests.build(spec)`: the platform stack's
  every object outside the `tenant:<name>` components (plus the chart, its local chart's files, the mig
  steps and re-key drains), and the `tenant:<name>` objects of the tenants it holds
  (gpupool.model.sharding.held_by), each with all its options (depends_on, retain_on_delete, patch, ...);
- the stack's outputs (the platform stack's capacity figures read every tenant's grants).

What it does not cover, so only `--all` notices: the cluster itself (drift, and the MIG configs a re-layout
keeps, which gpupool.deploy.unchanged reads from the state instead), a module the program imports besides
its entry file, and which cluster an ambient $KUBECONFIG (no gpupool:kubeconfig) points at.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpupool.k8s.desired import TENANT_COMPONENT, tenant_component
from gpupool.model import platform as m
from gpupool.model import sharding

TAG = "gpupool:inputs"  # the stack tag that records the fingerprint of the last successful up
SHARD_KEY = "gpupool:shard"
CHART_KEY = "gpupool:operatorChartPath"
# A secret config value enters through a slow salted hash: the tag is readable by whoever reads the
# backend's stack list, and a plain sha256 of a short secret could be searched for.
SECRET_ROUNDS = 200_000

Config = Mapping[str, tuple[str, bool]]  # full key -> (value, secret), as the program reads it
V = TypeVar("V")


def shard_config(platform: Mapping[str, V], shard_value: V) -> dict[str, V]:
    """A shard stack's saved config: the platform stack's, with its own `gpupool:shard`."""
    config = {k: v for k, v in platform.items() if k != SHARD_KEY}
    config[SHARD_KEY] = shard_value
    return config


def run_config(saved: Config, run_values: Mapping[str, str], project: str) -> dict[str, tuple[str, bool]]:
    """The config one run gives the program: the stack file's, then the -c values as plain strings
    (gpupool.deploy.run_config.merged writes them so)."""
    from gpupool.deploy.run_config import full_key

    return {**saved, **{full_key(k, project): (v, False) for k, v in run_values.items()}}


class StackInputs:
    """The fingerprints of one spec's stacks: the spec's objects built once (a platform of 1,000 tenants has
    some 40 stacks), each stack's share picked from them."""

    def __init__(self, spec: m.Spec, project_dir: Path, version: str | None = None):
        from gpupool import version as installed

        self.spec, self.project_dir = spec, project_dir
        self.version = installed() if version is None else version
        self._project = _project_files(project_dir)
        self._built: dict[str | None, tuple[m.Spec, Any, dict[str, list[dict]]]] = {}

    def _build(self, chart_path: str | None) -> tuple[m.Spec, Any, dict[str, list[dict]]]:
        """The spec as the program sees it (its local chart), its plan and its objects by component."""
        from gpupool.k8s import manifests
        from gpupool.pulumi import platform as component  # the program's own helpers: the same spec and outputs

        if chart_path not in self._built:
            spec = component.with_chart_path(self.spec, chart_path)
            plan = manifests.build(spec)  # without the cluster's in-use MIG configs: those are state, not inputs
            parts: dict[str, list[dict]] = {}
            for o in plan.objects:
                parts.setdefault(o.component, []).append(_plain(o))
            self._built[chart_path] = (spec, plan, parts)
        return self._built[chart_path]

    def document(self, role: sharding.Role, config: Config) -> dict[str, Any]:
        """What the fingerprint of the stack of ROLE under CONFIG hashes, as plain JSON-able data (also what
        a person compares when two differ)."""
        from gpupool.pulumi import platform as component

        chart_path = config.get(CHART_KEY, ("", False))[0] or None
        spec, plan, parts = self._build(chart_path)
        held = set(sharding.held_by(role, [t.name for t in spec.tenants], spec.tenant_shards))
        tenants = [t for t in spec.tenants if t.name in held]
        mine = {tenant_component(name) for name in held}
        objects = [
            o
            for component_name, objs in parts.items()
            if component_name in mine or (role.platform and not component_name.startswith(TENANT_COMPONENT))
            for o in objs
        ]
        objects = _own_dependencies(objects, plan if role.platform else None)
        doc: dict[str, Any] = {
            "gpupool": self.version,
            "project": self._project,
            "config": {k: (_secret(k, v) if secret else v) for k, (v, secret) in sorted(config.items())},
            "role": role.name,
            "objects": sorted(objects, key=lambda o: o["name"]),
            "outputs": component.platform_outputs(spec, plan, role, tenants),
        }
        if role.platform:
            doc["chart"] = _plain(plan.chart)
            if plan.dra_chart is not None:
                doc["draChart"] = _plain(plan.dra_chart)
                local = spec.cluster.dra_driver.chart_path
                doc["draChartFiles"] = tree_digest(Path(local)) if local else None
            doc["chartFiles"] = tree_digest(self.project_dir / chart_path) if chart_path else None
            doc["migSteps"] = _plain(dict(sorted(plan.mig_steps.items())))
            doc["rekeyDrains"] = _plain(dict(sorted(plan.rekey_drains.items())))
        return doc

    def of_stack(self, role: sharding.Role, config: Config) -> str:
        """The fingerprint of the stack of ROLE under CONFIG."""
        return fingerprint(self.document(role, config))


def _own_dependencies(objects: list[dict[str, Any]], plan: Any | None) -> list[dict[str, Any]]:
    """OBJECTS with each depends_on cut to what this stack registers (plus the platform PLAN's mig steps and
    re-key drains), as components/k8s_objects.Registry wires it: a shard's quotas under queueing wait for every
    node patch (manifests.after_hardware), which only the platform stack holds, so a node added to a pool must
    not move every shard."""
    own = {o["name"] for o in objects}
    if plan is not None:
        own |= {s.name for steps in plan.mig_steps.values() for s in steps}
        own |= {d.name for drains in plan.rekey_drains.values() for d in drains}
    return [{**o, "depends_on": [d for d in o.get("depends_on") or [] if d in own]} for o in objects]


def fingerprint(doc: Mapping[str, Any]) -> str:
    """sha256 of DOC's canonical JSON (sorted keys, no whitespace), as `sha256:<hex>`."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def short(inputs: str) -> str:
    """`sha256:` and the first 12 hex digits: enough to tell two fingerprints apart in a summary line."""
    algo, _, digest = inputs.partition(":")
    return f"{algo}:{digest[:12]}"


def _plain(value: Any) -> Any:
    """Dataclasses and named tuples as dicts, tuples as lists: the JSON the hash reads."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=64)
def _secret(key: str, value: str) -> dict[str, str]:
    digest = hashlib.pbkdf2_hmac("sha256", value.encode(), f"gpupool stack inputs {key}".encode(), SECRET_ROUNDS)
    return {"secret": digest.hex()}


def _project_files(project_dir: Path) -> dict[str, str | None]:
    """sha256 of Pulumi.yaml and of the program's entry file (Pulumi.yaml `main`, else __main__.py)."""
    import yaml

    project_file = project_dir / "Pulumi.yaml"
    text = _file_digest(project_file)
    try:
        data = yaml.safe_load(project_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        data = {}
    main = project_dir / str(data.get("main") or ".") if isinstance(data, dict) else project_dir
    if main.is_dir():
        main = main / "__main__.py"
    return {"Pulumi.yaml": text, "program": _file_digest(main)}


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None  # missing or unreadable: the program run then says why


def tree_digest(root: Path) -> str | None:
    """sha256 over a local chart (a directory's files by relative path, or one .tgz): a vendored chart
    updated in place changes what the platform stack installs. Links are hashed as their targets' names."""
    if root.is_file():
        return _file_digest(root)
    h = hashlib.sha256()
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_symlink() or p.is_file()):
            rel = path.relative_to(root).as_posix()
            content = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
            h.update(f"{rel}\0{len(content)}\0".encode() + content)
    except OSError:
        return None  # unreadable: the program run then says why
    return h.hexdigest() if root.is_dir() else None
