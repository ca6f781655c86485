# The two quick-start commands are `make demo` and `make test` (see README).
PYTHON ?= python3
TOOLS := .tools
AZURITE := $(TOOLS)/node_modules/.bin/azurite-blob

# Installs pin every dependency to constraints.txt, so CI tests exactly what `make setup` gives users.
# `make constraints` rewrites it from the versions installed now; `make test-latest` (not in CI) runs the
# unit tests against the newest versions pyproject.toml allows, in a fresh venv, to see new releases early.
LATEST_VENV := build/latest-venv

.PHONY: setup demo test lint azurite constraints test-latest
setup:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	$(PYTHON) -m trspark jar-path  # builds the plugin jar only when its sources changed

$(AZURITE):
	mkdir -p $(TOOLS)
	cd $(TOOLS) && npm install --silent --no-audit --no-fund --prefix . azurite@3.35

azurite: $(AZURITE)

demo: setup
	$(PYTHON) -m trspark demo

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy cost_model trspark simulators
	lint-imports  # the architecture contracts in pyproject.toml

test: setup azurite lint
	TRSPARK_AZURITE=$(abspath $(AZURITE)) $(PYTHON) -m pytest -q

constraints:
	$(PYTHON) .ci/constraints.py > constraints.txt

test-latest:
	$(PYTHON) -m venv --clear $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	$(LATEST_VENV)/bin/python -m pip list --format=freeze | grep -iE '^(pytest|numpy|scipy|pyspark|hypothesis)=='
	$(LATEST_VENV)/bin/python -m pytest -q -m "not spark" -p no:cacheprovider
