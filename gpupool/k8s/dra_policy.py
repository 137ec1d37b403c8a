"""The DRA guard: what a tenant's ResourceClaims and ResourceClaimTemplates may ask, where quota cannot tell.
Pure data, no Pulumi; rendered only when the spec has a pool with `allocation: dra` (docs/explanation/dra.md).

Quota counts devices per class (gpupool.k8s.dra), but it does not see:
- the claim the scheduler makes for a pod's extended resources. It carries the annotation
  `resource.kubernetes.io/extended-resource-claim: "true"` (k8s.io/api v0.36.3 resource/v1/types.go 34-37; set by
  kube-scheduler v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go 196-202),
  and the quota evaluator discounts such a claim by its pod's own requests (pkg/quota/v1/evaluator/core/
  resource_claims.go 169-224, 138-167). A tenant writing the annotation itself claims devices the quota may not
  charge (kubernetes#135404). Only the scheduler may create a claim with it, or add it later; a template may not
  carry it for the claims the resourceclaim controller makes from it (`spec.metadata`);
- `allocationMode: All`: every matching device on a node, whatever the count (quota charges 32, the most an
  allocation holds: resource_claims.go 247-251, types.go 1749; a tenant granted 32 could take a node's all);
- `adminAccess: true`: access to devices already in use by others (the API server also requires the namespace
  label `resource.kubernetes.io/admin-access`, which tenants cannot set; refused here as well);
- a class the tenant is not granted, directly or as a `firstAvailable` alternative: a foreign pool's or tier's
  class, or the driver's own (gpu.nvidia.com, mig.nvidia.com: any device anywhere). An allow-list, so classes of
  other DRA drivers are refused too until the spec grants them (docs/explanation/dra.md).

- a claim shared by several pods (`resourceClaimName` in each): quota counts the claim once, so its devices would
  serve more pods than the grant. kube-scheduler reserves a claim for each pod it binds by appending the pod to
  `status.reservedFor` (v1.36.3 dynamicresources.go 1612-1631); refusing a second entry keeps a claim to one pod,
  so pods holding devices never outnumber claims, which quota bounds by the granted devices. A refused reservation
  is a PreBind error: the pod stays Pending, retried with backoff, its FailedScheduling event naming this rule
  (schedule_one.go 517-535).

Claims and templates are checked on CREATE (their spec is immutable); the annotation also on UPDATE, where only
its addition is refused, so controllers removing finalizers from existing claims pass. One policy and binding per
tenant, the granted classes written as CEL literals (the reasons of gpupool.k8s.admission). Each message names the
rule it enforces.
"""

from __future__ import annotations

from typing import Any

from gpupool.k8s.admission import API_VERSION, MATCH_DEFAULTS, tenant_binding
from gpupool.model import platform as m

POLICY_PREFIX = "gpupool-dra-guard."
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# kube-scheduler's own identity (its kubeconfig user in every kubeadm-style control plane, and the subject of the
# system:kube-scheduler ClusterRoleBinding); the one writer of the annotation.
SCHEDULER_USER = "system:kube-scheduler"

# Named once in the policy's `variables` (the claim spec wherever the kind keeps it; absent lists read as empty).
VARIABLES = [
    {"name": "claim", "expression": "object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec"},
    {
        "name": "requests",
        "expression": "has(variables.claim.devices) && has(variables.claim.devices.requests) ? "
        "variables.claim.devices.requests : []",
    },
]
_SUBREQUESTS = "(has(r.firstAvailable) ? r.firstAvailable : [])"


def policy_name(tenant: m.Tenant) -> str:
    return POLICY_PREFIX + tenant.name


def _annotated(obj: str) -> str:
    return f"(has({obj}.metadata.annotations) && '{EXTENDED_CLAIM_ANNOTATION}' in {obj}.metadata.annotations)"


def _on_create(expression: str) -> str:
    return f"request.operation != 'CREATE' || ({expression})"


