# gpupool: the two commands a new machine needs are `make demo` and `make test` (see README.md).
VENV ?= .venv
PY := $(VENV)/bin/python
GPUPOOL := $(VENV)/bin/gpupool
STACK ?= dev

.PHONY: setup demo toolchain tools render-deps test test-unit clean constraints

setup: $(VENV)/.installed

# Re-installs when pyproject.toml or constraints.txt changes; editable, so the working tree is what runs.
# EXTRAS=pulumi installs what a deploy needs without the test tools (CI's deploy job; about a third the size).
EXTRAS ?= test
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	touch $@

# constraints.txt: the exact versions of everything `.[test]` installs, resolved afresh from pyproject.toml's
# ranges in a throw-away venv (run after changing a dependency, review the diff, commit it).
constraints:
	rm -rf .constraints-venv && python3 -m venv .constraints-venv
	.constraints-venv/bin/pip install -q --upgrade pip && .constraints-venv/bin/pip install -q -e '.[test]'
	{ sed -n '1,4p' constraints.txt; .constraints-venv/bin/pip freeze --all --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf .constraints-venv

# The main job on the bundled dev stack: validate, capacity plan, render the objects. No cluster needed.
demo: setup
	$(GPUPOOL) validate stacks/$(STACK)/spec.yaml
	$(GPUPOOL) plan stacks/$(STACK)/spec.yaml
	$(GPUPOOL) render stacks/$(STACK)/spec.yaml --output-dir out/$(STACK)

# pulumi CLI, pulumi-language-python, pulumi-resource-kubernetes, kube-apiserver, kube-controller-manager,
# etcd, gofakes3 (the S3-compatible server of tests/e2e/test_s3_backend.py), prometheus and promtool (the
# monitoring tests): built from Go modules into
# ~/.cache/gpupool-toolchain (pinned in toolchain/versions.env); a no-op when cached.
toolchain:
	bash toolchain/build.sh >/dev/null

# actionlint (checks .github/workflows) and await-eval (the provider's own await code: what it keeps as a node
# patch's outputs), built from Go modules into ~/.cache/gpupool-toolchain/tools (pinned in tools/versions.env
# and toolchain/versions.env); a no-op when cached.
tools:
	bash tools/build.sh >/dev/null

# The pinned mermaid package the diff-picture tests render with in headless Chromium (.ci/run installs
# Chromium); reinstalled only when tests/render/package-lock.json changes.
render-deps: tests/render/node_modules/.installed
tests/render/node_modules/.installed: tests/render/package-lock.json
	cd tests/render && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Lint (ruff) and type-check (mypy) the package and the components; configured in pyproject.toml.
# The same checks are pre-commit hooks (.pre-commit-config.yaml; tests/test_precommit.py keeps the two alike).
SHELL_SCRIPTS = .ci/run ci/test.sh toolchain/build.sh tools/build.sh
lint: setup
	$(VENV)/bin/ruff check gpupool components tests bench ci
	$(VENV)/bin/ruff format --check gpupool components tests bench ci
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck -x -P SCRIPTDIR $(SHELL_SCRIPTS)
	$(VENV)/bin/python -m gpupool.rules.docs --check
	$(VENV)/bin/python -m gpupool.spec.reference --check

# Everything, end-to-end tests against a local API server included (ci/test.sh: the builds run beside lint
# and the unit tests; at the end each step's time, the 25 slowest tests and the elapsed time against the budget).
test:
	VENV=$(VENV) bash ci/test.sh

# Fast loop while developing: no toolchain, end-to-end tests skipped.
test-unit: setup
	$(PY) -m pytest -q -m "not e2e"

clean:
	rm -rf out .pytest_cache
