"""Pulumi entry point (`pulumi up` runs this): see components/program.py."""
from components.program import main

main()
