"""The queue policy: with `queueing:` on, Kueue is the only way to GPUs in a tenant namespace. Pure data.

One ValidatingAdmissionPolicy (`gpupool-queue-policy`) and its binding, for every namespace carrying the
`gpupool.dev/tenant` label. Why admission and not the ResourceQuota: a quota counts every pod whoever admitted
it, so a quota at the grant refuses the pods of work Kueue admitted on borrowed quota, and a quota above the
grant (gpupool sizes it to what Kueue may admit, gpupool.model.queues.max_admitted) is open to everything Kueue
does not manage. Kueue itself assumes nothing else takes the quota it hands out (kueue v0.19.2
apis/kueue/v1beta2/clusterqueue_types.go:305-313). So the policy refuses what Kueue would not see:

- A pod asking for a GPU resource must be held by Kueue's scheduling gate `kueue.x-k8s.io/admission` when it is
  created (Kueue's pod webhook gates every pod of a managed namespace that no Kueue-managed job owns:
  pkg/controller/jobs/pod/pod_webhook.go:104-199; its Deployment and StatefulSet integrations mark the pod
  template so their pods are gated too), or be made by the job controller for a Job (every Job in a tenant
  namespace is itself Kueue's, below). A tenant who adds the gate itself only hands the pod to Kueue. Only a
  controller may remove the gate (Kueue does, when it admits): a tenant may update its pods, and removing a
  scheduling gate is an allowed pod update.
- A Job must name a LocalQueue (`kueue.x-k8s.io/queue-name`; Kueue's Job webhook sets `default` on an unlabelled
  one before validation runs, pkg/controller/jobframework/defaults.go:60-98), except a child Job that a
  controller creates for a Kueue-managed parent (a JobSet): Kueue does not label those, it admits the parent
  (defaults.go:80-89, `IsOwnerManagedByKueueForObject`). The owner reference alone proves nothing: a tenant can
  write one naming its own JobSet, and Kueue then ignores the Job (its ancestor walk checks the owner's UID but
  calls same-namespace spoofing out of scope, pkg/controller/jobframework/reconciler.go:884-934). So the child
  Job must also come from a controller's identity.
- A Job or JobSet a tenant creates must be suspended (Kueue's webhooks suspend those they manage), and only a
  controller may unsuspend one: Kueue's Job webhook does not refuse a tenant's `suspend: false`
  (pkg/controller/jobs/job/job_webhook.go:195-224), and until Kueue re-suspends it the job controller makes pods.
- Priority: `kueue.x-k8s.io/priority-class` may name only the tenant's own tier or a lower one, on every kind the
  policy matches (Kueue copies a Deployment's or StatefulSet's label to the pods it gates); and the pod
  templates of every workload kind (Job, JobSet, Deployment, StatefulSet, LeaderWorkerSet) may name only such a
  tier as `priorityClassName`, because without the label Kueue takes
  the workload's priority from the pod template (pkg/controller/jobframework/reconciler.go:1716-1733): a Job
  naming `system-node-critical` would be queued and preempt at 2e9, then its pods refused by the priority guard.

"A controller": a service account outside the tenant namespaces that no tenant owns, kube-controller-manager's
own user (`--use-service-account-credentials=false`), or a cluster admin (`system:masters`); never a tenant owner
group or service account. Tenants cannot act as any of those.
"""

from __future__ import annotations

import json
from typing import Any

from gpupool.model import platform as m
from gpupool.model import queues as q
from gpupool.model.owners import Subject, parse_owner

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # pkg/controller/jobs/pod/constants/constants.go:24
POLICY = "gpupool-queue-policy"
GPU_PREFIX = "nvidia.com/"
# Kueue-managed parents whose controllers create child Jobs without a queue name (the frameworks the documented
# Kueue configuration enables; gpupool.k8s.kueue.CONFIGURATION).
JOB_PARENTS = (("jobset.x-k8s.io", "JobSet"),)
# The kinds matched: (API group, version, resources).
KINDS = (
    ("", "v1", ("pods",)),
    ("batch", "v1", ("jobs",)),
    ("apps", "v1", ("deployments", "statefulsets")),
    ("jobset.x-k8s.io", "v1alpha2", ("jobsets",)),
    ("leaderworkerset.x-k8s.io", "v1", ("leaderworkersets",)),
)


def _owner_identities(spec: m.Spec) -> tuple[list[str], list[str]]:
    """(groups, service-account user names) that own tenants: never a controller."""
    groups, users = set(), set()
    for tenant in spec.tenants:
        for owner in tenant.owners:
            s = parse_owner(owner)
            if isinstance(s, Subject) and s.kind == "ServiceAccount":
                users.add(f"system:serviceaccount:{s.namespace}:{s.name}")
            elif isinstance(s, Subject):
                groups.add(s.name)
    return sorted(groups), sorted(users)


