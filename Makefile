# Stowplan: every target sets itself up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test unit fuzz docs picture cluster-build cluster-up bench clean image image-lock image-pin

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## Plan a bundled snapshot and print the plan as a table.
demo: setup
	$(VENV)/bin/stowplan what-if fixtures/multi-team-gpu.yaml -o table

## Every test: types (mypy --strict, pyproject), the docs site (--strict), unit, golden, property, CLI and the real control plane.
test: setup cluster-build docs
	$(PY) -m mypy
	$(PY) -m pytest -q

## The documentation site (MkDocs Material, the CLI reference by mkdocs-click) into build/site;
## --strict: a broken link or anchor, or a page left out of the nav, fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

## The picture in README and docs: fixtures/meta-like.json's golden plan drawn (not a new,
## time-limited solve); tests/test_picture_reads.py checks its title against that golden plan.
picture: setup
	$(PY) -m planner.tools.draw_golden fixtures/meta-like.json fixtures/meta-like.plan.yaml docs/meta-like.png

## Only the tests that need no cluster and no image build (fast, for editing), after the type check.
unit: setup
	$(PY) -m mypy
	STOWPLAN_SKIP_CLUSTER=1 $(PY) -m pytest -q -m "not cluster and not image"

## The readers' property tests with a long budget and fresh randomness (`make test` runs a fixed small one).
FUZZ_EXAMPLES ?= 500
fuzz: setup
	STOWPLAN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/test_fuzz_readers.py

## Build (first time only) kube-apiserver, controller-manager, scheduler, etcd, KWOK.
cluster-build:
	bash tests/controlplane/build.sh

## Start the test control plane for a person to play with; prints KUBECONFIG.
cluster-up: setup cluster-build
	$(PY) tests/controlplane/up.py

## The CronJob's image (docs/image.md): build/stowplan-image.oci.tar and build/stowplan.digest,
## from Debian packages and the wheels cronjob/image.lock pins; the same commit, the same digest.
## Cached in ~/.cache/stowplan-image by its inputs; `bash tools/image/build.sh --fresh` rebuilds.
image:
	bash tools/image/build.sh

## Resolve the image's Debian packages and wheels anew and rewrite cronjob/image.lock (commit it).
image-lock:
	bash tools/image/build.sh --relock

## Release step: build the image and pin its digest in cronjob/cronjob.yaml and the docs.
image-pin: image
	$(PYTHON) tools/image/pin.py "$$(cat build/stowplan.digest)"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
