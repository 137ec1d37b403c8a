"""GP8xx: the security boundary. Tenant files come from people who are not cluster administrators.

Each rule reads the raw data (so it can point at the exact key or value) and skips whatever the schema
already rejected. The rules that guard which files are read at all (GP805, GP806) run in the loader and are
declared in gpupool.rules.input_files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpupool.model import platform as m
from gpupool.model.owners import Subject, parse_owner
from gpupool.rules.registry import Context, rule

# Namespaces Kubernetes itself owns; a tenant there would get gpupool's quotas, LimitRange, pod-security
# labels and a retained Namespace object on a system namespace.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PREFIX = "kube-"

# Label keys gpupool or Kubernetes manage. A tenant label with such a key would replace gpupool's own label
# (gpupool.dev/tenant, app.kubernetes.io/managed-by) or a label Kubernetes or its admission relies on
# (kubernetes.io/metadata.name, pod-security.kubernetes.io/enforce).
RESERVED_LABEL_DOMAINS = ("gpupool.dev", "kubernetes.io", "k8s.io")
# app.kubernetes.io/* are the recommended labels meant for users (name, part-of, ...), except this one.
RESERVED_LABEL_KEYS = ("app.kubernetes.io/managed-by",)
USER_LABEL_DOMAINS = ("app.kubernetes.io",)
LABEL_FIELDS = {"gpupool.dev/cost-center": "costCenter", "gpupool.dev/tier": "tier", "gpupool.dev/tenant": "name"}


def _tenants(ctx: Context) -> Iterator[tuple[tuple, dict]]:
    raw = ctx.data.get("tenants") if isinstance(ctx.data, dict) else None
    if not isinstance(raw, list):
        return
    for i, t in enumerate(raw):
        if isinstance(t, dict):
            yield ("tenants", i), t


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _operator_namespace(ctx: Context) -> str:
    ns = _get(ctx.data, "cluster", "gpuOperator", "namespace")
    return ns if isinstance(ns, str) else m.DEFAULT_OPERATOR_NAMESPACE


def system_namespace(name: str) -> bool:
    return name in SYSTEM_NAMESPACES or name.startswith(SYSTEM_PREFIX)


@rule("GP801", "a tenant may not take over a namespace Kubernetes or gpupool owns")
def reserved_tenant_namespace(ctx: Context) -> None:
    """A tenant's name is its namespace. gpupool puts quotas, a LimitRange, pod-security labels and a retained
    Namespace object on it, so a tenant named `kube-system`, `default` or like the GPU Operator's namespace
    would re-label and re-quota a namespace the cluster depends on. Reserved: `default`, every `kube-`
    namespace, and the namespace `cluster.gpuOperator.namespace` names (default `gpu-operator`).

    Passes:
        tenants:
          - {name: research, tier: standard}
    Fails:
        tenants:
          - {name: kube-system, tier: standard}
    """
    operator_ns = _operator_namespace(ctx)
    for path, t in _tenants(ctx):
        name = t.get("name")
        if not isinstance(name, str) or not ctx.usable(path + ("name",)):
            continue
        if system_namespace(name):
            ctx.error(
                path + ("name",),
                "is a namespace Kubernetes owns (default and every kube- "
                "namespace are reserved); a tenant's name is its namespace, so choose the team's own name",
            )
        elif name == operator_ns:
            ctx.error(
                path + ("name",),
                "is the GPU Operator's namespace (cluster.gpuOperator.namespace), "
                "which gpupool manages itself; choose another tenant name",
            )


@rule("GP802", "the GPU Operator may not be installed into a system namespace")
def operator_system_namespace(ctx: Context) -> None:
    """gpupool creates the operator's namespace with `pod-security.kubernetes.io/enforce: privileged` and
    manages it; pointing it at `kube-system` or `default` would relabel a namespace the cluster depends on
    (and make every pod in `default` privileged).

    Passes:
        cluster:
          name: dev
          gpuOperator: {namespace: gpu-operator}
    Fails:
        cluster:
          name: dev
          gpuOperator: {namespace: kube-system}
    """
    path = ("cluster", "gpuOperator", "namespace")
    ns = _operator_namespace(ctx)
    if ctx.usable(path) and system_namespace(ns):
        ctx.error(
            path,
            "is a namespace Kubernetes owns; gpupool would mark it privileged and manage it. "
            "Give the operator its own namespace, such as gpu-operator",
        )


@rule("GP803", "owners may not be Kubernetes' built-in system: identities")
def system_owner(ctx: Context) -> None:
    """Owners are bound to a role in the tenant's namespace. `system:authenticated` is every signed-in user,
    `system:unauthenticated` every anonymous request and `system:serviceaccounts` every service account: as an
    owner, any of them hands the namespace to everyone. `system:serviceaccount:NS:NAME` is a user name, not a
    group, and bound as a group it matches nobody; write `serviceaccount:NS:NAME` instead.

    Passes:
        tenants:
          - {name: research, tier: standard, owners: [research-admins, "serviceaccount:ci:deployer"]}
    Fails:
        tenants:
          - {name: research, tier: standard, owners: ["system:authenticated"]}
    """
    for path, t in _tenants(ctx):
        for j, owner in _owners(ctx, path, t):
            if owner.lower().startswith(("system:", "group:system:")):
                ctx.error(path + ("owners", j), str(parse_owner(owner)))


@rule("GP804", "owners are a group name or serviceaccount:NAMESPACE:NAME")
def owner_syntax(ctx: Context) -> None:
    """An owner is a group (`team-admins`, or `group:oidc:team` for a group name with a colon) or a service
    account written `serviceaccount:NAMESPACE:NAME`, which gpupool binds as a ServiceAccount subject. Anything
    that looks like a service account but is not written that way would be bound as a group and match nobody.

    Passes:
        tenants:
          - {name: research, tier: standard, owners: ["serviceaccount:research:deployer"]}
    Fails:
        tenants:
          - {name: research, tier: standard, owners: ["serviceaccount:deployer"]}
    """
    for path, t in _tenants(ctx):
        for j, owner in _owners(ctx, path, t):
            if owner.lower().startswith(("system:", "group:system:")):
                continue  # GP803
            subject = parse_owner(owner)
            if not isinstance(subject, Subject):
                ctx.error(path + ("owners", j), subject)


def _owners(ctx: Context, path: tuple, t: dict) -> Iterator[tuple[int, str]]:
    owners = t.get("owners")
    if not isinstance(owners, list) or not ctx.usable(path + ("owners",)):
        return
    for j, owner in enumerate(owners):
        if isinstance(owner, str):
            yield j, owner


def reserved_label(key: str) -> bool:
    if key in RESERVED_LABEL_KEYS:
        return True
    if "/" not in key:
        return False
    domain = key.split("/", 1)[0].lower()
    if any(domain == d or domain.endswith("." + d) for d in USER_LABEL_DOMAINS):
        return False
    return any(domain == d or domain.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)


@rule("GP807", "tenant labels may not use keys gpupool or Kubernetes manage")
def reserved_labels(ctx: Context) -> None:
    """Tenant `labels` go on the namespace next to gpupool's own. Keys under `gpupool.dev/` are gpupool's
    (tenant, tier, cost centre), `app.kubernetes.io/managed-by` says who manages the object, and keys under
    `kubernetes.io/` and `k8s.io/` (with their subdomains, such as `pod-security.kubernetes.io/enforce`) are
    Kubernetes'. A tenant must not set any of them; the other `app.kubernetes.io/` keys are for users.

    Passes:
        tenants:
          - {name: research, tier: standard, labels: {business-unit: research}}
    Fails:
        tenants:
          - {name: research, tier: standard, labels: {pod-security.kubernetes.io/enforce: privileged}}
    """
    for path, t in _tenants(ctx):
        labels = t.get("labels")
        if not isinstance(labels, dict) or not ctx.usable(path + ("labels",)):
            continue
        for key in labels:
            if not reserved_label(key):
                continue
            field = LABEL_FIELDS.get(key)
            fix = (
                f"; set the tenant's `{field}` instead"
                if field
                else "; use a key of your own, such as team or example.com/team"
            )
            ctx.error(
                path + ("labels", key),
                "is a label key gpupool or Kubernetes manage on the namespace "
                f"(gpupool.dev/*, app.kubernetes.io/managed-by, kubernetes.io/*, k8s.io/*){fix}",
                key=True,
            )


# Helm values gpupool derives from the spec, and the spec field that sets each.
DERIVED_VALUES: dict[tuple[str, ...], str] = {
    ("mig", "strategy"): "cluster.migStrategy",
    ("migManager", "config"): "nodePools[].sharing.mig (gpupool writes the MIG Manager's config)",
    ("devicePlugin", "config"): "nodePools[].sharing.timeSlicing or .mps (gpupool writes the device plugin's config)",
    ("driver", "enabled"): "cluster.gpuOperator.driver",
    ("toolkit", "enabled"): "cluster.gpuOperator.toolkit",
    ("dcgmExporter", "enabled"): "cluster.gpuOperator.dcgmExporter",
}
# Operand env lists gpupool adds its own variables to (config hashes; WITH_REBOOT).
DERIVED_ENV = {"devicePlugin": "", "gfd": "", "migManager": "cluster.gpuOperator.migRebootOnReconfigure"}
DERIVED_ENV_NAMES = ("GPUPOOL_",)


def refuse_derived(ctx: Context, base: tuple, values: dict, derived: dict[tuple[str, ...], str]) -> None:
    """An error for each key of DERIVED that VALUES (Helm values at BASE) sets, or replaces a section of."""
    for keys, field in derived.items():
        node: Any = values
        for depth, key in enumerate(keys):
            if not isinstance(node, dict) or key not in node:
                break
            here = keys[: depth + 1]
            if depth == len(keys) - 1:
                ctx.error(base + here, f"{'.'.join(keys)} is derived by gpupool; set {field} instead", key=True)
            elif not isinstance(node[key], dict):
                ctx.error(
                    base + here,
                    f"replaces the whole {key} section, which holds {'.'.join(keys)} that gpupool "
                    f"derives from {field}; give {key} as a mapping of the values to change",
                    key=True,
                )
                break
            node = node[key]


@rule("GP808", "operator values may not override what gpupool derives from the spec")
def derived_values(ctx: Context) -> None:
    """`cluster.gpuOperator.values` is merged last into the chart's values. The MIG strategy, the MIG Manager
    and device-plugin config, the driver/toolkit/DCGM toggles and gpupool's config-hash variables are derived
    from the spec, and every plan-time check assumes them; replacing one (with any value, null included, or by
    replacing its whole section with a scalar) would make the cluster do something validate never judged.

    Passes:
        cluster:
          name: dev
          gpuOperator: {values: {devicePlugin: {resources: {limits: {memory: 256Mi}}}}}
    Fails:
        cluster:
          name: dev
          gpuOperator: {values: {mig: {strategy: single}}}
    """
    base = ("cluster", "gpuOperator", "values")
    values = _get(ctx.data, *base)
    if not isinstance(values, dict) or not ctx.usable(base):
        return
    refuse_derived(ctx, base, values, DERIVED_VALUES)
    for operand, field in DERIVED_ENV.items():
        section = values.get(operand)
        if not isinstance(section, dict) or "env" not in section:
            if operand == "gfd" and operand in values and not isinstance(section, dict):
                ctx.error(
                    base + (operand,),
                    "replaces the whole gfd section, which holds the config-hash variable "
                    "gpupool sets; give gfd as a mapping of the values to change",
                    key=True,
                )
            continue
        env = section["env"]
        if not isinstance(env, list):
            ctx.error(
                base + (operand, "env"),
                "must be a list of {name, value} entries (gpupool adds its own variables to it)",
                key=True,
            )
            continue
        for k, item in enumerate(env):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                continue
            if name.startswith(DERIVED_ENV_NAMES):
                ctx.error(
                    base + (operand, "env", k, "name"),
                    f"{DERIVED_ENV_NAMES[0]}* variables are set by gpupool (a hash of the config it "
                    "writes, so that operands restart on a config change); remove this entry",
                )
            elif operand == "migManager" and name == "WITH_REBOOT":
                ctx.error(base + (operand, "env", k, "name"), f"WITH_REBOOT is derived by gpupool; set {field} instead")


@rule("GP809", "a tenant file is named after the tenant it declares")
def tenant_file_name(ctx: Context) -> None:
    """One file per tenant, named `<tenant>.yaml` (or `.yml`), so that CODEOWNERS can give each team its own
    file: a file named after one team that declares another team's namespace would get past that review.
    This is an error, not a warning. Inline tenants in the spec itself are not affected.

    Passes:
        # tenants/research.yaml
        name: research
        tier: standard
    Fails:
        # tenants/notebooks.yaml
        name: research
        tier: standard
    """
    for path, t in _tenants(ctx):
        name = t.get("name")
        if not isinstance(name, str) or not ctx.usable(path + ("name",)):
            continue
        file = ctx.location(path).file
        if file == ctx.loaded.path:
            continue  # an inline tenant
        stem = Path(file).name
        for suffix in (".yaml", ".yml"):
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
        if stem != name:
            ctx.error(
                path + ("name",),
                f'tenant "{name}" is declared in a file named otherwise; rename the file to '
                f"{name}.yaml (each tenant file is named after its tenant, so CODEOWNERS can give each team "
                "its own file)",
            )


# What no free text may hold: C0 controls (newline, tab, carriage return, ESC, backspace, BEL ...), DEL, C1
# controls (CSI, NEL ...), Unicode's line and paragraph separators, and the bidirectional controls that
# reorder how a line is shown (the "Trojan Source" characters). Each either changes the structure of what
# gpupool prints (a newline ends a table row or starts a block in the pull-request comment) or what a terminal
# shows (an escape sequence erases or rewrites the alert line), or makes a reviewer read something else.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Helm values are handed to the chart as written (gpupool.spec.loader): a multi-line string there, such as a
# config file, is ordinary, so line breaks and tabs are allowed; the other characters are not.
_HELM_VALUES = ("cluster", "gpuOperator", "values")
_CONTROL_IN_VALUES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ONE_LINE = (
    "must be one line of printable text: it holds a line break or a control character (a newline, tab, "
    "carriage return, terminal escape sequence or bidirectional override), which would change what reviewers "
    "see in gpupool's output; remove it"
)


@rule("GP810", "free text holds no line breaks or control characters")
def control_characters(ctx: Context) -> None:
    r"""Every string in a spec or tenant file, and every mapping key, is one line of printable text: owners,
    descriptions, node and GPU names, paths, anything a later field adds. Text from tenant files reaches the
    pull-request comment and terminals; a newline, a terminal escape sequence or a bidirectional override in
    it could add a fake paragraph or verdict, end a table row or erase the alert line (gpupool escapes what
    it prints as well, but refuses such text first). Under `cluster.gpuOperator.values` (Helm values, passed
    as written) line breaks and tabs are allowed. Markdown characters such as `_`, `*`, `|` or backticks are
    not refused: Kubernetes accepts any non-empty group name (pkg/apis/rbac/validation), identity providers
    issue names like `gpu_admins`, and gpupool escapes them in its output.

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [team-a_admins], gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: ["team-a\n\n**Routine**"], gpus: {nvidia.com/gpu: 4}}
    """

    def walk(node: Any, path: tuple, forbidden: re.Pattern[str]) -> None:
        if path == _HELM_VALUES:
            forbidden = _CONTROL_IN_VALUES
        if isinstance(node, dict):
            for key, value in node.items():
                here = path + (key,)
                if not ctx.usable(here):
                    continue  # the schema or the loader refused it already
                if isinstance(key, str) and forbidden.search(key):
                    ctx.error(here, "this key " + _ONE_LINE, key=True)
                walk(value, here, forbidden)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if ctx.usable(path + (i,)):
                    walk(item, path + (i,), forbidden)
        elif isinstance(node, str) and forbidden.search(node):
            ctx.error(path, _ONE_LINE)

    walk(ctx.data, (), _CONTROL)
