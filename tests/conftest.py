"""Settings of the test suite."""
import os

# The simulation harness is built at -O1 here, not at its -O2 default (tb/vharness.py, HARNESS_OPT):
# the builds take a quarter less CPU, which outweighs the slower runs of the tests' short simulations.
os.environ.setdefault("CXLKV_HARNESS_OPT", "-O1")

# The slow tests, started first. `make test` runs two xdist workers that take one test at a time
# (`--maxschedchunk 1`), so the long ones start at once and the short ones fill in behind them:
# in collection order the cocotb benches all fell to one worker and the run ended serially.
# Seconds of a CI run (fresh clone of afcdddd, 2 cores, `--durations=40`, beside a board build); only
# their order matters. A test not listed here costs 0 and keeps its place in collection order; the
# first test of a module whose fixture builds a simulation harness carries the build.
SLOW_FIRST = {
    "tests/test_cocotb.py::test_cocotb_bench[controller_cxl-": 432,
    "tests/test_cocotb.py::test_cocotb_bench[quant-": 211,
    "tests/test_datapath.py::test_random_line_traffic_sim_equals_model[False-0]": 186,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_llama70b]": 152,
    "tests/test_cocotb.py::test_cocotb_bench[uartbridge-": 147,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-inflight4-": 135,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-max_budget16-": 125,
    "tests/test_cocotb.py::test_cocotb_bench[tracker_axi4-": 119,
    "tests/test_lint.py::test_generated_verilog_lints_clean[tracker_full]": 110,
    "tests/test_cocotb.py::test_cocotb_bench[hdm-": 100,
    "tests/test_cocotb.py::test_cocotb_bench[tracker-n_buckets128-": 96,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_bisnoop]": 84,
    "tests/test_cocotb.py::test_cocotb_bench[prefetch-": 82,
    "tests/test_cocotb.py::test_cocotb_bench[scoring-": 70,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller_host_data]": 68,
    "tests/test_controller.py::test_sim_equals_model_on_random_register_traffic": 67,
    "tests/test_cocotb.py::test_cocotb_bench[regs-": 65,
    "tests/test_controller.py::test_error_decisions_are_tier_bypasses": 60,
    "tests/test_cocotb.py::test_controller_cxl_heavy_at_the_seed_that_deadlocked_the_evict_gate": 54,
    "tests/test_cocotb.py::test_cocotb_bench[phase-": 49,
    "tests/test_lint.py::test_generated_verilog_lints_clean[controller]": 47,
    "tests/test_cocotb.py::test_cocotb_bench[tiermover-": 40,
    "tests/test_controller.py::test_replay_in_the_board_structure_equals_policy_hw": 42,
    "tests/test_lint.py::test_generated_verilog_lints_clean[cxl_vendor_top]": 40,
    "tests/test_lint.py::test_generated_verilog_lints_clean[uartbridge_controller]": 38,
    "tests/test_bisnoop_rtl.py::test_directed_scenarios_rtl_equals_model": 35,
    "tests/test_cocotb.py::test_cocotb_bench[metaaxi-": 34,
    "tests/test_cli_policy.py::test_sweep_writes_csv_and_png": 28,
}


def expected_seconds(nodeid: str) -> float:
    return max((s for prefix, s in SLOW_FIRST.items() if nodeid.startswith(prefix)), default=0)


def pytest_collection_modifyitems(items):
    # stable: the unlisted tests keep their order, so a module's tests still run side by side
    items.sort(key=lambda item: -expected_seconds(item.nodeid))
