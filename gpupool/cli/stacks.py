"""`gpupool stacks preview|up|destroy STACK`: the deploy path, on the Pulumi Automation API.

Runs the project's own program (Pulumi.yaml in the current directory or --project-dir) on STACK, and on
its tenant shard stacks when the spec is sharded, with dead-run recovery and the convergence check
(gpupool/deploy/stacks.py). One summary line per stack at the end.
Exit status: 0 = every stack succeeded (up: and converged), 1 = a stack failed, was locked by a live run,
did not converge or (destroy) does not exist, 2 = usage error (no project, no virtualenv, no backend, no
pulumi CLI). A failed stack is one `error:` line on stderr and a failed outcome in the summary (`-o json`
too); a usage error is the JSON error object of docs/cli.md under `-o json`.
"""

from __future__ import annotations

import argparse


def _config(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError("must be KEY=VALUE, e.g. gpupool:skipAwait=true")
    return key, val


def register(sub) -> None:
    p = sub.add_parser(
        "stacks",
        help="preview, up or destroy a platform's Pulumi stacks (recovery, shards, convergence check)",
        description="Preview, update or destroy STACK with the project's Pulumi program, and its tenant shard "
        "stacks (STACK.tenants-<k>) when the spec is sharded: the two-pass move when tenants change stacks, "
        "a dead run's stale lock and torn state recovered, `up` checked to converge "
        "(preview --expect-no-changes). The backend is $PULUMI_BACKEND_URL.",
    )
    p.add_argument("op", choices=("preview", "up", "destroy"), help="what to do")
    p.add_argument("stack", metavar="STACK", help="the platform stack (e.g. dev)")
    p.add_argument(
        "-c",
        "--config",
        action="append",
        type=_config,
        default=[],
        metavar="KEY=VALUE",
        help="set a stack config value first (repeatable), e.g. -c gpupool:skipAwait=true",
    )
    p.add_argument("--project-dir", metavar="DIR", default=None, help="the Pulumi project (default: find Pulumi.yaml)")
    p.add_argument(
        "--single-writer",
        action="store_true",
        default=None,
        help="nothing else updates these stacks (a CI concurrency group): a lock held from another host is "
        "then a dead run's and is cancelled ($GPUPOOL_SINGLE_WRITER=1)",
    )
    p.add_argument("--preview-out", metavar="FILE", help="also write the preview text to FILE (for the PR comment)")
    from gpupool.cli.common import add_output_format

    add_output_format(p, ("text", "json"), "text", help="the summary: text (default) or json")
    p.set_defaults(func=run)


def run(args) -> int:
    import os
    import sys
    from pathlib import Path

    from gpupool.cli.common import CommandError, UsageError

    try:
        from gpupool.deploy import stacks
    except ImportError as exc:  # the Pulumi SDK is the [pulumi] extra
        raise UsageError(f"gpupool stacks needs the Pulumi SDK: pip install 'gpupool[pulumi]' ({exc.name})") from None
    # First, before any pulumi command runs: pulumi's own error text may quote these (gpupool.redact).
    stacks.register_secrets(os.environ)
    backend = os.environ.get("PULUMI_BACKEND_URL", "")
    if not backend:
        raise UsageError("set PULUMI_BACKEND_URL to the state backend (docs/ci.md, 'State backend')")
    project = Path(args.project_dir) if args.project_dir else _find_project(Path.cwd())
    if project is None:
        raise UsageError("no Pulumi.yaml in the current directory or above (--project-dir DIR)")

    single = args.single_writer if args.single_writer is not None else os.environ.get("GPUPOOL_SINGLE_WRITER") == "1"
    preview_out = args.preview_out or os.environ.get("GPUPOOL_PREVIEW_OUT") or None
    settings = stacks.Settings(
        project_dir=project.resolve(),
        backend_url=backend,
        config=dict(args.config),
        single_writer=single,
        preview_out=Path(preview_out) if preview_out else None,
        output=lambda text: print(text, end="" if text.endswith("\n") else "\n", file=sys.stderr, flush=True),
    )
    try:
        platform = stacks.Platform(settings, args.stack)
    except stacks.SetupError as exc:
        raise UsageError(str(exc)) from None
    status = 0
    try:
        platform.run(args.op)
    except stacks.StackError as exc:
        if not platform.outcomes:  # no stack was reached (--preview-out refused): no summary to give
            raise CommandError(str(exc)) from None
        # The outcomes are still the answer (the failed stack is one of them, -o json included); the error
        # line says why in the words every command uses.
        print(f"error: {exc}", file=sys.stderr)
        status = 1
    print(stacks.as_json(platform.outcomes) if args.output == "json" else stacks.summary(platform.outcomes), end="")
    return status


def _find_project(start):
    for d in (start, *start.parents):
        if (d / "Pulumi.yaml").is_file():
            return d
    return None
