# Every target sets up what it needs: a fresh clone only needs python3 (>= 3.11).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo docs typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

typecheck: $(STAMP)
	$(PY) -m mypy spec reference conformance benchmarks

test: $(STAMP) typecheck
	$(PY) -m pytest tests

demo: $(STAMP)
	$(PY) -m conformance vectors --suite shuffle --target reference

docs: $(STAMP)
	$(PY) -m spec.docs

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache build *.egg-info
