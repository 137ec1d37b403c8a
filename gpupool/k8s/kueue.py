"""Kueue objects (kueue.x-k8s.io/v1beta2, Kueue >= 0.16) from the queue model: pure data, no Pulumi.

- a ResourceFlavor per pool, selecting the pool's nodes by the label gpupool puts on them (`gpupool.dev/pool`);
  gpupool pools carry no taints, so the flavors have no nodeTaints/tolerations;
- a Cohort tree: the root, and the sub-cohorts of `queueing.cohorts` (with their shared quota);
- a ClusterQueue per tenant, not per tier: a tenant's grant is its own nominal quota, which it gets back by
  preemption when it was lent (reclaimWithinCohort). A queue per tier would pool the grants of a tier's
  tenants, so one tenant could use up another's grant with nobody to reclaim it, and `gpupool plan` could no
  longer say what a tenant is guaranteed. Tenant namespaces are selected by their `gpupool.dev/tenant`
  label, which only gpupool sets (tenants cannot edit namespaces);
- a LocalQueue named `default` in each tenant namespace: Kueue's LocalQueueDefaulting puts unlabelled jobs
  there, and the queue policy (below) refuses jobs that would bypass Kueue;
- a WorkloadPriorityClass per tier, with the tier's priority: the order Kueue admits and preempts in.

The queue policy is one ValidatingAdmissionPolicy for all tenant namespaces: a Job must name a LocalQueue
(`kueue.x-k8s.io/queue-name`, which Kueue's webhook sets to `default` before validation runs), and may name
only its own tier's WorkloadPriorityClass or a lower one (as the priority-guard quota does for pod
PriorityClasses). A tenant cannot reach another tenant's ClusterQueue: its selector names the namespace.
"""

from __future__ import annotations

import json
from typing import Any

from gpupool.model import platform as m
from gpupool.model import queues as q
from gpupool.model.queueing import Queueing

API = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
COMPONENT = "queueing"
POLICY = "gpupool-queue-policy"


def _meta(name: str, labels: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def resource_flavor(pool: m.NodePool, labels: dict[str, str], pool_label: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": _meta(q.flavor_name(pool), labels),
        "spec": {"nodeLabels": {pool_label: pool.name}},
    }


def _groups(quotas: list[q.Quota], cohort_member: bool) -> list[dict[str, Any]]:
    by_key = {(x.flavor, x.resource): x for x in quotas}
    out = []
    for covered, flavors in q.resource_groups(quotas):
        entries = []
        for flavor in flavors:
            resources = []
            for r in covered:
                x = by_key.get((flavor, r))
                entry: dict[str, Any] = {"name": r, "nominalQuota": x.nominal if x else 0}
                if cohort_member and x is not None:
                    if x.borrowing_limit is not None:
                        entry["borrowingLimit"] = x.borrowing_limit
                    if x.lending_limit is not None:
                        entry["lendingLimit"] = x.lending_limit
                resources.append(entry)
            entries.append({"name": flavor, "resources": resources})
        out.append({"coveredResources": covered, "flavors": entries})
    return out


def cohort(c: Any, labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if c.parent:
        spec["parentName"] = c.parent
    if c.quota:
        quotas = [q.Quota(pool, r, n, None, None) for pool, rs in c.quota.items() for r, n in rs.items()]
        spec["resourceGroups"] = _groups(quotas, cohort_member=False)
    if c.weight is not None:
        spec["fairSharing"] = {"weight": _number(c.weight)}
    return {"apiVersion": API, "kind": "Cohort", "metadata": _meta(c.name, labels), "spec": spec}


def _number(x: float) -> int | str:
    """A weight as a Kubernetes quantity (int-or-string: 0.5 must be the string "0.5")."""
    return int(x) if float(x).is_integer() else str(x)


def cluster_queue(queue: q.TenantQueue, queueing: Queueing, labels: dict[str, str], tenant_label: str) -> dict:
    policy = queueing.policy(queue.tier)
    spec: dict[str, Any] = {}
    if queue.cohort is not None:
        spec["cohortName"] = queue.cohort
    spec["namespaceSelector"] = {"matchLabels": {tenant_label: queue.tenant}}
    spec["queueingStrategy"] = "BestEffortFIFO"
    spec["resourceGroups"] = _groups(list(queue.quotas), cohort_member=queue.cohort is not None)
    spec["preemption"] = {
        "reclaimWithinCohort": policy.reclaim,
        "borrowWithinCohort": {"policy": policy.borrow_within_cohort},
        "withinClusterQueue": policy.within_queue,
    }
    spec["fairSharing"] = {"weight": _number(policy.weight)}
    if queue.stopped:
        spec["stopPolicy"] = "Hold"
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": _meta(queue.tenant, labels), "spec": spec}


def local_queue(tenant: m.Tenant, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": _meta(q.LOCAL_QUEUE, labels, tenant.namespace),
        "spec": {"clusterQueue": tenant.name},
    }


def workload_priority_class(tier: m.Tier, labels: dict[str, str]) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "WorkloadPriorityClass",
        "metadata": _meta(tier.name, labels),
        "value": tier.priority,
    }
    if tier.description:
        obj["description"] = tier.description
    return obj


def allowed_priority_classes(spec: m.Spec) -> dict[str, list[str]]:
    """Per tier, the WorkloadPriorityClasses its tenants may name: its own and every lower one."""
    return {
        t.name: sorted(o.name for o in spec.tiers if o.priority <= t.priority)
        for t in sorted(spec.tiers, key=lambda t: t.name)
    }


def queue_policy(spec: m.Spec, labels: dict[str, str], tenant_label: str, tier_label: str) -> list[dict]:
    """The ValidatingAdmissionPolicy and its binding (see the module docstring)."""
    allowed = json.dumps(allowed_priority_classes(spec), sort_keys=True)
    labels_of = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    tier_of = f"namespaceObject.metadata.labels['{tier_label}']"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(POLICY, labels),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "resources": ["jobs"],
                        "operations": ["CREATE", "UPDATE"],
                    }
                ]
            },
            # A Job being deleted must still lose its finalizers.
            "matchConditions": [{"name": "not-deleting", "expression": "!has(object.metadata.deletionTimestamp)"}],
            "variables": [{"name": "labels", "expression": labels_of}],
            "validations": [
                {
                    "expression": f"'{QUEUE_NAME_LABEL}' in variables.labels && "
                    f"variables.labels['{QUEUE_NAME_LABEL}'] != ''",
                    "message": f"jobs in tenant namespaces go through Kueue: set the label {QUEUE_NAME_LABEL} "
                    f"(the tenant's LocalQueue is '{q.LOCAL_QUEUE}')",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!('{PRIORITY_CLASS_LABEL}' in variables.labels) || "
                    f"({tier_of} in {allowed} && "
                    f"variables.labels['{PRIORITY_CLASS_LABEL}'] in {allowed}[{tier_of}])",
                    "message": f"{PRIORITY_CLASS_LABEL} may name only the tenant's own tier or a lower one",
                    "reason": "Forbidden",
                },
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _meta(POLICY, labels),
        "spec": {
            "policyName": POLICY,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchExpressions": [{"key": tenant_label, "operator": "Exists"}]}
            },
        },
    }
    return [policy, binding]