def _controller_cel(spec: m.Spec) -> str:
    groups, users = _owner_identities(spec)
    namespaces = sorted({t.namespace for t in spec.tenants})
    u, g = "request.userInfo.username", "(has(request.userInfo.groups) ? request.userInfo.groups : [])"
    service_account = (
        f"({u}.startsWith('system:serviceaccount:') && "
        f"!{json.dumps(namespaces)}.exists(n, {u}.startsWith('system:serviceaccount:' + n + ':')) && "
        f"!({u} in {json.dumps(users)}))"
    )
    trusted = f"({u} == 'system:kube-controller-manager' || 'system:masters' in {g} || {service_account})"
    return f"{trusted} && !{g}.exists(x, x in {json.dumps(groups)})"


def _requests_gpu_cel(resources: list[str]) -> str:
    """CEL: whether any container of the pod (`object`) names a gated resource in its limits or requests."""
    gated = f"exists(r, r in {json.dumps(resources)} || r.startsWith('{GPU_PREFIX}'))"
    one = (
        f"(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.{gated}) || "
        f"(has(c.resources.requests) && c.resources.requests.{gated})))"
    )
    inits = "(has(object.spec.initContainers) ? object.spec.initContainers : [])"
    return f"(object.spec.containers + {inits}).exists(c, {one})"


def _gpu_pod_cel(spec: m.Spec) -> str:
    """CEL: whether the pod reaches GPUs: by a gated resource name, or (with DRA pools) by any ResourceClaim,
    since a tenant's claims can only name its granted GPU classes (gpupool.k8s.dra_policy)."""
    by_name = _requests_gpu_cel(q.gated_resources(spec))
    if not spec.dra_pools:
        return by_name
    return f"({by_name} || (has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0))"


# Kueue counts the devices of a pod's ResourceClaimTemplates (through deviceClassMappings) but skips a claim the pod
# names directly (kueue v0.19.2 pkg/dra/claims.go GetResourceRequestsForResourceClaimTemplates: `if
# prc.ResourceClaimTemplateName == nil { continue }`), so with DRA pools a tenant's pods and pod templates name
# templates only.
_NAMES_A_CLAIM = "has(s.resourceClaims) && s.resourceClaims.exists(c, has(c.resourceClaimName))"
DIRECT_CLAIM_VALIDATION = {
    "expression": f"(object.kind != 'Pod' || ![object.spec].exists(s, {_NAMES_A_CLAIM})) && "
    f"variables.templates.all(t, ![t.spec].exists(s, {_NAMES_A_CLAIM}))",
    "message": "with queueing, a pod reaches DRA devices through a ResourceClaimTemplate (resourceClaimTemplateName), "
    "which Kueue counts against the tenant's queue; Kueue does not count a ResourceClaim named directly "
    "(resourceClaimName)",
    "reason": "Forbidden",
}


# The pod templates of every kind the policy matches but pods: Kueue takes a workload's priority from them when
# no WorkloadPriorityClass is named (the pods of a Deployment or StatefulSet are also each checked by the
# priority guard, but refusing the template refuses the workload at once instead of leaving it without pods).
_TEMPLATES = (
    "object.kind == 'Job' || object.kind == 'Deployment' || object.kind == 'StatefulSet' ? "
    "[object.spec.template] : "
    "object.kind == 'JobSet' ? object.spec.replicatedJobs.map(r, r.template.spec.template) : "
    "object.kind == 'LeaderWorkerSet' ? [object.spec.leaderWorkerTemplate.workerTemplate] + "
    "(has(object.spec.leaderWorkerTemplate.leaderTemplate) ? [object.spec.leaderWorkerTemplate.leaderTemplate] : []) : "
    "[]"
)


