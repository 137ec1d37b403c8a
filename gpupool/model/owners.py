"""Tenant owners: who is bound to the tenant's role, and as which kind of RBAC subject.

An owner is written as one string:
  NAME or group:NAME             a group (as the authenticator reports it, e.g. an OIDC group)
  serviceaccount:NAMESPACE:NAME  a ServiceAccount (CI deployers, operators acting for the team)
Groups are the default form because people are onboarded through their identity provider's groups.
The explicit `group:` prefix is there for group names that themselves contain a colon.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP_PREFIX = "group:"
SERVICE_ACCOUNT_PREFIX = "serviceaccount:"
SYSTEM_PREFIX = "system:"  # Kubernetes' own identities: system:authenticated, system:masters, ...
OWNER_ROLES = ("admin", "edit", "view")  # Kubernetes' aggregated user-facing ClusterRoles
DEFAULT_OWNER_ROLE = "edit"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Subject:
    kind: str  # "Group" or "ServiceAccount"
    name: str
    namespace: str | None = None  # ServiceAccounts only

    def rbac(self) -> dict[str, str]:
        """The RoleBinding subject."""
        if self.kind == "ServiceAccount":
            return {"kind": "ServiceAccount", "name": self.name, "namespace": self.namespace or ""}
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": self.kind, "name": self.name}


def parse_owner(owner: str) -> Subject | str:
    """The subject an owner string names, or why it names none (a message that says what would be right)."""
    lowered = owner.lower()
    if lowered.startswith(SYSTEM_PREFIX) or lowered.startswith(GROUP_PREFIX + SYSTEM_PREFIX):
        if lowered.startswith("system:serviceaccount:"):
            return (
                "is a Kubernetes user name, and would be bound as a group that matches nobody; "
                'write the service account as "serviceaccount:NAMESPACE:NAME" (without the "system:" prefix)'
            )
        return (
            f'is one of Kubernetes\' built-in "{SYSTEM_PREFIX}" identities (such as system:authenticated, '
            "every signed-in user, or system:serviceaccounts, every service account); it would make far more "
            "than a team owner of this namespace. Name the team's own group"
        )
    if owner.startswith(SERVICE_ACCOUNT_PREFIX):
        parts = owner[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
        if len(parts) != 2:
            return 'names a service account as "serviceaccount:NAMESPACE:NAME" (two parts after the prefix)'
        namespace, name = parts
        if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
            return (
                "has a service-account namespace that is not a namespace name (lowercase letters, digits "
                "and '-', at most 63 characters)"
            )
        if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
            return (
                "has a service-account name that Kubernetes would reject (lowercase letters, digits, '-' "
                "and '.', at most 253 characters)"
            )
        return Subject("ServiceAccount", name, namespace)
    if lowered.startswith(("serviceaccount:", "serviceaccounts:", "sa:", "service-account:")):
        return 'looks like a service account; write it as "serviceaccount:NAMESPACE:NAME" (lowercase prefix)'
    name = owner[len(GROUP_PREFIX) :] if owner.startswith(GROUP_PREFIX) else owner
    if not name.strip() or name != name.strip():
        return "is not a group name: it is empty or has leading or trailing spaces"
    return Subject("Group", name)
