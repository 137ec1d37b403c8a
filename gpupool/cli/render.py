"""`gpupool render SPEC --output-dir DIR`: the stack's Kubernetes objects as YAML, no engine, no cluster."""

from __future__ import annotations

import sys
from pathlib import Path

from gpupool.cli.common import CommandError, UsageError, add_spec_argument, spec_path, valid_spec_or_report
from gpupool.k8s.delivery import DEFAULT_MODE, MODES, VALUES_FILE


def register(sub) -> None:
    p = sub.add_parser(
        "render",
        help="write every desired object as YAML (no cluster, no Pulumi engine)",
        description="Write one YAML file per desired object into DIR: exactly what the Pulumi components "
        "register, as plain Kubernetes objects for kubectl, Argo CD or Flux. gpupool records what "
        "it wrote in DIR/.gpupool-render and only ever replaces or removes those files; a "
        "non-empty DIR that holds no previous render is refused unless you pass --force. The new "
        "render replaces the old one as a whole: a failure leaves the previous render intact.",
    )
    add_spec_argument(p)
    p.add_argument(
        "--output-dir",
        required=True,
        metavar="DIR",
        help="directory to write (created if missing); '-' writes one YAML stream to stdout",
    )
    p.add_argument(
        "--operator",
        choices=MODES,
        default=DEFAULT_MODE,
        help="how the GPU Operator chart is written: a Flux HelmRepository + HelmRelease "
        f"(default), an Argo CD Application, or only {VALUES_FILE} for `helm install -f`",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="read this cluster's nodes and MIG ConfigMap and keep in the render the old MIG configs nodes still "
        "carry, as `pulumi up` does (default: no cluster is read; the render holds the spec's configs only)",
    )
    p.add_argument("--context", metavar="NAME", help="the kubeconfig context to read (with --kubeconfig)")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty directory that holds no previous render (its files are kept)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    if args.context and not args.kubeconfig:
        raise UsageError("--context needs --kubeconfig (render reads no cluster without it)")
    if not args.output_dir.strip():
        raise UsageError(
            "--output-dir needs a directory (or '-' for stdout); an empty value would mean the current directory"
        )
    from gpupool.k8s import manifests, mig_in_use, render
    from gpupool.k8s.delivery import DeliveryError

    spec = valid_spec_or_report(spec_path(args), "invalid, nothing rendered")
    if spec is None:
        return 1
    kubeconfig = args.kubeconfig
    if kubeconfig is not None:
        # A path, never contents (which the library also takes): absolute, so that none reads as contents.
        if "\n" in kubeconfig or not kubeconfig.strip():
            raise UsageError("--kubeconfig takes the path of a kubeconfig file")
        try:
            kubeconfig = str(Path(kubeconfig).expanduser().absolute())
        except RuntimeError:  # ~user of no such user
            raise UsageError("--kubeconfig: no such user's home directory") from None
    try:
        kept = mig_in_use.read_kept_for(spec, kubeconfig, args.context) if kubeconfig else None
        kept_plugin = mig_in_use.read_kept_plugin_for(spec, kubeconfig, args.context) if kubeconfig else None
    except mig_in_use.LiveReadError as exc:
        # One line naming the file and field, never a credential (gpupool.k8s.kubeconfig); nothing written.
        raise CommandError(f"{exc}; nothing was changed") from None
    plan = manifests.build(spec, kept, kept_plugin)
    try:
        if args.output_dir == "-":
            sys.stdout.write(render.stream(plan, args.operator))
            return 0
        documents = render.render_documents(plan, args.operator)
    except DeliveryError as exc:
        raise UsageError(str(exc)) from None
    try:
        render.write(documents, Path(args.output_dir), force=args.force)
    except render.RenderError as exc:
        print(f"gpupool render: error: {exc}{'' if exc.partial else '; nothing was changed'}", file=sys.stderr)
        return 1
    print(f"wrote {len(documents)} file{'' if len(documents) == 1 else 's'} to {args.output_dir}")
    return 0
