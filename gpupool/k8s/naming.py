"""Names and digests every stage of gpupool/k8s derives objects from (its own module: manifests.py and
rollout.py both use them, and neither may import the other back)."""

from __future__ import annotations

import hashlib

# File names are `<pulumi name>.yaml` and must stay within NAME_MAX (255 bytes); Pulumi names have no limit
# of their own, but URNs this long help nobody either.
MAX_OBJECT_NAME = 200


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bounded(name: str) -> str:
    """name, or when too long for a file name, a prefix of it plus a hash of the whole (still unique)."""
    if len(name.encode()) <= MAX_OBJECT_NAME:
        return name
    return name[: MAX_OBJECT_NAME - 17] + "-" + content_hash(name)
