"""Golden models: the single source of truth for every block's semantics.

The RTL in cxlkv.hdl is checked against these bit for bit.
"""
