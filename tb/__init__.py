"""cocotb benches (one subpackage per block), their runner, lint, regression and benchmarks."""
