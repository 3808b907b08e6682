"""Amaranth gateware of the cxlkv controller: one component per block."""
