"""The deploy path in the package: `gpupool stacks preview|up|destroy STACK` on the Pulumi Automation API.

`stacks.py` runs the platform's stacks (the shard plan and the two-pass move of
gpupool.analysis.shard_moves), `recovery.py` clears what a dead run left. Only `gpupool stacks` imports
this package, so `gpupool validate/plan/render` never import Pulumi.
"""
