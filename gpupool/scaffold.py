"""The files of a platform team's own gpupool repository (`gpupool init DIR`): a Pulumi project whose program
is `gpupool.pulumi.GpuPlatform`, one stack with a spec and one tenant, the schemas for editors, the CI
workflow on `gpupool stacks`, and a README with the steps. Pure data; gpupool/cli/init.py writes it.
"""

from __future__ import annotations

import json
import re

PLATFORM_NAME = "gpu"  # the GpuPlatform of the scaffolded program (every resource is named after it)


def project_name(directory_name: str) -> str:
    """A Pulumi project name from the directory's name (letters, digits, `-_.`; never empty)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", directory_name).strip("-.") or "gpu-platform"
    return name[:100]


PULUMI_YAML = """\
name: {project}
description: The GPU platform of our clusters, from one validated gpupool spec per stack.
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: .venv          # .venv/bin/pip install -r requirements.txt (docs/howto/install.md)
stackConfigDir: stacks
# Stack config (stacks/Pulumi.<stack>.yaml) is in gpupool's namespace: gpupool:spec (required),
# gpupool:kubeconfig, gpupool:context, gpupool:operatorChartPath, gpupool:skipAwait, gpupool:keepMigConfigsInUse.
# A `config:` block here would declare keys in this project's namespace instead, and Pulumi would then require
# a project-namespaced spec the program never reads.
"""

MAIN_PY = '''\
"""Our GPU platform: one gpupool GpuPlatform per stack, from the stack's config (stacks/Pulumi.<stack>.yaml).

`gpupool stacks preview|up|destroy STACK` runs this program (and a sharded platform's shard stacks);
`pulumi up --stack STACK` does too on an unsharded stack.
"""

from gpupool.pulumi import GpuPlatform, GpuPlatformArgs

GpuPlatform("{platform}", GpuPlatformArgs.from_config()).export()
'''


# requirements.txt: what the Pulumi program needs (pip installs it into .venv, Pulumi.yaml's virtualenv), written
# to match how the gpupool that ran `gpupool init` was installed (its direct_url.json, PEP 610; `requirements`).
_REQUIREMENTS_HEAD = """\
# What the Pulumi program needs: `.venv/bin/pip install -r requirements.txt` (and the CI workflow) installs it. gpupool brings
# the Pulumi SDKs it supports.
{how}
# To install gpupool another way, replace the requirement below with one of (docs/howto/install.md):
#   gpupool[pulumi]=={version}                                          a package index (PyPI or your own)
#   gpupool[pulumi] @ git+https://HOST/ORG/gpupool.git@v{version}        a Git tag
#   ./vendor/gpupool-{version}-py3-none-any.whl[pulumi]                 a wheel committed to this repository
"""
# PEP 610 ("url" field): a direct URL's user:password may be kept only when it names environment variables
# (pip expands ${VAR} in requirement files) or is a well-known non-secret such as `git` in ssh://git@host/...;
# anything else is treated as a credential and never written.
_SAFE_USERINFO = re.compile(r"\$\{[A-Za-z0-9_-]+\}(:\$\{[A-Za-z0-9_-]+\})?|git")
_WHEEL_NAME = re.compile(r"gpupool-[A-Za-z0-9_.+!-]+\.(whl|tar\.gz|zip)")
_COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")


def requirements(version: str, direct_url: dict | None) -> str:
    """requirements.txt for a gpupool VERSION installed as DIRECT_URL says (the installed distribution's
    direct_url.json; None when it came from a package index): the same source, pinned, with a comment saying
    how it was chosen and how to change it. It never holds a path outside the repository (a wheel file
    becomes ./vendor/<its name>, to be copied there) nor a URL's credentials."""
    source = _direct_source(direct_url, version)
    if source is None:
        how = (
            "It came from a package index, so it is pinned from one (pip's index: PyPI or PIP_INDEX_URL)."
            if direct_url is None
            else "It came from a direct URL that is not written here; pinned from an index instead."
        )
        line = f"gpupool[pulumi]=={version}"
    else:
        how, line = source
    import textwrap

    how = "\n".join(textwrap.wrap(how, 110, initial_indent="# ", subsequent_indent="# "))
    return _REQUIREMENTS_HEAD.format(how=how, version=version) + line + "\n"


def _direct_source(direct_url: dict | None, version: str) -> tuple[str, str] | None:
    """(the comment, the requirement) for a direct URL install, or None for an index install or anything
    that cannot be written safely (then the index pin is the honest default)."""
    if not isinstance(direct_url, dict) or not isinstance(direct_url.get("url"), str):
        return None
    from urllib.parse import urlsplit, urlunsplit

    url = direct_url["url"]
    if any(c.isspace() or ord(c) < 32 or c in "#\\\"'" for c in url) or len(url) > 2000:
        return None  # one line of requirements.txt, nothing an option could hide in
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return None
    vcs = direct_url.get("vcs_info")
    archive = direct_url.get("archive_info")
    if parts.scheme == "file":
        return _local_source(parts.path, direct_url, version)
    info = parts.netloc.rpartition("@")[0]
    userinfo = f"{info}@" if info and _SAFE_USERINFO.fullmatch(info) else ""  # else a credential: dropped
    # The query is dropped too: a presigned URL's signature or a ?token= is a credential.
    clean = urlunsplit((parts.scheme, f"{userinfo}{host}{port}", parts.path, "", ""))
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str) and re.fullmatch(r"git|hg|svn|bzr", vcs["vcs"]):
        commit = vcs.get("commit_id")
        if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
            return None
        asked = vcs.get("requested_revision")
        asked_note = (
            f" (asked for as {asked}: a tag can be written instead of the commit)"
            if isinstance(asked, str) and re.fullmatch(r"[A-Za-z0-9._/-]{1,100}", asked) and asked != commit
            else ""
        )
        return (
            f"gpupool was installed from {vcs['vcs']}, pinned here to the commit it was installed from{asked_note}.",
            f"gpupool[pulumi] @ {vcs['vcs']}+{clean}@{commit}",
        )
    if parts.scheme in ("https", "http") and isinstance(archive, dict):
        hashes = archive.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        fragment = f"#sha256={sha}" if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else ""
        return (
            "gpupool was installed from this URL, pinned here with its hash when pip recorded one.",
            f"gpupool[pulumi] @ {clean}{fragment}",
        )
    return None


