"""The priority guard: no pod in a tenant's namespace runs above the tenant's tier. Pure data, no Pulumi.

Why a ValidatingAdmissionPolicy on the pod's resolved priority, and not a quota listing class names:
- The Priority admission plugin resolves *any* existing PriorityClass for a pod in any namespace and writes
  its value into `spec.priority` (Kubernetes v1.36.3 `plugin/pkg/admission/priority/admission.go`,
  `admitPod`); `system-node-critical` (2000001000) and `system-cluster-critical` (2000000000) exist in every
  cluster (`pkg/apis/scheduling/v1/helpers.go`), and third-party charts add their own. A quota can only name
  classes, so a list of gpupool's higher tiers leaves all of those open.
- An allow-list quota (`NotIn` own and lower tiers, with `Exists`) would also refuse a pod with no class as
  soon as the cluster has a `globalDefault` class: the plugin writes that class's *name* into the pod before
  quota admission runs (`admitPod`, `getDefaultPriority`).
- Validating policies run after every mutating plugin, so `object.spec.priority` is the value the pod will
  have, whichever class (or none, or the global default) produced it. A client may not set it itself: the
  Priority plugin refuses a pod that does (`admitPod`, "the integer value of priority must not be
  provided"). Pod priority is immutable, so CREATE is the only operation to check.

One policy and one binding per tenant, the tier's value written into the CEL as a literal (the reasons of
gpupool.k8s.admission: no tenant-editable parameters), binding by the namespace's immutable name label.
"""

from __future__ import annotations

from typing import Any

from gpupool.k8s.admission import API_VERSION, MATCH_DEFAULTS, tenant_binding
from gpupool.model import platform as m

POLICY_PREFIX = "gpupool-priority-guard."


def policy_name(tenant: m.Tenant) -> str:
    return POLICY_PREFIX + tenant.name


def policy(tenant: m.Tenant, tier: m.Tier, labels: dict[str, str]) -> dict[str, Any]:
    limit = tier.priority
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(tenant), "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            # With the API server's defaults of the atomic match structs (gpupool.k8s.admission.MATCH_DEFAULTS):
            # the guard is retained, so a later run (after a destroy, or a killed run) must adopt it.
            "matchConstraints": {
                **MATCH_DEFAULTS,
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                        "scope": "*",
                    }
                ],
            },
            "variables": [
                # Set by the Priority plugin on every pod it admits; absent only if that plugin is off.
                {"name": "priority", "expression": "has(object.spec.priority) ? object.spec.priority : 0"},
                {
                    "name": "className",
                    "expression": "has(object.spec.priorityClassName) ? object.spec.priorityClassName : '(none)'",
                },
            ],
            "validations": [
                {
                    # The tier's own class by name, whatever its value: a tier priority edit replaces the class
                    # and updates this policy in one run, in either order (and a run can die between the two),
                    # so its value may be the old or the new one; either is the tenant's tier. Tenants cannot
                    # write PriorityClasses, and the Priority plugin sets spec.priority from the class.
                    "expression": f"variables.className == '{tier.name}' || variables.priority <= {limit}",
                    "message": f"tenant {tenant.name} may not run pods above its tier {tier.name} ({limit})",
                    "messageExpression": (
                        f"'tenant {tenant.name}: priority class ' + variables.className + ' has priority ' + "
                        f"string(variables.priority) + ', above the tier {tier.name} ({limit}); use "
                        f"priorityClassName {tier.name} or a lower tier (gpupool priority guard)'"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    }


def binding(tenant: m.Tenant, labels: dict[str, str]) -> dict[str, Any]:
    return tenant_binding(policy_name(tenant), tenant, labels)
