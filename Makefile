# The two quick-start commands are `make demo` and `make test` (see README).
PYTHON ?= python3
TOOLS := .tools
AZURITE := $(TOOLS)/node_modules/.bin/azurite-blob

# Installs pin every dependency to constraints.txt, so CI tests exactly what `make setup` gives users.
# `make constraints` rewrites it from the versions installed now; `make test-latest` (not in CI) runs the
# unit tests against the newest versions pyproject.toml allows, in a fresh venv, to see new releases early.
LATEST_VENV := build/latest-venv

.PHONY: setup demo test lint azurite browser constraints test-latest
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

demo: setup
	$(PYTHON) -m trspark demo

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy cost_model trspark simulators
	lint-imports  # the architecture contracts in pyproject.toml

test: setup azurite browser lint
	TRSPARK_AZURITE=$(abspath $(AZURITE)) $(PYTHON) -m pytest -q

constraints:
	$(PYTHON) .ci/constraints.py > constraints.txt

test-latest:
	$(PYTHON) -m venv --clear $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	$(LATEST_VENV)/bin/python -m pip list --format=freeze | grep -iE '^(pytest|numpy|scipy|pyspark|hypothesis)=='
	$(LATEST_VENV)/bin/python -m pytest -q -m "not spark" -p no:cacheprovider