def _local_source(path: str, direct_url: dict, version: str) -> tuple[str, str]:
    """A file: URL: a wheel or sdist file becomes a vendored-file hint (its name only, under ./vendor/); a
    directory or a local clone has no address another machine can use, so the index pin."""
    if isinstance(direct_url.get("vcs_info"), dict) or isinstance(direct_url.get("dir_info"), dict):
        return (
            "gpupool was installed from a local directory, which no other machine has: pinned from an index here; "
            "vendor a wheel or use a Git URL if gpupool is not on your index.",
            f"gpupool[pulumi]=={version}",
        )
    name = path.rsplit("/", 1)[-1]
    if not _WHEEL_NAME.fullmatch(name):
        name = f"gpupool-{version}-py3-none-any.whl"
    return (
        f"gpupool was installed from a wheel file: copy {name} into vendor/ and commit it (a vendored wheel), "
        "or pin it from an index or a Git URL instead.",
        f"./vendor/{name}[pulumi]",
    )


STACK_CONFIG = """\
config:
  gpupool:spec: stacks/{stack}/spec.yaml
  # gpupool:context: my-cluster        # the kubeconfig context (default: the current one)
"""

SPEC = """\
# yaml-language-server: $schema=../../schemas/gpupool.schema.json
# The {stack} stack. Every field is in gpupool's docs/reference/spec-reference.md; `gpupool validate
# stacks/{stack}/spec.yaml` checks this file, `gpupool plan stacks/{stack}/spec.yaml` shows its capacity.
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform

cluster:
  name: {stack}
  gpuOperator:
    chartVersion: v26.7.0        # pinned; bump it in its own pull request
    namespace: gpu-operator

nodePools:
  # Replace with your nodes: the GPU model, GPUs per node, and the node names (or nodeSelector + nodeCount
  # for a node group). This pool time-slices each L4 four ways.
  - name: l4-shared
    gpu: L4
    gpusPerNode: 4
    nodes: [{stack}-gpu-1]
    sharing:
      timeSlicing:
        replicas: 4

tiers:
  - name: standard
    priority: 10000

tenantFiles:
  - tenants/
"""

