"""`gpupool completion bash|zsh`: a shell completion script generated from the argument parser.

shtab (PyPI) writes the script once from the argparse tree, so completion costs nothing at run time (no
Python process per TAB press, unlike argcomplete) and can never drift from the real flags. It is imported
only by this command.
"""

from __future__ import annotations

SHELLS = ("bash", "zsh")


def register(sub) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for SHELL, generated from gpupool's own argument "
        "parser. bash: `source <(gpupool completion bash)` (or save it under "
        "/etc/bash_completion.d/gpupool); zsh: save it as _gpupool in a directory of "
        '$fpath, e.g. `gpupool completion zsh > "${fpath[1]}/_gpupool"`.',
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")
    p.set_defaults(func=run)


def run(args) -> int:
    import shtab

    from gpupool.cli.main import build_parser

    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return 0
