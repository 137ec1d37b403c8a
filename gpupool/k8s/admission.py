"""Per-pod GPU maximums as a ValidatingAdmissionPolicy: pure data, no Pulumi.

Why not a LimitRange: a GPU `max` there becomes the default and injects GPUs into every container, a `min`
makes non-GPU pods invalid, and a `type: Pod` max rejects every pod without a GPU limit (settled by the e2e
tests). A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30) only says yes
or no: it never changes a pod.

Design: one policy and one binding per tenant, the limits written into the policy's CEL as literals.
- No parameter objects: a param in the tenant's namespace would be editable by the tenant, one elsewhere
  can go missing (parameterNotFoundAction) or drift, and a ConfigMap carries strings to parse in CEL. Policies
  and bindings are cluster-scoped, and the tenant role grants nothing in admissionregistration.k8s.io.
- A tenant's edit changes exactly that tenant's two objects (what `gpupool diff` and `pulumi preview` show),
  and the API server's denial names the policy, so `gpupool-max-per-pod.<tenant>` names the tenant twice.
- The binding selects the tenant's namespace by its immutable `kubernetes.io/metadata.name` label.

What counts: a pod's effective request of a resource, as the scheduler computes it
(k8s.io/component-helpers/resource PodRequests): the larger of (a) the sum over regular containers plus
restartable init containers (sidecars, `restartPolicy: Always`), and (b) for each ordinary init container, its
own request plus the sidecars declared before it. Extended resources must have request == limit (the API server
enforces it before admission), so limits are read.

Workload kinds: Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs are checked on their pod
template too, so `kubectl apply` of a workload whose pods could never be admitted fails at once (otherwise the
workload is accepted and only its controller's events show FailedCreate). Pods are checked on CREATE (their
GPU requests are immutable); workloads on CREATE and UPDATE, except while being deleted (a finalizer removal
must not be refused).
"""

from __future__ import annotations

from typing import Any

from gpupool.model import platform as m

POLICY_PREFIX = "gpupool-max-per-pod."
API_VERSION = "admissionregistration.k8s.io/v1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# (API group, resources, operations)
WORKLOAD_KINDS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("pods",), ("CREATE",)),
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets"), ("CREATE", "UPDATE")),
    ("batch", ("jobs", "cronjobs"), ("CREATE", "UPDATE")),
)

# The pod spec wherever the kind keeps it.
_POD_SPEC = (
    "object.kind == 'Pod' ? object.spec : "
    "object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : "
    "object.spec.template.spec"
)
_SIDECAR = "(has({c}.restartPolicy) && {c}.restartPolicy == 'Always')"


# MatchResources is an atomic struct (k8s.io/api admissionregistration/v1 types.go, `+structType=atomic`):
# its field manager owns it as one value, and the API server stores it with these defaults filled in. Sent
# without them, the stored value differs from what a second manager applies (a rerun adopting what a
# killed run created), and that apply conflicts; sent with them, any manager can adopt it.
MATCH_DEFAULTS: dict[str, Any] = {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}}


def policy_name(tenant: m.Tenant) -> str:
    return POLICY_PREFIX + tenant.name


def _count(c: str, resource: str) -> str:
    """CEL: how many units of `resource` container `c` asks for (0 when it names none); cannot error.
    Limits only: for extended resources the API server requires request == limit (and fills a missing request
    from the limit) before admission runs."""
    r = f"'{resource}'"  # resource names are schema-checked: no quotes
    return (
        f"(has({c}.resources) && has({c}.resources.limits) && {r} in {c}.resources.limits ? "
        f"quantity({c}.resources.limits[{r}]).asInteger() : 0)"
    )


