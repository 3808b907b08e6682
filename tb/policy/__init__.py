"""Benchmarks of the policy simulator (cxlkv.models.policy); no RTL, so no cocotb BENCHES."""
