# Every target sets up what it needs: a fresh clone only needs python3 (>= 3.11).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo demo-postgres docs java spark-helper typecheck vectors conformance mutants sensitivity clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# PySpark runs on a JVM: say so plainly instead of failing deep inside Spark's launcher.
java:
	@command -v java >/dev/null 2>&1 || { echo "PySpark needs Java 17 or newer on PATH (Debian: apt-get install openjdk-17-jdk-headless)"; exit 1; }

# streaming_repartition's JVM helper (reference/spark/jvm_rows.py), compiled against the installed pyspark's
# jars into the package (package data, gitignored). Without a JDK it is skipped with a note (the demo needs
# only a Java runtime): the API then warns once and takes a Python pass more; the tests need it.
SPARK_HELPER := reference/spark/streamwire-spark.jar
SPARK_HELPER_SOURCES := $(wildcard reference/spark/java/*.java)
spark-helper: $(SPARK_HELPER)
$(SPARK_HELPER): $(SPARK_HELPER_SOURCES) $(STAMP)
	@if ! command -v javac >/dev/null 2>&1; then \
	  echo "note: no javac (JDK 17+, Debian: openjdk-17-jdk-headless): $@ not built, streaming_repartition takes a Python pass more"; \
	else \
	  set -ex; rm -rf build/spark-helper; mkdir -p build/spark-helper; \
	  javac -nowarn -encoding UTF-8 --release 17 -d build/spark-helper \
	    -cp "$$($(PY) -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("pyspark").origin).parent / "jars")')/*" \
	    $(SPARK_HELPER_SOURCES); \
	  jar cf $@ -C build/spark-helper .; \
	fi

# What a Spark driver loads at start-up, as a class-data-sharing archive the suite's drivers map (tests/conftest.py):
# a test's driver lives seconds, mostly loading classes. Without a JVM able to dump one, a note and no archive.
SPARK_CLASSES := build/spark-driver-classes.jsa
$(SPARK_CLASSES): tests/spark/driver_classes.py $(STAMP)
	$(PY) tests/spark/driver_classes.py $@

# A sync client without pyarrow (grpc-js and Arrow's JavaScript library), for tests/sync/test_sync_node_client.py.
NODE_CLIENT := tests/sync/node_client
$(NODE_CLIENT)/node_modules: $(NODE_CLIENT)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the tests need Node.js with npm (Debian: apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix $(NODE_CLIENT) --no-audit --no-fund --loglevel=error
	touch $@

typecheck: $(STAMP)
	$(PY) -m mypy spec reference conformance benchmarks streamwire

# Bytecode first: the suite starts hundreds of Python processes (targets, servers, Spark workers), and with
# PYTHONDONTWRITEBYTECODE set each would compile the project again (scratch trees of the mutant and
# sensitivity runs leave __pycache__ out, so a planted bug never runs stale bytecode).
test: $(STAMP) java $(SPARK_HELPER) $(SPARK_CLASSES) typecheck $(NODE_CLIENT)/node_modules
	$(PY) -m compileall -q spec reference conformance benchmarks streamwire tests
	$(PY) -m pytest tests

demo: $(STAMP) java $(SPARK_HELPER)
	$(PY) -m reference.pipeline $(DEMO_ARGS)

# A throwaway Postgres 15 (Debian's postgresql-15), a concurrent workload, the pipeline, verified.
demo-postgres: $(STAMP) java $(SPARK_HELPER)
	$(PY) -m conformance.pgoutput.demo $(DEMO_ARGS)

docs: $(STAMP)
	$(PY) -m spec.docs

vectors: $(STAMP)
	$(PY) -m conformance vectors --suite shuffle --target reference
	$(PY) -m conformance vectors --suite sync --target reference
	$(PY) -m conformance vectors --suite cluster --target reference

conformance: $(STAMP)
	$(PY) -m conformance run --suite shuffle --target reference
	$(PY) -m conformance run --suite cluster --target memory
	$(PY) -m conformance run --suite sync --target reference

# Plants each catalogued bug in a scratch copy and runs the fast tests against it (not part of `test`).
mutants: $(STAMP)
	$(PY) -m tests.mutants $(MUTANTS_ARGS)

# Plants each catalogued bug in a copy of the reference and counts those each live suite catches (not part of `test`).
sensitivity: $(STAMP)
	$(PY) -m conformance sensitivity --suite shuffle $(SENSITIVITY_ARGS)
	$(PY) -m conformance sensitivity --suite sync $(SENSITIVITY_ARGS)
	$(PY) -m conformance sensitivity --suite cluster $(SENSITIVITY_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache build *.egg-info $(NODE_CLIENT)/node_modules