def _rule(tenant: m.Tenant, rule: str, expression: str, why: str) -> dict[str, Any]:
    return {
        "expression": expression,
        "message": f"tenant {tenant.name}: {why} (gpupool DRA guard, rule {rule})",
        "reason": "Forbidden",
    }


def validations(tenant: m.Tenant, classes: list[str]) -> list[dict[str, Any]]:
    granted = "[" + ", ".join(f"'{c}'" for c in classes) + "]"
    template_annotated = (
        "(object.kind == 'ResourceClaimTemplate' && has(object.spec.metadata) && "
        f"has(object.spec.metadata.annotations) && '{EXTENDED_CLAIM_ANNOTATION}' in object.spec.metadata.annotations)"
    )
    forged = (
        f"request.userInfo.username == '{SCHEDULER_USER}' || "
        f"(request.operation == 'CREATE' ? !{_annotated('object')} && !{template_annotated} : "
        f"!{_annotated('object')} || {_annotated('oldObject')})"
    )
    return [
        _rule(
            tenant,
            "dra-forged-claim",
            forged,
            f"only kube-scheduler may create or annotate a claim with {EXTENDED_CLAIM_ANNOTATION} "
            "(it exempts the claim from extended-resource quota); remove the annotation",
        ),
        _rule(
            tenant,
            "dra-allocation-all",
            _on_create(
                "variables.requests.all(r, !(has(r.exactly) && has(r.exactly.allocationMode) && "
                f"r.exactly.allocationMode == 'All') && {_SUBREQUESTS}.all(s, !(has(s.allocationMode) && "
                "s.allocationMode == 'All')))"
            ),
            "allocationMode All takes every matching device of a node; request an ExactCount within the grant",
        ),
        _rule(
            tenant,
            "dra-admin-access",
            _on_create(
                "variables.requests.all(r, !(has(r.exactly) && has(r.exactly.adminAccess) && r.exactly.adminAccess))"
            ),
            "adminAccess reaches devices other tenants use; tenants may not request it",
        ),
        _rule(
            tenant,
            "dra-shared-claim",
            "!has(object.status) || !has(object.status.reservedFor) || size(object.status.reservedFor) <= 1",
            "a claim serves one pod at a time (pods sharing it would use devices the grant counts once); "
            "give each pod its own claim through a ResourceClaimTemplate",
        ),
        _rule(
            tenant,
            "dra-ungranted-class",
            _on_create(
                f"variables.requests.all(r, (!has(r.exactly) || r.exactly.deviceClassName in {granted}) && "
                f"{_SUBREQUESTS}.all(s, s.deviceClassName in {granted}))"
            ),
            "every request and firstAvailable alternative must name a device class the tenant is granted: "
            + (", ".join(classes) if classes else "none (no DRA grant)"),
        ),
    ]


def policy(tenant: m.Tenant, classes: list[str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(tenant), "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                **MATCH_DEFAULTS,
                "resourceRules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        # matchPolicy Equivalent (MATCH_DEFAULTS): a request in another served version (v1beta2)
                        # is converted to v1 and checked here too.
                        "apiVersions": ["v1"],
                        "resources": ["resourceclaims", "resourceclaimtemplates"],
                        "operations": ["CREATE", "UPDATE"],
                        "scope": "Namespaced",
                    },
                    {
                        # kube-scheduler reserves a claim for a pod by an UpdateStatus that appends the pod to
                        # status.reservedFor (v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/
                        # dynamicresources.go 1612-1631): the one write that shares a claim.
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["v1"],
                        "resources": ["resourceclaims/status"],
                        "operations": ["UPDATE"],
                        "scope": "Namespaced",
                    },
                ],
            },
            "variables": VARIABLES,
            "validations": validations(tenant, classes),
        },
    }


def binding(tenant: m.Tenant, labels: dict[str, str]) -> dict[str, Any]:
    return tenant_binding(policy_name(tenant), tenant, labels)
