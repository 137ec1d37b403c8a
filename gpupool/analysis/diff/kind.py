"""What happened to an item between BASE and HEAD: the one change kind tenants, configs, objects and pools share.

Kinds are StrEnums: they equal their JSON value ("added"), which json.dumps writes."""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
