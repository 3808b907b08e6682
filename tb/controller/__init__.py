"""Checks of the controller top: the Verilated harness (cxlkv.tb.vharness) against the model.

The block benches verify each block with cocotb; the controller is exercised
through the same host driver over the ``sim`` and ``model`` transports
(tests/test_controller.py), at C++ speed.
"""
