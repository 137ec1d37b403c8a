"""`gpupool stacks preview|up|destroy STACK`: the deploy path, on the Pulumi Automation API.

Runs the project's own program (Pulumi.yaml in the current directory or --project-dir) on STACK, and on
its tenant shard stacks when the spec is sharded, with dead-run recovery and the convergence check
(gpupool/deploy/stacks.py). preview and up skip a stack whose inputs are unchanged since its last successful
up (gpupool/deploy/unchanged.py; `--all` runs every stack). One summary line per stack at the end.
Exit status: 0 = every stack succeeded (up: and converged), 1 = a stack failed, was locked by a live run,
did not converge or (destroy) does not exist, 2 = usage error (no project, no virtualenv, no backend, no
pulumi CLI), 130 = interrupted (Ctrl-C: pulumi and its plugins stopped, one line). A failed stack is one
`error:` line on stderr and a failed outcome in the summary (`-o json` too); a usage error is the JSON error
object of docs/reference/cli.md under `-o json`. `-c KEY=VALUE` is for the run only (gpupool.deploy.run_config) unless
--save-config.
"""

from __future__ import annotations

import argparse

INTERRUPTED = "interrupted; the stack's lock and state: see docs/howto/recover-failed-run.md"

# What every action needs, and what each does: `gpupool stacks OP --help` prints OP's own paragraph.
NEEDS = (
    "Needs: the pulumi CLI on PATH (https://www.pulumi.com/docs/install/); the state backend in "
    "$PULUMI_BACKEND_URL (file://, s3://, gs://, azblob://, or https://api.pulumi.com for Pulumi Cloud, "
    "logged in with `pulumi login` or $PULUMI_ACCESS_TOKEN); the stack's secrets passphrase in $PULUMI_CONFIG_PASSPHRASE or "
    "$PULUMI_CONFIG_PASSPHRASE_FILE (not needed with a cloud secrets provider); Pulumi.yaml in the current "
    "directory or above (--project-dir) with its virtualenv installed (.venv/bin/pip install -r requirements.txt); for preview and up "
    "a kubeconfig that reaches the cluster (gpupool:kubeconfig, else $KUBECONFIG or ~/.kube/config)."
)
ACTIONS = {
    "preview": "gpupool stacks preview STACK: show what `up` would change (pulumi preview --diff), on STACK and "
    "its shard stacks; changes nothing in the cluster or the state. A stack that does not exist yet is created "
    "empty (a first deploy's pull request). An invalid spec stops here, each error printed once. "
    "--preview-out FILE keeps the text for the pull-request comment. --refresh reads the cluster first (pulumi "
    "refresh --preview-only, nothing written), so the preview also shows drift (objects deleted or edited behind gpupool's back, which the next up "
    "restores); CI's pull-request preview uses it. A stack whose inputs are unchanged since its last successful up "
    "is skipped, as by up.",
    "up": "gpupool stacks up STACK: deploy STACK (and its shard stacks, in the order tenant moves need): a "
    "dead run's stale lock cancelled and its torn state repaired, `pulumi refresh` (the cluster read "
    "into the state, so drift is repaired: a namespace deleted by hand comes back), `pulumi up`, then the "
    "convergence check (preview --expect-no-changes): `converged` means the cluster matches the spec. A stack "
    "whose inputs (the gpupool version, its config, the objects it registers) are unchanged since its last "
    "successful up, recorded in its stack tag gpupool:inputs, is skipped and says so; --all runs every stack "
    "(a scheduled `up --all --refresh` repairs what was changed by hand). --no-refresh "
    "skips both reads (faster on a large platform; the summary then says the cluster was not read). Ctrl-C stops pulumi gracefully (SIGINT, then SIGTERM) and exits 130: "
    "then see docs/howto/recover-failed-run.md.",
    "destroy": "gpupool stacks destroy STACK: delete everything STACK and its shard stacks manage (shards "
    "first). Only an existing stack: an unknown name is an error naming the stacks there, and nothing is "
    "created. The stacks themselves stay in the backend (`pulumi stack rm` removes them). Nothing is skipped.",
}


