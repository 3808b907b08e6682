"""Checks of the controller top.

* The Verilated harness (cxlkv.tb.vharness) against the model: the controller is exercised through
  the same host driver over the ``sim`` and ``model`` transports (tests/test_controller.py,
  tests/test_datapath.py), at C++ speed.
* ``controller_cxl`` (this package's ``BENCHES``; test module ``test_cxl.py``, environment
  ``cxlhost.py``): a cocotb bench of the top with the host data path and the BI-snoop engine
  (``host_data=True, bisnoop=True``) on its CXL.mem ports: MESI host caches (tb/bisnoop/host.py)
  with random traffic and backpressure, every MemData against the host's newest write through the
  queue's format, the engine in situ against ``cxlkv.models.bisnoop``, counters, error cases and a
  BIRsp timeout, and negative tests of both scoreboards.
"""
from cxlkv.tb.runner import CocotbBench


def _make_dut(**params):
    from cxlkv.hdl.controller import Controller
    return Controller(**params)


#: a small geometry (2 layers x 2 KV heads x 64 positions, 4 slots per queue, 4 BITags) so that the
#: tracker evicts all the time with QUEUE_BUDGET = 2 and the filter stays small (2048 lines)
CXL_PARAMS = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4, "bitags": 4,
              "host_data": True, "bisnoop": True}

BENCHES = [CocotbBench("controller_cxl", _make_dut, "cxlkv.tb.controller.test_cxl", CXL_PARAMS)]
