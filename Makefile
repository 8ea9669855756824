# labbot — two commands do all the set-up: `make run` and `make test` (both create .venv on first use).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test specs lint bench fmt clean

$(STAMP): pyproject.toml client/pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# constraints.txt pins torch to the CPU build (an unpinned torch pulls a multi-GB CUDA wheel) and ray
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ./client -e '.[dev,jobs]'
	@touch $(STAMP)

# with a Slack token: the real thing (HTTP or Socket Mode); without: the console, a local Slack in this terminal
run: $(STAMP)
	@if [ -n "$$SLACK_BOT_TOKEN" ]; then $(BIN)/labbot serve; else $(BIN)/labbot console; fi

# the vendor API specs the contract tests check against, pinned by commit and sha256, into .specs/ (git-ignored);
# under `make test` missing ones only warn (those tests are skipped) unless CI=true
specs:
	$(PYTHON) scripts/specs.py $(SPECS_FLAGS)

test: SPECS_FLAGS = --warn-unless-ci
test: $(STAMP) specs
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .labbot .mypy_cache .ruff_cache .pytest_cache