def _variables(spec: m.Spec, allowed: str, tier_of: str) -> list[dict[str, str]]:
    gate = f"has(o.spec.schedulingGates) && o.spec.schedulingGates.exists(s, s.name == '{ADMISSION_GATE}')"
    parents = " || ".join(f"(o.apiVersion.startsWith('{group}/') && o.kind == '{kind}')" for group, kind in JOB_PARENTS)
    controlled_by = (
        "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
        "has(o.controller) && o.controller && ({what}))"
    )
    return [
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "controller", "expression": _controller_cel(spec)},
        {"name": "allowed", "expression": f"{tier_of} in {allowed} ? {allowed}[{tier_of}] : []"},
        {"name": "gpu", "expression": f"object.kind == 'Pod' && {_gpu_pod_cel(spec)}"},
        {"name": "gated", "expression": f"object.kind == 'Pod' && [object].exists(o, {gate})"},
        {
            "name": "wasGated",
            "expression": f"object.kind == 'Pod' && oldObject != null && [oldObject].exists(o, {gate})",
        },
        {"name": "ofJob", "expression": controlled_by.format(what="o.apiVersion == 'batch/v1' && o.kind == 'Job'")},
        {"name": "ofParent", "expression": controlled_by.format(what=parents)},
        {"name": "templates", "expression": _TEMPLATES},
        {
            "name": "suspended",
            "expression": "has(object.spec.suspend) && object.spec.suspend",
        },
        {
            "name": "wasSuspended",
            "expression": "oldObject != null && has(oldObject.spec.suspend) && oldObject.spec.suspend",
        },
    ]


def _validations() -> list[dict[str, str]]:
    job_or_set = "(object.kind == 'Job' || object.kind == 'JobSet')"
    return [
        {
            "expression": "!variables.gpu || request.operation != 'CREATE' || variables.gated || "
            "(variables.controller && variables.ofJob)",
            "message": "a pod asking for GPUs in a tenant namespace goes through Kueue: create it through a Job, "
            "JobSet, Deployment or StatefulSet, or as a pod Kueue holds with its scheduling gate "
            f"'{ADMISSION_GATE}' (Kueue's pod integration adds it; the tenant's LocalQueue is '{q.LOCAL_QUEUE}')",
            "reason": "Forbidden",
        },
        {
            "expression": "!variables.wasGated || variables.gated || variables.controller",
            "message": f"only Kueue removes the scheduling gate '{ADMISSION_GATE}', when it admits the pod",
            "reason": "Forbidden",
        },
        {
            "expression": f"object.kind != 'Job' || ('{QUEUE_NAME_LABEL}' in variables.labels && "
            f"variables.labels['{QUEUE_NAME_LABEL}'] != '') || (variables.controller && variables.ofParent)",
            "message": f"jobs in tenant namespaces go through Kueue: set the label {QUEUE_NAME_LABEL} "
            f"(the tenant's LocalQueue is '{q.LOCAL_QUEUE}')",
            "reason": "Forbidden",
        },
        {
            "expression": f"!{job_or_set} || variables.controller || "
            "(request.operation == 'CREATE' ? variables.suspended : (!variables.wasSuspended || variables.suspended))",
            "message": "a Job or JobSet in a tenant namespace starts suspended and only Kueue unsuspends it, when it "
            "admits it: leave spec.suspend to Kueue",
            "reason": "Forbidden",
        },
        {
            "expression": f"!('{PRIORITY_CLASS_LABEL}' in variables.labels) || "
            f"variables.labels['{PRIORITY_CLASS_LABEL}'] in variables.allowed",
            "message": f"{PRIORITY_CLASS_LABEL} may name only the tenant's own tier or a lower one",
            "reason": "Forbidden",
        },
        {
            "expression": "variables.templates.all(t, !has(t.spec.priorityClassName) || "
            "t.spec.priorityClassName == '' || t.spec.priorityClassName in variables.allowed)",
            "message": "a workload's priorityClassName may name only the tenant's own tier or a lower one "
            "(Kueue queues and preempts at that class's priority)",
            "reason": "Forbidden",
        },
    ]


def policy_objects(
    spec: m.Spec, allowed: dict[str, list[str]], labels: dict[str, str], tenant_label: str, tier_label: str
) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding (see the module docstring). `allowed`: per tier, the
    WorkloadPriorityClasses (and gpupool PriorityClasses) its tenants may name."""
    tier_of = f"namespaceObject.metadata.labels['{tier_label}']"
    rules = [
        {
            "apiGroups": [group],
            "apiVersions": [version],
            "resources": list(resources),
            "operations": ["CREATE", "UPDATE"],
        }
        for group, version, resources in KINDS
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            # Something being deleted must still lose its finalizers.
            "matchConditions": [{"name": "not-deleting", "expression": "!has(object.metadata.deletionTimestamp)"}],
            "variables": _variables(spec, json.dumps(allowed, sort_keys=True), tier_of),
            "validations": _validations() + ([DIRECT_CLAIM_VALIDATION] if spec.dra_pools else []),
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY, "labels": dict(labels)},
        "spec": {
            "policyName": POLICY,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchExpressions": [{"key": tenant_label, "operator": "Exists"}]}
            },
        },
    }
    return [policy, binding]
