# Two commands on a fresh machine with Python 3.11:
#   make demo   creates .venv, installs harness, runs scenarios/quickstart.yaml
#   make test   installs .venv with the dev tools, runs ruff, mypy, the import contracts and
#               the tests: the unit tests in parallel while what the integration tests use
#               is installed beside them (Debian packages as root, the Docker base image,
#               npm packages, the spring-shop jar, the WireMock jar), then the integration tests in four lanes
#               (tests/lanes.py)
# and for the edit loop:
#   make check  ruff, mypy, the import contracts and the unit tests in parallel (no
#               integration test, nothing installed but .venv; 1-2 minutes on 2 cores)
# JOBS=N sets the parallel workers of the unit tests (default auto: one per core), and
# INTEGRATION_JOBS=N those of the integration tests (default 4; 0: one at a time). The
# split and its rule: .ci/pytest-halves.sh, tests/conftest.py, docs/testing.md.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint full seeds clean node-deps system-deps durations wiremock-jar actionlint

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/harness run scenarios/quickstart.yaml

full: $(VENV)/.installed
	$(BIN)/harness run scenarios/pg-sustained-timeout.yaml

# Every seed experiment at full length (scenarios/seeds/*.yaml, in name order; long, never in
# CI). A failed run or gate does not stop the others; the index page links every report and
# lists the seed claims (SEEDS/index.html, index.md). Exits 1 if any run failed.
SEEDS ?= results/seeds

seeds: $(VENV)/.installed
	@set -- scenarios/seeds/*.yaml; \
	if [ ! -e "$$1" ]; then echo "seeds: no scenarios/seeds/*.yaml"; exit 2; fi; \
	since=$$(date -u +%Y%m%dT%H%M%SZ); status=0; \
	for f in "$$@"; do \
	  echo "== $$f"; \
	  $(BIN)/harness run "$$f" --results $(SEEDS) || { echo "seeds: $$f failed"; status=1; }; \
	done; \
	$(BIN)/harness index "$$@" --results $(SEEDS) --since $$since \
	  --out $(SEEDS)/index.html --title "Seed experiments" || status=1; \
	exit $$status

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

JOBS ?= auto
INTEGRATION_JOBS ?= 4

# What only the integration half needs is made beside the unit half (SETUP in the script).
test: lint
	PYTEST=$(BIN)/pytest JOBS=$(JOBS) INTEGRATION_JOBS=$(INTEGRATION_JOBS) \
	  SETUP="$(MAKE) --no-print-directory system-deps node-deps spring-jar wiremock-jar actionlint" \
	  bash .ci/pytest-halves.sh all

check: lint
	PYTEST=$(BIN)/pytest JOBS=$(JOBS) bash .ci/pytest-halves.sh unit

# tests/durations.json anew: each integration module's seconds in a full run of the
# integration half, which the lanes read to start the longest modules first.
durations: $(VENV)/.dev-installed system-deps node-deps spring-jar wiremock-jar actionlint
	$(BIN)/pytest -q -p xdist -n $(INTEGRATION_JOBS) --lanes -m integration --store-durations tests/durations.json

# Debian packages and a local Docker Engine for the integration tests (see the script).
system-deps:
	bash .ci/system-deps.sh

# npm packages of targets/node-gateway (opossum, opossum-prometheus, prom-client) for the
# seed 003 scenario and its tests; skipped (those tests skip, saying so) without npm.
node-deps:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory targets/node-gateway/node_modules/.package-lock.json; \
	else echo "node-deps: npm not found; the node-gateway tests will skip"; fi

targets/node-gateway/node_modules/.package-lock.json: targets/node-gateway/package-lock.json
	npm ci --prefix targets/node-gateway --no-audit --no-fund
	touch $@

# The Spring Boot reference target (targets/spring-shop) for its tests: built once, and again only
# when pom.xml or src/ change; skipped (those tests skip, saying so) without java or mvn.
SPRING_JAR := targets/spring-shop/target/spring-shop.jar
.PHONY: spring-jar
spring-jar:
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then $(MAKE) --no-print-directory $(SPRING_JAR); \
	else echo "spring-jar: java or mvn not found; the spring-shop tests will skip"; fi

$(SPRING_JAR): targets/spring-shop/pom.xml $(shell find targets/spring-shop/src -type f 2>/dev/null)
	cd targets/spring-shop && mvn -q -B package -DskipTests
	touch $@

# WireMock's standalone jar, which tests/stubs/test_integration_wiremock.py answers the same
# requests with as harness.stubs (a differential test): fetched once from Maven Central (kept in
# ~/.m2 too), again only when the version changes; skipped (that test skips, saying so)
# without java or mvn.
WIREMOCK_VERSION := 3.13.2
WIREMOCK_JAR := build/wiremock/wiremock-standalone-$(WIREMOCK_VERSION).jar
wiremock-jar:
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then $(MAKE) --no-print-directory $(WIREMOCK_JAR); \
	else echo "wiremock-jar: java or mvn not found; the WireMock differential test will skip"; fi

$(WIREMOCK_JAR):
	mvn -q -B dependency:copy -Dartifact=org.wiremock:wiremock-standalone:$(WIREMOCK_VERSION) -DoutputDirectory=$(dir $@)

# actionlint, from the Go module proxy, for the test that lints the example GitHub workflow
# (tests/test_ci_examples.py; the GitLab example is checked against GitLab's schema as
# check-jsonschema vendors it, a dev dependency).
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := build/bin/actionlint

actionlint:
	@if command -v go >/dev/null 2>&1; then $(MAKE) --no-print-directory $(ACTIONLINT); \
	else echo "actionlint: go not found; the workflow lint test will skip"; fi

$(ACTIONLINT):
	GOBIN=$(CURDIR)/build/bin go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