TENANT = """\
# yaml-language-server: $schema=../../../schemas/tenant.schema.json
# One team: its namespace, GPU quota and owners. Onboarding another is one new file
# (`gpupool tenant new NAME --tier standard --gpus gpu.shared=4 --stack {stack}`).
name: team-a
tier: standard
gpus:
  nvidia.com/gpu.shared: 4
owners: [team-a-admins]
costCenter: cc-0001
"""

GITIGNORE = """\
.venv/
__pycache__/
/out/
# gpupool stacks hands the spec it validated to its programs here, and removes it when it ends
/.gpupool/
"""

WORKFLOW = """\
# gpupool CI: validate every pull request (annotations on the changed lines), post the diff as a sticky
# comment and preview the stacks it changes; `gpupool stacks up` of the changed stacks on pushes to main, of
# every stack nightly (drift). The secrets it reads: gpupool's docs/howto/ci.md.
name: gpupool

on:
  pull_request:
  push:
    branches: [main]
  schedule:
    - cron: "17 3 * * *"   # nightly: --all --refresh puts back what was changed by hand

permissions:
  contents: read
  pull-requests: write   # the diff comment

jobs:
  plan:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        stack: [{stack}]
    env:
      SPEC: stacks/${{{{ matrix.stack }}}}/spec.yaml
      PULUMI_CONFIG_PASSPHRASE: ${{{{ secrets[format('PULUMI_CONFIG_PASSPHRASE_{{0}}', matrix.stack)] }}}}
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0   # gpupool diff --base reads the base branch
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install gpupool
        run: |
          python -m venv .venv
          .venv/bin/pip install -r requirements.txt
          echo "$PWD/.venv/bin" >> "$GITHUB_PATH"
      - name: gpupool validate
        id: validate
        continue-on-error: true
        run: gpupool validate "$SPEC" -o github
      - name: gpupool diff
        id: diff
        env:
          BASE_REF: ${{{{ github.base_ref }}}}
        run: |
          set +e
          rm -f gpupool-diff.md gpupool-diff-full.md pulumi-preview.txt   # a link planted at a name `>` writes to
          gpupool diff --base "origin/$BASE_REF" "$SPEC" -o markdown --full-output gpupool-diff-full.md > gpupool-diff.md
          echo "status=$?" >> "$GITHUB_OUTPUT"
      - name: Post the diff
        if: always() && hashFiles('gpupool-diff.md') != ''
        uses: marocchino/sticky-pull-request-comment@v2
        with:
          header: gpupool-diff-${{{{ matrix.stack }}}}
          path: gpupool-diff.md
      - name: Kubeconfig
        env:
          KUBECONFIG_DATA: ${{{{ secrets[format('PREVIEW_KUBECONFIG_{{0}}', matrix.stack)] }}}}
        run: |
          printf '%s' "$KUBECONFIG_DATA" > "$RUNNER_TEMP/kubeconfig"
          echo "KUBECONFIG=$RUNNER_TEMP/kubeconfig" >> "$GITHUB_ENV"
      - uses: pulumi/actions@v6
        with:
          pulumi-version: 3.274.1
      - name: gpupool stacks preview
        id: preview
        env:
          STACK: ${{{{ matrix.stack }}}}
          PULUMI_BACKEND_URL: ${{{{ vars.PULUMI_BACKEND_URL }}}}
        # the stacks whose inputs changed since their last up; --refresh: shows their drift
        run: gpupool stacks preview "$STACK" --refresh --preview-out pulumi-preview.txt
      - name: Fail on an invalid spec, negative headroom or a failed preview
        if: always() && (steps.validate.outcome == 'failure' || steps.diff.outputs.status != '0' || steps.preview.outcome == 'failure')
        run: exit 1

  up:
    if: (github.event_name == 'push' && github.ref == 'refs/heads/main') || github.event_name == 'schedule'
    runs-on: ubuntu-latest
    timeout-minutes: 60
    strategy:
      fail-fast: false
      max-parallel: 1
      matrix:
        stack: [{stack}]
    environment: ${{{{ matrix.stack }}}}
    concurrency:
      group: gpupool-up-${{{{ matrix.stack }}}}   # one run per stack: a lock met at the start is a dead run's
      cancel-in-progress: false
    env:
      PULUMI_CONFIG_PASSPHRASE: ${{{{ secrets.PULUMI_CONFIG_PASSPHRASE }}}}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install gpupool
        run: |
          python -m venv .venv
          .venv/bin/pip install -r requirements.txt
          echo "$PWD/.venv/bin" >> "$GITHUB_PATH"
      - name: Kubeconfig
        env:
          KUBECONFIG_DATA: ${{{{ secrets.KUBECONFIG }}}}
        run: |
          printf '%s' "$KUBECONFIG_DATA" > "$RUNNER_TEMP/kubeconfig"
          echo "KUBECONFIG=$RUNNER_TEMP/kubeconfig" >> "$GITHUB_ENV"
      - uses: pulumi/actions@v6
        with:
          pulumi-version: 3.274.1
      - name: gpupool stacks up
        env:
          STACK: ${{{{ matrix.stack }}}}
          PULUMI_BACKEND_URL: ${{{{ vars.PULUMI_BACKEND_URL }}}}
        # refreshes first: drift repaired, converged = cluster; a push runs the stacks whose inputs changed
        run: |
          if [ "$GITHUB_EVENT_NAME" = schedule ]; then
            gpupool stacks up "$STACK" --single-writer --all --refresh
          else
            gpupool stacks up "$STACK" --single-writer
          fi
"""