class _ActionHelp(argparse.Action):
    """-h/--help after the action (`gpupool stacks up --help`): that action's help, not the generic one."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        op = getattr(namespace, "op", None)
        if op in ACTIONS:
            parser.description = f"{ACTIONS[op]}\n\n{NEEDS}"
        parser.print_help()
        parser.exit()


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
        f"(preview --expect-no-changes). `gpupool stacks OP --help` says what OP does.\n\n{NEEDS}",
        formatter_class=_Paragraphs,
        add_help=False,
    )
    p.add_argument("-h", "--help", action=_ActionHelp, help="show this help (after OP: that action's) and exit")
    p.add_argument("op", choices=("preview", "up", "destroy"), help="what to do")
    p.add_argument("stack", metavar="STACK", help="the platform stack (e.g. dev)")
    p.add_argument(
        "-c",
        "--config",
        action="append",
        type=_config,
        default=[],
        metavar="KEY=VALUE",
        help="a stack config value for this run (repeatable), e.g. -c gpupool:skipAwait=true; the stack file "
        "(Pulumi.STACK.yaml) is left as it is unless --save-config",
    )
    p.add_argument(
        "--save-config",
        action="store_true",
        help="write the -c values into the stack file (pulumi config set) before the run, for the team to "
        "commit; an empty VALUE removes KEY from it",
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
    p.add_argument(
        "--refresh",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="read every managed object back from the cluster before planning, so drift is seen (preview) and "
        "repaired (up); default: on for up (and its convergence check), off for preview and destroy",
    )
    p.add_argument(
        "--all",
        dest="all_stacks",
        action="store_true",
        help="preview or up every stack, also those whose inputs are unchanged since their last successful up "
        "(skipped otherwise); destroy takes every stack anyway",
    )
    from gpupool.cli.common import add_output_format

    add_output_format(p, ("text", "json"), "text", help="the summary: text (default) or json")
    p.set_defaults(func=run)


class _Paragraphs(argparse.RawDescriptionHelpFormatter):
    """Descriptions wrapped paragraph by paragraph (argparse's default joins them into one)."""

    def _fill_text(self, text, width, indent):
        import textwrap

        return "\n\n".join(
            textwrap.fill(par, width, initial_indent=indent, subsequent_indent=indent) for par in text.split("\n\n")
        )


def run(args) -> int:
    import os
    import signal
    import sys
    from pathlib import Path

    from gpupool.cli.common import CommandError, UsageError

    try:
        from gpupool.deploy import secret_env, stacks
    except ImportError as exc:  # the Pulumi SDK is the [pulumi] extra
        raise UsageError(f"gpupool stacks needs the Pulumi SDK: pip install 'gpupool[pulumi]' ({exc.name})") from None
    # First, before any pulumi command runs: pulumi's own error text may quote these (gpupool.redact).
    secret_env.register_secrets(os.environ)
    secret_env.register_config_secrets(dict(args.config))
    backend = os.environ.get("PULUMI_BACKEND_URL", "")
    if not backend:
        raise UsageError("set PULUMI_BACKEND_URL to the state backend (docs/howto/ci.md, 'State backend')")
    project = Path(args.project_dir) if args.project_dir else _find_project(Path.cwd())
    if project is None:
        raise UsageError("no Pulumi.yaml in the current directory or above (--project-dir DIR)")

    single = args.single_writer if args.single_writer is not None else os.environ.get("GPUPOOL_SINGLE_WRITER") == "1"
    preview_out = args.preview_out or os.environ.get("GPUPOOL_PREVIEW_OUT") or None
    settings = stacks.Settings(
        project_dir=project.resolve(),
        backend_url=backend,
        config=dict(args.config),
        save_config=args.save_config,
        single_writer=single,
        preview_out=Path(preview_out) if preview_out else None,
        refresh=args.refresh,
        all_stacks=args.all_stacks,
        output=lambda text: print(text, end="" if text.endswith("\n") else "\n", file=sys.stderr, flush=True),
    )
    try:
        platform = stacks.Platform(settings, args.stack)
    except stacks.SetupError as exc:
        raise UsageError(str(exc)) from None
    status = 0
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    try:
        platform.run(args.op)
    except KeyboardInterrupt:
        # pulumi and its plugins are stopped by now (gpupool.deploy.pulumi_process); one line, not a traceback
        print(INTERRUPTED, file=sys.stderr, flush=True)
        return 130
    except stacks.StackError as exc:
        if not platform.outcomes:  # no stack was reached (--preview-out refused): no summary to give
            raise CommandError(str(exc)) from None
        # The outcomes are still the answer (the failed stack is one of them, -o json included); the error
        # line says why in the words every command uses.
        print(f"error: {exc}", file=sys.stderr)
        status = 1
    finally:
        signal.signal(signal.SIGINT, previous)
    print(stacks.as_json(platform.outcomes) if args.output == "json" else stacks.summary(platform.outcomes), end="")
    return status


def _find_project(start):
    for d in (start, *start.parents):
        if (d / "Pulumi.yaml").is_file():
            return d
    return None
