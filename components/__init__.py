"""Pulumi ComponentResources: thin adapters from gpupool's desired objects to pulumi_kubernetes resources."""
