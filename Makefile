# Two commands do all the set-up on a fresh machine:
#   make test        create .venv (if missing), install sparsetir[test,bench,dgl,conv,kubernetes] under constraints.txt, run pytest
#                    (including the smoke workflow, workflows/config/smoke.yaml)
#   make reproduce   the same set-up, then the default workflow on CPU (embedded + mirror data)
#   make mutate      mutation testing of the core with mutmut (docs/mutation.md): slow, not in CI;
#                    MUTATE='<glob>' tests only the mutants whose names match, e.g. 'sparsetir.timing.timer*'
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS := test,bench,dgl,conv,kubernetes
STAMP := $(VENV)/.installed-test-bench-dgl-conv-kubernetes
CORES ?= $(shell nproc 2>/dev/null || echo 2)
SNAKEMAKE := $(VENV)/bin/snakemake

# Real graphs for tests and benchmarks: the offline mirror next to the checkout, unless set already.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)),)
export SPARSETIR_DATA_MIRROR ?= $(SHARED_DATA)
endif

.PHONY: test test-fast fuzz lint mutate venv bench reproduce smoke compare report unlock clean

BENCH_FEATS ?= 32 64 128 256
BENCH_TUNE_S ?= 30

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

# The tests not marked slow (no workflow runs, tuner runs, subprocess batteries or real-graph sweeps):
# every package area in under two minutes. `make test` still runs everything.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

# The fuzz suite (tests/fuzz/, docs/nan-semantics.md): seeded hostile arguments for every public entry point
# (the ops in the op registry, runtime.load of tampered exports, the data parsers), case after case in worker
# processes that a crash only ends for that case; FUZZ_BUDGET_S seconds (make test runs its first 120 cases). Exits 1
# and lists the cases on any crash, raw exception or wrong answer.
FUZZ_BUDGET_S ?= 1200
FUZZ_SEED ?= 0
fuzz: $(STAMP)
	mkdir -p results
	$(PY) tests/fuzz/driver.py --budget-s $(FUZZ_BUDGET_S) --seed $(FUZZ_SEED) --json results/fuzz.json

# ruff (lint and import order, pyproject.toml), import-linter (the layers of docs/architecture.md, no cycles
# among a package's modules) and no import cycle between any two modules, imports inside functions included
lint: $(STAMP)
	$(VENV)/bin/ruff check sparsetir baselines workflows tests
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -p no:cacheprovider tests/test_import_graph.py

# Mutation testing (docs/mutation.md): mutmut plants one small bug at a time in the modules that
# [tool.mutmut] in pyproject.toml names and runs the tests that cover it; the verdicts stay in mutants/
# (git-ignored), so a rerun tests only what changed. Hours for everything: MUTATE narrows it to the
# mutants whose names match its globs. The list at the end is every mutant the tests did not kill.
MUTATE ?=
MUTATE_JOBS ?= $(CORES)
mutate: $(STAMP)
	set -f; SPARSETIR_CACHE_DIR=$(abspath .cache/mutate-kernels) TVM_NUM_THREADS=1 OMP_NUM_THREADS=1 \
		$(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS) $(MUTATE); status=$$?; \
		$(VENV)/bin/mutmut results; exit $$status

# CSR and tuned SpMM against the best CPU library on the benchmark graphs (prints medians and ratios);
# each case is tuned first for up to BENCH_TUNE_S seconds (or taken from the tuning database).
# The row "csr on local columns" is the CSR kernel on the same degrees with local columns; every row
# also gets "% bound", against the slowest of the DRAM, gather and flops models (sparsetir/bench/bounds.py).
bench: $(STAMP)
	mkdir -p results
	$(PY) -m sparsetir.timing --json results/machine-quick.json
	$(PY) -m sparsetir.bench.quick spmm --dataset all-benchmark $(foreach f,$(BENCH_FEATS),--feat $(f)) \
		--tune $(BENCH_TUNE_S) --locality-bound --json results/quick-spmm.json

# The default workflow (workflows/config/default.yaml) on CPU. A run that was killed resumes:
# finished cases are kept, unfinished ones are redone (--rerun-incomplete after --unlock). It ends
# with results/report.{md,html} and a one-screen summary (geomeans, what did not run, time per stage).
# The workflow starts with the machine check (results/machine.json); `timing: {strict: true}` in the
# config refuses a busy machine.
reproduce: $(STAMP)
	$(SNAKEMAKE) --unlock --cores 1 >/dev/null
	$(SNAKEMAKE) --cores $(CORES) --rerun-incomplete --keep-going; status=$$?; \
		$(PY) -m sparsetir.bench.report.endrun results; exit $$status

# The smoke config (tiny inputs, about 3 minutes): results/smoke/, with its report and summary.
smoke: $(STAMP)
	$(SNAKEMAKE) --unlock --cores 1 --configfile workflows/config/smoke.yaml >/dev/null
	$(SNAKEMAKE) --cores $(CORES) --configfile workflows/config/smoke.yaml --rerun-incomplete --keep-going; \
		status=$$?; $(PY) -m sparsetir.bench.report.endrun results/smoke; exit $$status

# Two runs side by side, case by case (default: the committed reference run and results/; or
# make compare RUN_A=<folder> RUN_B=<folder>): clean cases judged against RUN_A's intervals,
# contaminated ones (the interference sentinel's) listed apart; the last line is
# "agreement: N of M clean cases within the spread (K contaminated)".
RUN_A ?= results/reference/cpu/workflow
RUN_B ?= results
compare: $(STAMP)
	mkdir -p results
	$(PY) -m sparsetir.bench.report.compare $(RUN_A) $(RUN_B) -o results/compare.md

# Rebuild only the report (report.md, report.html) from existing results.
report: $(STAMP)
	$(SNAKEMAKE) --cores 1 results/report.md

# Release the lock a killed snakemake run leaves behind (reproduce does this itself).
unlock: $(STAMP)
	$(SNAKEMAKE) --unlock --cores 1

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