def effective_request_cel(resource: str) -> str:
    """CEL over the policy's variables: the pod's effective request of `resource` (see the module docstring)."""
    regular = f"variables.containers.map(c, {_count('c', resource)}).sum()"
    sidecars = f"variables.sidecars.map(c, {_count('c', resource)}).sum()"
    before = "variables.sidecars.filter(s, variables.initNames.indexOf(s.name) < variables.initNames.indexOf(c.name))"
    per_init = (
        f"variables.inits.filter(c, !{_SIDECAR.format(c='c')})"
        f".map(c, {_count('c', resource)} + {before}.map(s, {_count('s', resource)}).sum())"
    )
    return f"([{regular} + {sidecars}] + {per_init}).max()"


def _variable_name(index: int) -> str:
    return f"request{index}"


def policy(
    tenant: m.Tenant, limits: dict[str, int], labels: dict[str, str], singles: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    """The tenant's per-pod maximums (`limits`), and for each of `singles` (shared resources the device plugin
    allocates at most one of per container, failRequestsGreaterThanOne) a per-container check: such a pod
    would pass the quota and be scheduled, then fail at kubelet Allocate (k8s-device-plugin internal/rm/rm.go)."""
    variables = [
        {"name": "spec", "expression": _POD_SPEC},
        {"name": "containers", "expression": "variables.spec.containers"},
        {"name": "inits", "expression": "has(variables.spec.initContainers) ? variables.spec.initContainers : []"},
        {"name": "sidecars", "expression": f"variables.inits.filter(c, {_SIDECAR.format(c='c')})"},
        {"name": "initNames", "expression": "variables.inits.map(c, c.name)"},
        {"name": "what", "expression": "object.kind == 'Pod' ? 'this pod' : 'each pod of this ' + object.kind"},
    ]
    validations = []
    for i, (resource, limit) in enumerate(sorted(limits.items())):
        var = _variable_name(i)
        variables.append({"name": var, "expression": effective_request_cel(resource)})
        text = f"the per-pod maximum of {limit} {resource} for tenant {tenant.name} (gpupool maxPerPod)"
        validations.append(
            {
                "expression": f"variables.{var} <= {limit}",
                "message": f"requests more than {text}",
                "messageExpression": (
                    f"'tenant {tenant.name}: ' + variables.what + ' requests ' + "
                    f"string(variables.{var}) + ' {resource}, above the per-pod maximum of {limit} "
                    f"(gpupool maxPerPod)'"
                ),
                "reason": "Forbidden",
            }
        )
    for resource in sorted(singles):
        one = _count("c", resource)
        validations.append(
            {
                "expression": f"(variables.containers + variables.inits).all(c, {one} <= 1)",
                "message": (
                    f"a container requests more than 1 {resource}: the device plugin allocates at most one per "
                    "container (failRequestsGreaterThanOne); use one unit per container, or whole GPUs"
                ),
                "messageExpression": (
                    f"'tenant {tenant.name}: a container of ' + variables.what + ' requests more than 1 {resource}: "
                    "the device plugin allocates at most one per container (failRequestsGreaterThanOne); use one "
                    "unit per container, or whole GPUs'"
                ),
                "reason": "Forbidden",
            }
        )
    rules = [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "resources": list(resources),
            "operations": list(ops),
            "scope": "*",
        }
        for group, resources, ops in WORKLOAD_KINDS
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(tenant), "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {**MATCH_DEFAULTS, "resourceRules": rules},
            # A workload being deleted may still need updates (finalizers): never refuse those.
            "matchConditions": [{"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"}],
            "variables": variables,
            "validations": validations,
        },
    }


def tenant_binding(policy: str, tenant: m.Tenant, labels: dict[str, str]) -> dict[str, Any]:
    """The Deny binding, named as its POLICY, of a per-tenant policy to the tenant's namespace only (the
    per-pod maximums here, the priority guard, the DRA claim guard)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(labels)},
        "spec": {
            "policyName": policy,
            "validationActions": ["Deny"],
            "matchResources": {
                **MATCH_DEFAULTS,
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: tenant.namespace}},
            },
        },
    }


def binding(tenant: m.Tenant, labels: dict[str, str]) -> dict[str, Any]:
    return tenant_binding(policy_name(tenant), tenant, labels)
