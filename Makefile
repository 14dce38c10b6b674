# Two commands do all the set-up on a fresh machine:
#   make test        create .venv (if missing), install sparsetir[test] under constraints.txt, run pytest
#   make reproduce   (arrives with the benchmark-harness issue)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# Real graphs for tests and benchmarks: the offline mirror next to the checkout, unless set already.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)),)
export SPARSETIR_DATA_MIRROR ?= $(SHARED_DATA)
endif

.PHONY: test venv bench reproduce clean

BENCH_FEATS ?= 32 64 128 256

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

# CSR SpMM against the best CPU library on the benchmark graphs (prints medians and ratios).
bench: $(STAMP)
	mkdir -p results
	$(PY) -m sparsetir.bench.quick spmm --dataset all-benchmark $(foreach f,$(BENCH_FEATS),--feat $(f)) \
		--exclude torch-dense --json results/quick-spmm.json

reproduce:
	@echo 'make reproduce arrives with the benchmark-harness issue (#4); nothing to run yet.' >&2; exit 2

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
