"""Semantic validation as a registry of rules with ids (see gpupool.rules.registry).

Importing this package imports every rule module, which registers its rules. Add a new module to
RULE_MODULES when you add one.
"""

from __future__ import annotations

import importlib

RULE_MODULES: tuple[str, ...] = (
    "loading",
    "cluster",
    "pools",
    "dra",
    "gpu_models",
    "sharing",
    "tiers",
    "tenants",
    "placeholders",
    "capacity",
    "operator_env",
    "input_files",
    "security",
    "names",
    "admission",
    "bounds",
    "monitoring",
    "queueing",
)

for _name in RULE_MODULES:
    importlib.import_module(f"gpupool.rules.{_name}")
