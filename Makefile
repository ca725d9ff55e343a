# Two commands: `make run` and `make test`. Everything else is what they need.
SHELL := /bin/bash
PY ?= python3
UV_VERSION := 0.13.9
VENV := .venv
UV := .uv/bin/uv
BURROW := $(VENV)/bin/burrow

.PHONY: run test setup lint typecheck pytest bench clean

# A project-local uv (pinned) installs the locked dependencies into .venv.
$(UV):
	$(PY) -m venv .uv
	.uv/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --quiet --compile-bytecode
	$(VENV)/bin/python -m compileall -q burrow
	touch $@

setup: $(VENV)/.synced

# Embedded defaults: SQLite and workspaces in ~/.local/share/burrow, the local sandbox,
# and the offline demo model unless a model is configured.
run: setup
	@if [ -z "$$OPENAI_API_KEY$$BURROW_MODEL$$OPENAI_BASE_URL" ]; then \
		echo "No OPENAI_API_KEY or BURROW_MODEL set: starting with the offline demo model."; \
		exec $(BURROW) serve --model demo; \
	else \
		exec $(BURROW) serve; \
	fi

lint: setup
	$(VENV)/bin/ruff check burrow tests bench
	$(VENV)/bin/ruff format --check burrow tests bench

typecheck: setup
	$(VENV)/bin/mypy

pytest: setup
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(VENV)/bin/python $$b || exit 1; done

clean:
	rm -rf .venv .uv .mypy_cache .ruff_cache .pytest_cache
