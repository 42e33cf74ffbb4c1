# The two commands of the README: `make run` and `make test`. Everything else is a helper for them.
VENV   := .venv
BIN    := $(VENV)/bin
PYTHON := $(BIN)/python
STAMP  := $(VENV)/.installed

.PHONY: run test check lint bench bench-tools ray-tools browsers screenshots image-check clean

$(STAMP): requirements.txt requirements-dev.txt
	@scripts/find-python >/dev/null
	$$(scripts/find-python) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	$(PYTHON) manage.py migrate --noinput -v 0
	$(PYTHON) manage.py demo_user
	$(PYTHON) scripts/run_dev.py Procfile.dev

test: $(STAMP) browsers
	$(PYTHON) -m pytest -q

screenshots: $(STAMP) browsers
	TRAINYARD_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(PYTHON) -m pytest -q tests/browser

check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(PYTHON) manage.py check --fail-level WARNING
	$(PYTHON) manage.py makemigrations --check --dry-run

# The Dockerfile's steps outside a container, in a fresh virtualenv, then its web process
# answering (about 2 minutes: most of it installing the packages).
image-check: $(STAMP)
	$(PYTHON) deploy/check_image.py

# Every benchmark, rewriting docs/benchmarks.md (about 20 minutes), on a PostgreSQL database and a
# Redis database the benchmarks flush and fill: never production's (`createdb trainyard_bench`).
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/trainyard_bench
BENCH_REDIS_URL    ?= redis://127.0.0.1:6379/3
bench: $(STAMP) bench-tools ray-tools
	DATABASE_URL=$(BENCH_DATABASE_URL) REDIS_URL=$(BENCH_REDIS_URL) $(PYTHON) -m bench

# The load benchmark's locust, in a virtualenv of its own (requirements-bench.txt), so that the
# console's and the tests' packages stay as they are.
BENCH_VENV := var/bench/venv
bench-tools: $(BENCH_VENV)/.installed
$(BENCH_VENV)/.installed: requirements-bench.txt
	@scripts/find-python >/dev/null
	$$(scripts/find-python) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade pip
	$(BENCH_VENV)/bin/pip install -q -r requirements-bench.txt
	touch $@

# The Ray benchmark's Ray (bench/ray_cluster.py): `ray[default]` in a virtualenv of its own
# (requirements-ray.txt), run as the RLinf template's head and worker on this machine.
RAY_VENV := var/bench/ray-venv
ray-tools: $(RAY_VENV)/.installed
$(RAY_VENV)/.installed: requirements-ray.txt
	@scripts/find-python >/dev/null
	$$(scripts/find-python) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/pip install -q --upgrade pip
	$(RAY_VENV)/bin/pip install -q -r requirements-ray.txt
	touch $@

browsers:
	@scripts/ensure-test-tools

clean:
	rm -rf $(VENV) var
