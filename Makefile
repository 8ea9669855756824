# labbot — two commands do all the set-up: `make run` and `make test` (both create .venv on first use).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TEST_WORKERS ?= 3

.PHONY: run demo cluster test test-fast specs system lint bench fmt clean

$(STAMP): pyproject.toml client/pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# constraints.txt pins torch and ray: an unpinned torch would pull whatever build the index serves (on Linux, a
	# multi-GB CUDA one); point pip at PyTorch's CPU index (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL) for the small wheel
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ./client -e '.[dev,jobs]'
	@touch $(STAMP)

# with a Slack token: the real thing (HTTP or Socket Mode); without: the console, a local Slack in this terminal
run: SYSTEM_FLAGS = --warn-unless-ci
run: $(STAMP) system
	@if [ -n "$$SLACK_BOT_TOKEN" ]; then $(BIN)/labbot serve; else $(BIN)/labbot console; fi

# the console with the agents on a scripted demo model: a tool call, an approval, an eval, a streamed answer — no key
demo: SYSTEM_FLAGS = --warn-unless-ci
demo: $(STAMP) system
	$(BIN)/labbot console --demo

# a multi-node Ray cluster on this machine (a head and two workers, 1 CPU and accelerator=1 each, token auth): it
# prints the RAY_ADDRESS / RAY_AUTH_TOKEN for `make run` in another shell; Ctrl-C stops it (docs/deploy.md)
cluster: $(STAMP)
	$(BIN)/python -m labbot.training.local_cluster

# the vendor API specs the contract tests check against, pinned by commit and sha256, into .specs/ (git-ignored);
# under `make test` missing ones only warn (those tests are skipped) unless CI=true
specs:
	$(PYTHON) scripts/specs.py $(SPECS_FLAGS)

# ripgrep and bubblewrap (scripts/system-packages.sh): installed with apt-get when missing and run as root, else the
# command to run is printed; under `make run` and `make test` a missing one only warns (labbot runs without them:
# search is slower, evals refuse with the same advice) unless CI=true
system:
	@bash scripts/system-packages.sh $(SYSTEM_FLAGS)

# every tier: unit, Ray, subprocess and end-to-end tests, spread over the cores (pytest-xdist; a module's tests stay
# on one worker so its module-scoped fixtures start once; modules in collection order, which puts the longest first,
# tests/tiers.py's LONGEST_FIRST: xdist's own reorder, by number of tests, would start the one-test end-to-end stories
# last). An empty run fails: pytest exits 5 when it collects no test, and make stops on it. Bytecode is cached even
# where the environment says not to (PYTHONDONTWRITEBYTECODE): each worker collects every module, and the suite starts
# a few hundred Python processes (labbot, its CLI, jobs) that would each compile labbot again (the sandboxes set their
# own)
test: SPECS_FLAGS = --warn-unless-ci
test: SYSTEM_FLAGS = --warn-unless-ci
test: $(STAMP) specs system
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# no Ray head, no process of the test's own, no end-to-end story (tests/tiers.py): the inner loop while editing
test-fast: SPECS_FLAGS = --warn-unless-ci
test-fast: SYSTEM_FLAGS = --warn-unless-ci
test-fast: $(STAMP) specs system
	env -u PYTHONDONTWRITEBYTECODE LABBOT_TEST_TIER=fast $(BIN)/pytest -q -n $(TEST_WORKERS) -m "not ray and not e2e and not subprocess"

# ruff (lint and format), mypy, and the layering contracts in pyproject.toml (import-linter)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .labbot .mypy_cache .ruff_cache .pytest_cache
