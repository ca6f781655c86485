# The two quick-start commands are `make demo` and `make test` (see README).
PYTHON ?= python3
TOOLS := .tools
AZURITE := $(TOOLS)/node_modules/.bin/azurite-blob

# Installs pin every dependency to constraints.txt, so CI tests exactly what `make setup` gives users.
# `make constraints` rewrites it from the versions installed now; `make test-latest` (not in CI) runs the
# unit tests against the newest versions pyproject.toml allows, in a fresh venv, to see new releases early.
LATEST_VENV := build/latest-venv

.PHONY: setup demo test lint azurite browser constraints test-latest pools pools-sweep pools-notice pools-paper
setup:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	$(PYTHON) -m trspark jar-path  # builds the plugin jar only when its sources changed

$(AZURITE):
	mkdir -p $(TOOLS)
	cd $(TOOLS) && npm install --silent --no-audit --no-fund --prefix . azurite@3.35

azurite: $(AZURITE)

# Headless Chromium for the Spark UI tab test (Debian package; about a minute). Where it cannot
# be installed (not root, no apt-get) the test skips and says why.
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
			|| echo "chromium could not be installed: the UI tab test will be skipped"; \
	else echo "chromium is missing and cannot be installed here: the UI tab test will be skipped"; fi

# Options for the main job, e.g. make demo DEMO_ARGS="--seed 1" (trspark demo --help lists them).
DEMO_ARGS ?=
demo: setup
	$(PYTHON) -m trspark demo $(DEMO_ARGS)

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy cost_model trspark simulators jobs bench
	lint-imports  # the architecture contracts in pyproject.toml

# Both halves share two worker processes (pytest-xdist; a whole file per worker, so a module's fixtures
# and its driver JVM start once). The live Spark tests wait on conditions, never on sleeps, so two of
# them side by side only run slower. Both halves always run, and either one failing fails the target.
TEST_ENV := TRSPARK_AZURITE=$(abspath $(AZURITE))
test: setup azurite browser lint
	status=0; \
	$(TEST_ENV) $(PYTHON) -m pytest -q --durations=20 -m "not spark" -n 2 --dist loadfile || status=$$?; \
	$(TEST_ENV) $(PYTHON) -m pytest -q --durations=20 -m spark -n 2 --dist loadfile || status=$$?; \
	exit $$status

constraints:
	$(PYTHON) .ci/constraints.py > constraints.txt

test-latest:
	$(PYTHON) -m venv --clear $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	$(LATEST_VENV)/bin/python -m pip list --format=freeze | grep -iE '^(pytest|numpy|scipy|pyspark|hypothesis)=='
	$(LATEST_VENV)/bin/python -m pytest -q -m "not spark" -p no:cacheprovider

# The on-demand/spot pools sweep, its notices and paper-size points, and docs/results/pools.md.
# Smaller grids for a loaded machine: e.g. make pools POOLS_RUNS=20 POOLS_NOTICE_RUNS=50 POOLS_STABILITIES=10,50.
# oracle-backup, the costliest policy, runs only below stability 20, where a target uses it; each
# cell's rows come from one sweep, so the two sweeps' rows join into one CSV.
POOLS_RUNS ?= 50
# A notice's gain is often a percent or two: its paired interval needs more runs than the sweep.
POOLS_NOTICE_RUNS ?= 200
POOLS_STABILITIES ?= 5,10,20,50,200
POOLS_SHARES ?= 0,10,25,50
POOLS_WORKERS ?= 2
POOLS_OUT ?= docs/results
POOLS_SIM := nice -n 10 $(PYTHON) -m trspark simulate sweep --vms 10 --scale 0.01 --shapes exp,0.6 \
	--on-demand-shares $(POOLS_SHARES) --workers $(POOLS_WORKERS) --workloads tpcds,bing
pools_stabilities = $(shell echo $(POOLS_STABILITIES) | tr , '\n' | awk '$$1 $(1)' | paste -sd, -)
POOLS_BELOW_20 = $(call pools_stabilities,< 20)
POOLS_FROM_20 = $(call pools_stabilities,>= 20)
POOLS_UP_TO_20 = $(call pools_stabilities,<= 20)
pools: pools-sweep pools-notice pools-paper
	$(PYTHON) -m jobs.reports
pools-sweep:
	mkdir -p $(POOLS_OUT)/.pools-parts && rm -f $(POOLS_OUT)/.pools-parts/*.csv
	if [ -n "$(POOLS_BELOW_20)" ]; then $(POOLS_SIM) --runs $(POOLS_RUNS) --policies never,always,efm,pado,tr,oracle,oracle-backup \
		--stabilities $(POOLS_BELOW_20) --out $(POOLS_OUT)/.pools-parts/low.csv; fi
	if [ -n "$(POOLS_FROM_20)" ]; then $(POOLS_SIM) --runs $(POOLS_RUNS) --policies never,always,efm,pado,tr,oracle \
		--stabilities $(POOLS_FROM_20) --out $(POOLS_OUT)/.pools-parts/high.csv; fi
	awk 'FNR > 1 || NR == 1' $(POOLS_OUT)/.pools-parts/*.csv > $(POOLS_OUT)/pools_sweep.csv
	rm -r $(POOLS_OUT)/.pools-parts
pools-notice:
	if [ -n "$(POOLS_UP_TO_20)" ]; then $(POOLS_SIM) --policies tr,tr-without-notices --notice 2 \
		--runs $(POOLS_NOTICE_RUNS) --stabilities $(POOLS_UP_TO_20) --out $(POOLS_OUT)/pools_notice.csv; fi
pools-paper:
	nice -n 10 $(PYTHON) -m trspark simulate sweep --workloads tpcds --policies never,always,tr,oracle \
		--stabilities 100 --vms 100 --cores 4 --scale 1 --runs 8 --workers $(POOLS_WORKERS) --out $(POOLS_OUT)/pools_paper.csv
