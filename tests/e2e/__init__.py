"""End-to-end tests against a local control plane built by toolchain/build.sh (see toolchain/README.md)."""
