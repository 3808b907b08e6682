"""Settings of the test suite."""
import os

# The simulation harness is built at -O1 here, not at its -O2 default (tb/vharness.py, HARNESS_OPT):
# the builds take a quarter less CPU, which outweighs the slower runs of the tests' short simulations.
os.environ.setdefault("CXLKV_HARNESS_OPT", "-O1")

# The slow tests, started first. `make test` runs two xdist workers that take one test at a time
# (`--maxschedchunk 1`), so the long ones start at once and the short ones fill in behind them:
# in collection order the cocotb benches all fell to one worker and the run ended serially.
# Seconds of a CI run (fresh clone of 25ece77, 2 cores, alone, `--durations=60`); only their order
# matters. A test not listed here costs 0 and keeps its place in collection order; the first test
# of a module whose fixture builds a simulation harness carries the build.
SLOW_FIRST = {
    "tests/test_cocotb.py::test_cocotb_bench[controller_cxl-": 312,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-inflight4-": 197,
    "tests/test_cocotb.py::test_cocotb_bench[uartbridge-": 190,
    "tests/test_cocotb.py::test_cocotb_bench[quant-": 187,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-max_budget16-": 155,
    "tests/test_datapath.py::test_random_line_traffic_sim_equals_model[False-0]": 150,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_llama70b]": 127,
    "tests/test_cocotb.py::test_cocotb_bench[tracker_axi4-": 94,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-n_buckets128-": 93,
    "tests/test_controller.py::test_sim_equals_model_on_random_register_traffic": 91,
    "tests/test_controller.py::test_error_decisions_are_tier_bypasses": 82,
    "tests/test_cocotb.py::test_cocotb_bench[hdm-": 75,
    "tests/test_cocotb.py::test_cocotb_bench[controller_top-": 72,
    "tests/test_lint.py::test_generated_verilog_lints_clean[tracker_full]": 70,
    "tests/test_controller.py::test_replay_in_the_board_structure_equals_policy_hw": 63,
    "tests/test_cocotb.py::test_controller_cxl_heavy_at_the_seed_that_deadlocked_the_evict_gate": 61,
    "tests/test_cocotb.py::test_cocotb_bench[prefetch-": 57,
    "tests/test_cocotb.py::test_cocotb_bench[tiermover-": 52,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_bisnoop]": 50,
    "tests/test_cocotb.py::test_cocotb_bench[scoring-": 48,
    "tests/test_cocotb.py::test_cocotb_bench[regs-": 46,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_host_data]": 37,
    "tests/test_bisnoop_rtl.py::test_directed_scenarios_rtl_equals_model": 36,
    "tests/test_cocotb.py::test_cocotb_bench[metaaxi-": 32,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller]": 31,
    "tests/test_lint.py::test_generated_verilog_lints_clean[uartbridge_controller]": 30,
    "tests/test_controller.py::test_prefetch_replay_shipped_trace_sim_equals_policy_hw": 29,
    "tests/test_cocotb.py::test_cocotb_bench[phase-": 28,
    "tests/test_lint.py::test_generated_verilog_lints_clean[cxl_vendor_top]": 27,
    "tests/test_datapath.py::test_random_line_traffic_sim_equals_model[True-0]": 23,
}


def expected_seconds(nodeid: str) -> float:
    return max((s for prefix, s in SLOW_FIRST.items() if nodeid.startswith(prefix)), default=0)


def pytest_collection_modifyitems(items):
    # stable: the unlisted tests keep their order, so a module's tests still run side by side
    items.sort(key=lambda item: -expected_seconds(item.nodeid))
