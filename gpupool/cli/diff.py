"""`gpupool diff BASE HEAD` / `gpupool diff --base GIT_REF [HEAD]`: what a spec change does, tenant first.

Exit status: 0 = HEAD is valid and every resource keeps non-negative headroom under the oversubscription
policy; 1 = HEAD is invalid (its diagnostics are printed, FILE:LINE:COL) or leaves negative headroom;
2 = usage error (missing file, not a git repository, unknown ref). With `--exit-code`, a valid HEAD that
changes something exits 3 instead of 0 (as `terraform plan -detailed-exitcode` and `kubectl diff` signal
changes; 1 and 2 are taken by the project-wide convention). An invalid BASE is reported, and the diff still
shows what it can; HEAD alone gates.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.cli.common import CommandError, UsageError

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side

FORMATS = ("text", "markdown", "json")
EXIT_CHANGES = 3
PREVIEW_LIMIT = 64 << 20  # a `pulumi preview --diff` text; the comment shows at most 65,536 characters of it


def register(sub) -> None:
    p = sub.add_parser(
        "diff",
        help="tenant-centric diff of two specs, or of the working tree against a git ref",
        description="Compare two specs (BASE HEAD), or the working tree's spec with the same spec at a git ref "
        "(--base REF [HEAD]; HEAD defaults to $GPUPOOL_SPEC or ./spec.yaml): tenants added, removed "
        "and changed with quota deltas, headroom per resource, MIG re-layouts (and the nodes whose GPU "
        "workloads are evicted), config entries as unified diffs and the rendered objects that change. "
        "Exit 0 = HEAD valid with non-negative headroom, 1 = HEAD invalid or over capacity, "
        "2 = usage error, 3 = (with --exit-code) HEAD valid and something changes.",
    )
    p.add_argument("specs", nargs="*", metavar="SPEC", help="BASE HEAD, or only HEAD with --base")
    p.add_argument("--base", metavar="GIT_REF", help="compare HEAD with the same spec (and tenant files) at this ref")
    from gpupool.cli.common import add_output_format

    add_output_format(
        p, FORMATS, "text", "text (default), markdown (the pull-request comment) or json (docs/reference/diff-json.md)"
    )
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 3 when HEAD is valid and something changes (0 only when nothing changes)",
    )
    p.add_argument(
        "--full-output",
        metavar="FILE",
        help="also write the full, uncut diff (same format) to FILE; the markdown comment is cut to "
        "fit GitHub's 65,536-character limit and says so",
    )
    p.add_argument(
        "--preview-file",
        metavar="FILE",
        help="markdown: add FILE (e.g. `pulumi preview --diff` output) as a collapsed section",
    )
    p.add_argument(
        "--stack",
        metavar="NAME",
        help="the Pulumi stack: names the markdown comment's heading, and with --base and no HEAD, HEAD is its "
        "gpupool:spec (stacks/Pulumi.NAME.yaml)",
    )
    p.add_argument("--commit", metavar="SHA", help="markdown: the commit compared, for the comment's heading")
    p.add_argument(
        "--artifact-url",
        metavar="URL",
        help="markdown: an https:// link to where the full diff is (the workflow run), for the heading",
    )
    p.add_argument("--max-chars", type=int, default=None, metavar="N", help=argparse.SUPPRESS)  # tests
    p.set_defaults(func=run)


def _sides(args, tmp: Path) -> tuple[Side, Side]:
    from gpupool.analysis.sides import load_side, move_paths

    if args.base is not None:
        if len(args.specs) > 1:
            raise UsageError("with --base give at most one spec (HEAD); the base is the same spec at the git ref")
        if args.stack is not None and not args.specs:
            from gpupool.spec.stack import SpecNotFound, resolve

            try:
                args.specs = [resolve(None, args.stack)]
            except SpecNotFound as exc:
                raise UsageError(str(exc)) from None
        head = args.specs[0] if args.specs else os.environ.get("GPUPOOL_SPEC") or "spec.yaml"
        if not Path(head).is_file():
            how = "" if args.specs else " (pass the spec path, or set GPUPOOL_SPEC)"
            raise UsageError(f"{head}: no such file{how}")
        from gpupool.analysis.gitspec import GitSpecError, materialize

        try:
            base_path, commit = materialize(args.base, Path(head), tmp)
        except GitSpecError as exc:
            raise UsageError(str(exc)) from None
        rel = base_path.relative_to(tmp).as_posix() if base_path else head
        base = load_side("BASE", base_path, f"{args.base}:{rel}", cwd=tmp, prefix=f"{args.base}:")
        if base_path is not None:
            move_paths(base, str(base_path.parent), str(Path(head).parent))
        else:
            base.label = f"{args.base} (no spec at {rel}: a new stack)"
        return base, load_side("HEAD", Path(head), head)
    if len(args.specs) != 2:
        raise UsageError("give BASE and HEAD spec files, or --base GIT_REF [HEAD | --stack NAME]")
    for p in args.specs:
        if not Path(p).is_file():
            raise UsageError(f"{p}: no such file")
    return load_side("BASE", Path(args.specs[0]), args.specs[0]), load_side("HEAD", Path(args.specs[1]), args.specs[1])


def run(args) -> int:
    from gpupool.analysis import diff as diffmod

    preview = None
    if args.preview_file:
        from gpupool import safe_write

        try:  # no link followed: what a planted link points at must not end up in the comment
            preview = safe_write.read_input(args.preview_file, PREVIEW_LIMIT).decode("utf-8", errors="replace")
        except safe_write.Refused as exc:
            raise UsageError(f"--preview-file {exc}") from None
    with tempfile.TemporaryDirectory(prefix="gpupool-diff-") as tmp:
        base, head = _sides(args, Path(tmp))
    result = diffmod.compare(base, head)
    over = [h for h in result.headroom if h.headroom_after is not None and h.headroom_after < 0]
    ok = head.valid and not over
    for line in head.rendered_diagnostics():
        print(line, file=sys.stderr)
    if not base.valid and base.exists:
        for line in base.rendered_diagnostics():
            if not line.split(": ", 2)[1:2] == ["warning"]:
                print(line, file=sys.stderr)
    from gpupool.present import diff as present

    if args.output == "markdown":
        full_name = args.full_output and Path(args.full_output).name
        limit = args.max_chars or present.GITHUB_COMMENT_LIMIT
        heading = present.Heading(
            args.stack,
            args.commit,
            args.artifact_url,
            args.artifact_url and args.stack and f"gpupool-diff-{args.stack}",
        )
        text = present.format_markdown(
            base, head, result, ok, limit=limit, preview=preview, full_output=full_name, heading=heading
        )
    else:
        text = present.FORMATTERS[args.output](base, head, result, ok)
    if args.full_output:
        full = (
            present.format_markdown(
                base, head, result, ok, limit=None, preview=preview, heading=present.Heading(args.stack, args.commit)
            )
            if args.output == "markdown"
            else text
        )
        from gpupool import safe_write

        try:  # no link followed on the way, only a regular file replaced (a PR can plant a link at that name)
            safe_write.write_output(args.full_output, full)
        except safe_write.Refused as exc:
            raise CommandError(f"--full-output {exc}; nothing was written") from None
    print(text, end="")
    if not ok:
        return 1
    return EXIT_CHANGES if args.exit_code and not result.empty else 0
