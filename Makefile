# The two quick-start commands are `make demo` and `make test` (see README).
PYTHON ?= python3
TOOLS := .tools
AZURITE := $(TOOLS)/node_modules/.bin/azurite-blob

.PHONY: setup demo test lint azurite
setup:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
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
