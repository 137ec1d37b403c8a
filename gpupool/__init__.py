"""gpupool: declarative multi-tenant GPU sharing on Kubernetes (see README.md)."""


def version() -> str:
    """The installed distribution's version (pyproject.toml's, for an editable install too)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("gpupool")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"
