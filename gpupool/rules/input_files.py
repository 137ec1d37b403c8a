"""Rules checked while the spec and its tenant files are read (gpupool.spec.loader reports them).

They decide what is read at all, so they cannot wait for the model: a tenant file outside the stack is never
opened, and a file that is not valid YAML has no data to check. The loader carries their ids as plain
strings (it must not import the rules); this module gives each its title and documentation. Like the GP0xx
rules, their examples are whole files or spec fragments, exercised by the bad-spec corpus.
"""

from __future__ import annotations

from gpupool.rules.registry import declare
from gpupool.spec import loader as L

declare(
    L.R_PATH_ESCAPES,
    "tenantFiles entries are relative paths inside the stack directory",
    """
Tenant files are untrusted input, and only files inside the stack directory (the spec's directory) are read.
An absolute entry, one starting with `~`, or one that climbs out with `..` is refused before anything is read.

Passes:
    tenantFiles: [tenants/]
Fails:
    tenantFiles: [../../home/ci/.aws/credentials]
""",
)

declare(
    L.R_OUTSIDE_STACK,
    "tenant files may not resolve outside the stack directory (symlinks)",
    """
A tenant file, or a directory of them, that is a symlink to somewhere outside the stack directory is refused
and never opened, so it is never quoted back either (think of a symlink to a credentials file whose parse
error would end up in a pull-request comment). The message names the link, not where it points. Copy the
file into the stack instead of linking it.

Passes:
    tenantFiles: [tenants/]   # tenants/research.yaml is a regular file
Fails:
    tenantFiles: [tenants/]   # tenants/research.yaml -> /etc/kubernetes/admin.conf
""",
)

declare(
    L.R_NUMBER,
    "numbers are finite; whole-number floats are integers",
    """
`.nan`, `.inf` and numbers too large for a float are refused where they are written. A float with no
fractional part (`8.0`, `4.0`, `1.0e3`) is read as the integer it equals, everywhere except inside
`cluster.gpuOperator.values` (passed to Helm as written), so a count written `8.0` means 8 and cannot crash
a later stage (plan, render).

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4.0, nodes: [gpu-l4-1]}
Fails:
    oversubscription: {maxRatio: .inf}
""",
)

declare(
    L.R_DISCOVERY,
    "a tenant directory holds only tenant files (what is skipped is reported)",
    """
A `tenantFiles` directory entry reads the `.yaml` and `.yml` files directly in it (the extension in any case,
so `team.YAML` is read) and ignores hidden files. Anything else it holds is reported as a warning, because a
tenant file nobody reads is a quota that silently disappears: a subdirectory (list it, or use a glob such as
`tenants/**/*.yaml`), files with another extension (`team.yaml.bak`, `team.json`) and dangling symlinks.

Passes:
    tenantFiles: [tenants/]   # tenants/research.yaml, tenants/notebooks.yml
Fails:
    tenantFiles: [tenants/]   # tenants/ml/vision.yaml is in a subdirectory
""",
)

declare(
    L.R_DOCUMENTS,
    "a file holds one YAML document",
    """
A spec file holds one spec and a tenant file one tenant. A leading `---`, and a trailing `---` with nothing
after it, are fine; a second document with content is an error (gpupool would otherwise have to pick one).

Passes:
    name: research
    tier: standard
    ---
Fails:
    name: research
    tier: standard
    ---
    name: notebooks
    tier: standard
""",
)
