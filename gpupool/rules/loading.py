"""GP0xx: problems found while reading the files and checking them against the JSON schema.

The loader (gpupool.spec.loader) and the schema check (gpupool.spec.schema) report these ids; they run
before any model exists, so the checks live there and only their documentation lives here. Their examples
are whole files (the bad-spec corpus in tests/bad_specs exercises each one).
"""

from __future__ import annotations

from gpupool.rules.registry import declare

YAML_SYNTAX = declare(
    "GP001",
    "the file is not valid YAML",
    """
A spec or tenant file the YAML parser cannot read (a syntax error, a character YAML forbids, values nested
too deeply). The position is the parser's.

Passes:
    tenants:
      - name: team-a
Fails:
    tenants:
      - name: team-a
     tier: standard
""",
)

UNREADABLE = declare(
    "GP002",
    "the file cannot be read",
    """
The file does not exist, is a directory, is not UTF-8 text, or the operating system refuses to read it.

Passes:
    gpupool validate stacks/dev/spec.yaml
Fails:
    gpupool validate stacks/dev/no-such-spec.yaml
""",
)

NO_MAPPING = declare(
    "GP003",
    "the file holds no YAML mapping",
    """
An empty file, or one holding only `null` or `~`: a spec and a tenant file are mappings.

Passes:
    name: team-a
    tier: standard
Fails:
    ~
""",
)

DUPLICATE_KEY = declare(
    "GP004",
    "a mapping key appears twice",
    """
PyYAML would keep the last value silently; gpupool reports the second key and where the first is.

Passes:
    nodePools:
      - name: l4
        gpusPerNode: 4
Fails:
    nodePools:
      - name: l4
        gpusPerNode: 4
        gpusPerNode: 8
""",
)

UNREADABLE_VALUE = declare(
    "GP005",
    "a value cannot be read",
    """
A YAML tag (`!env`, `!!binary`, `!!set`, `!!omap`; on a value, a list or a mapping, where it would
otherwise be dropped silently) or a value its tag's constructor rejects (`!!int 4x`): none of them means
anything in a spec. Numbers that are not finite are GP910. The message never repeats the value.

Passes:
    oversubscription:
      maxRatio: 1.5
Fails:
    oversubscription:
      maxRatio: !env RATIO
""",
)

ALIAS = declare(
    "GP006",
    "an alias or merge key cannot be used",
    """
An alias that refers to a value containing it (an endless loop), aliases that expand a file beyond
2,000,000 values, or a merge key `<<` that names something other than mappings.

Passes:
    base: &base {tier: standard}
    tenants:
      - <<: *base
        name: team-a
Fails:
    tenants: &all
      - name: team-a
        also: *all
""",
)

KEY_NOT_TEXT = declare(
    "GP007",
    "a mapping key is a list or a mapping",
    """
Spec keys are plain strings; YAML allows complex keys (`? [a, b]`), a spec never needs them.

Passes:
    labels:
      team: a
Fails:
    labels:
      ? [team, a]
      : b
""",
)

TENANT_FILES = declare(
    "GP008",
    "a tenantFiles entry matches nothing or cannot be used",
    """
Each `tenantFiles` entry names a directory of tenant files, a glob relative to the spec, or one file; an
entry matching nothing is an error (a typo would otherwise drop every tenant it meant).

Passes:
    tenantFiles: [tenants/]
Fails:
    tenantFiles: [teams/]   # no such directory
""",
)

SCHEMA = declare(
    "GP010",
    "the spec does not match its JSON schema",
    """
Unknown keys (with a did-you-mean hint), missing required keys, wrong types, values out of range, names
that are not DNS labels, quantities Kubernetes cannot parse. The schema is schemas/gpupool.schema.json
(`gpupool schema` prints it). The message never repeats the refused key or value (tenant files are untrusted
input): it is located by FILE:LINE:COL and its path, where a refused key is named by its position in its
mapping, counted from 0 (`tenants[inference].gpus[key 2]`).

Passes:
    cluster:
      gpuOperator: {chartVersion: v26.7.0}
Fails:
    cluster:
      gpuOprator: {chartVersion: v26.7.0}
""",
)
