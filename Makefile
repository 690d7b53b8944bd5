# kipling: two commands that work on a fresh machine.
#   make run   — create .venv, install kipling, start the main job
#   make test  — create .venv, install the test extras and system packages, run lint and the whole suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test install install-test system-deps clients lint format bench demo clean compat-librdkafka

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# The test extras include Spark (pyspark builds a ~460 MB wheel from its sdist on first install)
# and quixstreams, whose releases all pin confluent-kafka below the tested 2.16.1: its dependencies
# come from the quix extra, quixstreams itself without them.
QUIXSTREAMS := quixstreams==3.28.1
$(TEST_STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,spark,quix,faust]'
	$(BIN)/pip install --quiet --no-deps '$(QUIXSTREAMS)'
	touch $@

install: $(STAMP)

install-test: $(TEST_STAMP)

# Debian packages the tests need: kcat (librdkafka 2.0.2, the oldest client the tests drive),
# docker-compose (v1, to validate docker-compose.yml; no docker engine: --no-install-recommends) and
# prometheus (the server, to scrape a dev cluster with config/prometheus.yml; its service is not used)
# and a Java 17+ runtime for Spark (the pipeline tests), unless one is on PATH already; nftables
# for the fault suite's network partition (rules inside a network namespace of its own).
# Installed with apt-get when missing (CI and developer machines run as root); sudo otherwise.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@{ command -v kcat && command -v docker-compose && command -v prometheus && command -v nft; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends kcat docker-compose prometheus nftables >/dev/null; }
	@command -v java >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null; }

run: $(STAMP)
	$(BIN)/kipling broker $(ARGS)

# The Kafka clients README's examples use besides kipling's own tools: kcat (Debian's package) and
# kafka-python (into .venv, the version the tests drive).
clients: $(STAMP)
	$(BIN)/pip install --quiet 'kafka-python==3.0.12'
	@command -v kcat >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends kcat >/dev/null; }

# mypy checks the packages that [tool.mypy] in pyproject.toml lists (--strict).
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(TEST_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Two pytest-xdist workers, a test file per worker at a time (a file's module fixtures, such as its
# broker process, are built once): the integration tests spend much of their time waiting. The
# fault suite's CI tier runs after the rest, on its own: its clusters load both cores, and the
# other tests that time failovers must not share the machine with them.
PYTEST_ARGS ?= -n 2 --dist loadfile
FAULT_TIER ?= tests/fault
test: $(TEST_STAMP) system-deps lint
	$(BIN)/pytest $(PYTEST_ARGS) --ignore=$(FAULT_TIER)
	$(BIN)/pytest $(PYTEST_ARGS) $(FAULT_TIER)

SPARK_STAMP := $(VENV)/.installed-spark

$(SPARK_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[spark]'
	touch $@

# The Spark example end to end against a running broker (start one with `make run` in another
# terminal): creates topics, produces 3000 events, runs the event-aggregates job with availableNow
# and prints the aggregates read back from the output topic. Docs: docs/pipeline.md.
DEMO_ARGS ?= --bootstrap 127.0.0.1:9092 --workdir /tmp/kipling-demo
demo: $(SPARK_STAMP)
	$(BIN)/python -m pipeline.jobs.demo $(DEMO_ARGS)

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,spark,bench]'
	touch $@

# Every benchmark, in one run (figures in bench/results/), librdkafka's regression suite last (about
# an hour: see compat-librdkafka below).
bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.codec
	$(BIN)/python -m bench.log
	$(BIN)/python -m bench.fetch_sessions
	$(BIN)/python -m bench.fetch_sessions_inprocess
	$(BIN)/python -m bench.long_poll
	$(BIN)/python -m bench.startup
	$(BIN)/python -m bench.throughput
	$(BIN)/python -m bench.scaling
	$(BIN)/python -m bench.replication
	$(BIN)/python -m bench.reassignment
	$(BIN)/python -m bench.decoder
	$(BIN)/python -m bench.spark_read
	$(BIN)/python -m bench.spark_write
	$(BIN)/python -m bench.transactions
	$(BIN)/python -m bench.cleaner
	$(BIN)/python -m bench.tls
	$(BIN)/python -m bench.compat_librdkafka $(COMPAT_ARGS)

# librdkafka's own regression suite (v2.15.0, the 120 tests of 0000-0999 that need a broker) against
# single kipling nodes: builds librdkafka's test runner once (cached in ~/.cache/kipling), writes
# bench/results/compat_librdkafka.{md,json} and fails if a test of compat/librdkafka/allowlist.txt
# does not pass. About an hour; not part of `make test`. Options: COMPAT_ARGS='--tests 0001,0045'.
COMPAT_ARGS ?=
compat-librdkafka: $(STAMP)
	$(BIN)/python -m bench.compat_librdkafka $(COMPAT_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
