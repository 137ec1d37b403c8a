"""Pulumi entry point (`pulumi up` runs this): gpupool's own program, from the installed package like any
team's program (`pulumi install` / `make setup` install it; see gpupool/pulumi/program.py)."""

from gpupool.pulumi.program import main

main()
