# The two commands of the README's Quick start, and helpers around them.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# On an offline machine: make test PIPFLAGS=--no-build-isolation
PIPFLAGS ?=
# Extras installed with the package: test (pytest and the consumers the exports are checked against);
# add cuda for NVIDIA's CUPTI and cuBLAS wheels where no toolkit is installed (.ci/run does).
EXTRAS ?= test

.PHONY: install run test test-gpu mutants clean

install:
	$(PIP) install -q $(PIPFLAGS) '.[$(EXTRAS)]'

run: install
	umscope run

# CPU tests; GPU tests skip with their reason where no GPU is present.
test: install
	$(PYTHON) -m pytest -ra

# On a GPU node: only the GPU tests, which must not skip there.
test-gpu: install
	UMSCOPE_REQUIRE_GPU=1 $(PYTHON) -m pytest -ra -m gpu

# The mutation check (CI runs it after the tests): deliberate bugs applied to a copy of the tree,
# each of which the tests must catch. Needs the build `make test` leaves under build/.
mutants:
	$(PYTHON) tests/mutants/run.py

clean:
	rm -rf build
