"""Settings of the test suite."""
import os

# The simulation harness is built at -O1 here, not at its -O2 default (tb/vharness.py, HARNESS_OPT):
# the builds take a quarter less CPU, which outweighs the slower runs of the tests' short simulations.
os.environ.setdefault("CXLKV_HARNESS_OPT", "-O1")