README = """\
# {project}

Our GPU platform, declared with gpupool: one validated spec per stack
(`stacks/<stack>/spec.yaml`), one file per tenant (`stacks/<stack>/tenants/`).

## Start

```sh
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt   # its comment: where gpupool comes from
export PATH="$PWD/.venv/bin:$PATH"
gpupool validate stacks/{stack}/spec.yaml      # FILE:LINE:COL: error: PATH: MESSAGE [GP123]
gpupool plan stacks/{stack}/spec.yaml          # capacity, grants and headroom
export PULUMI_BACKEND_URL=s3://my-bucket/gpupool PULUMI_CONFIG_PASSPHRASE=...
gpupool stacks preview {stack}
gpupool stacks up {stack}                       # then a preview that must plan nothing
```

## Onboarding a team

```sh
gpupool tenant new vision --tier standard --gpus gpu.shared=4 --stack {stack}
```

Fill in its owners and cost centre, open a pull request: CI validates it and comments the diff (quota,
headroom). Merging deploys it.

## CI

`.github/workflows/gpupool.yml`: on pull requests validate, diff and preview; on pushes to main
`gpupool stacks up` (the stacks whose inputs changed); nightly `gpupool stacks up --all --refresh` (every
stack: drift). It needs `vars.PULUMI_BACKEND_URL`, the secrets `PULUMI_CONFIG_PASSPHRASE`,
`KUBECONFIG` (per environment) and `PREVIEW_KUBECONFIG_<STACK>`, `PULUMI_CONFIG_PASSPHRASE_<STACK>`
(repository).
"""


def files(project: str, version: str, stack: str = "dev", direct_url: dict | None = None) -> dict[str, str]:
    """Relative path -> content of the scaffolded repository; DIRECT_URL is how gpupool was installed
    (`requirements`)."""
    from pathlib import Path

    from gpupool.spec.schema import SCHEMA_DIR  # the schemas the installed gpupool validates with

    schemas = {
        f"schemas/{name}": (Path(SCHEMA_DIR) / name).read_text(encoding="utf-8")
        for name in ("gpupool.schema.json", "tenant.schema.json")
    }
    for text in schemas.values():
        json.loads(text)  # shipped with the package: a broken one is a gpupool bug, not the user's
    out = {
        "Pulumi.yaml": PULUMI_YAML.format(project=project),
        "__main__.py": MAIN_PY.format(platform=PLATFORM_NAME),
        "requirements.txt": requirements(version, direct_url),
        f"stacks/Pulumi.{stack}.yaml": STACK_CONFIG.format(stack=stack),
        f"stacks/{stack}/spec.yaml": SPEC.format(stack=stack),
        f"stacks/{stack}/tenants/team-a.yaml": TENANT.format(stack=stack),
        ".github/workflows/gpupool.yml": WORKFLOW.format(stack=stack),
        ".gitignore": GITIGNORE,
        "README.md": README.format(project=project, stack=stack),
    }
    out.update(schemas)
    return out
