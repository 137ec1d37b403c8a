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

The queue policy (gpupool.k8s.kueue_policy) is one ValidatingAdmissionPolicy for all tenant namespaces: GPUs
only through Kueue (gated pods, Jobs naming a LocalQueue, child Jobs of a Kueue-managed parent made by its
controller), suspend left to Kueue, and priorities bounded by the tenant's tier. A tenant cannot reach another
tenant's ClusterQueue: its selector names the namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpupool.k8s import dra, kueue_policy
from gpupool.k8s.desired import LABEL_POOL, LABEL_TENANT, LABEL_TIER, MANAGED_BY, Desired
from gpupool.model import platform as m
from gpupool.model import queues as q
from gpupool.model.queueing import Queueing

API = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = kueue_policy.QUEUE_NAME_LABEL
PRIORITY_CLASS_LABEL = kueue_policy.PRIORITY_CLASS_LABEL
COMPONENT = "queueing"
POLICY = kueue_policy.POLICY


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
    # A tenant's own nominal quota on a later flavor before borrowing on an earlier one: Kueue's default
    # (whenCanBorrow: MayStopSearch) stops at the first flavor where the workload fits by borrowing
    # (pkg/scheduler/flavorassigner/flavorassigner.go:1259-1276, shouldTryNextFlavor), so a tenant would borrow
    # H100s, and be reclaimed, while its own B200 quota sat idle. TryNextFlavor for both looks at every flavor
    # and stops early only where the workload fits without borrowing or preempting (clusterqueue_types.go:453-494).
    spec["flavorFungibility"] = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    spec["fairSharing"] = {"weight": _number(policy.weight)}
    if queue.stopped:
        spec["stopPolicy"] = "Hold"
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": _meta(queue.tenant, labels), "spec": spec}


# The integrations Kueue must run for the queue policy (gpupool.k8s.kueue_policy) to leave tenants a way to
# their GPUs: Jobs, plain pods (Kueue gates them), Deployments and StatefulSets (their pods are gated),
# LeaderWorkerSets and JobSets (a JobSet's child Jobs are let through as its controller's). Names as in
# kueue v0.19.2 apis/config/v1beta2/configuration_types.go (Integrations.Frameworks).
FRAMEWORKS = (
    "batch/job",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "jobset.x-k8s.io/jobset",
)
PODS_READY_TIMEOUT = "10m"


def configuration(tenant_label: str, device_class_mappings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Kueue Configuration (config.kueue.x-k8s.io/v1beta2) gpupool's queues are made for; docs/explanation/queueing.md
    shows it, and tests/e2e/test_kueue.py runs Kueue with it (plus only the test's ports and certificates).

    - manageJobsWithoutQueueName with managedJobsNamespaceSelector on the tenant label: every workload in a
      tenant namespace is Kueue's, labelled or not, and nothing outside them is touched;
    - quotaCheckStrategy IgnoreUndeclared: only the resources a ClusterQueue covers (gpupool's GPU resources)
      are checked; BlockUndeclared would make a job asking ephemeral-storage, hugepages-*, rdma/* or EFA
      inadmissible (configuration_types.go:574-592; excludeResourcePrefixes may not be combined with it);
    - waitForPodsReady: a workload whose pods do not all run within the timeout (refused by a quota or a
      policy, unschedulable) is evicted and requeued, so it gives its quota back; after backoffLimitCount
      requeues it is deactivated (configuration_types.go:302-328, RequeuingStrategy);
    - deviceClassMappings (with DRA pools, gpupool.k8s.dra.kueue_mappings): claims from tenants' templates counted
      under the resource names their ClusterQueues hold."""
    resources: dict[str, Any] = {"quotaCheckStrategy": "IgnoreUndeclared"}
    if device_class_mappings:
        resources["deviceClassMappings"] = device_class_mappings
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": tenant_label, "operator": "Exists"}]},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "resources": resources,
        "waitForPodsReady": {
            "timeout": PODS_READY_TIMEOUT,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5},
        },
    }


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
    """The ValidatingAdmissionPolicy and its binding that keep GPUs behind Kueue (gpupool.k8s.kueue_policy)."""
    return kueue_policy.policy_objects(spec, allowed_priority_classes(spec), labels, tenant_label, tier_label)


# -- the objects of a spec with `queueing:` ------------------------------------------------------


@dataclass
class QueueObjects:
    """The Kueue objects of an opted-in spec: the platform's, and each tenant's ClusterQueue and LocalQueue."""

    platform: list[Desired]
    by_tenant: dict[str, list[dict[str, Any]]]
    admitted: dict[str, dict[str, int]]  # tenant -> resource -> the most Kueue can admit (its quota's size)
    queues: dict[str, q.TenantQueue] = field(default_factory=dict)  # what the ClusterQueues are made from
    configuration: dict[str, Any] = field(default_factory=dict)  # Kueue's, for these queues (render writes it)


def queue_objects(spec: m.Spec) -> QueueObjects | None:
    qs = spec.queueing
    if qs is None:
        return None
    labels = dict(MANAGED_BY)
    comp = COMPONENT
    platform = [Desired(comp, f"flavor-{p.name}", resource_flavor(p, labels, LABEL_POOL)) for p in spec.pools]
    platform += [Desired(comp, f"cohort-{c.name}", cohort(c, labels)) for c in qs.all_cohorts()]
    platform += [
        Desired(comp, f"workload-priority-{t.name}", workload_priority_class(t, {**labels, LABEL_TIER: t.name}))
        for t in spec.tiers
    ]
    policy, binding = queue_policy(spec, labels, LABEL_TENANT, LABEL_TIER)
    platform += [
        Desired(comp, "queue-policy", policy),
        Desired(comp, "queue-policy-binding", binding, depends_on=("queue-policy",)),
    ]
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    tenants = {t.name: t for t in spec.tenants}
    tenant_queues = q.tenant_queues(spec, qs)
    for name, queue in tenant_queues.items():
        tenant = tenants[name]
        tlabels = {**labels, LABEL_TENANT: name, LABEL_TIER: tenant.tier}
        by_tenant[name] = [cluster_queue(queue, qs, tlabels, LABEL_TENANT), local_queue(tenant, tlabels)]
    config = configuration(LABEL_TENANT, dra.kueue_mappings(spec))
    return QueueObjects(platform, by_tenant, q.max_admitted(spec, qs), tenant_queues, config)
