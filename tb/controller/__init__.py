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
* ``controller_top`` (test module ``test_top.py``, environment ``topenv.py``): a cocotb bench of the
  top in its default structure (no host data path, no BI-snoop) against ``ControllerModel``: the
  registers configured over AXI4-Lite (the driver's writes mirrored into the model), random events and
  HDM accesses/hints with gaps, backpressure on ``decision`` and ``route``, both compared in order
  field for field, every register and the cold list compared after each phase, a negative test.
"""
from cxlkv.tb.runner import CocotbBench


def _make_dut(**params):
    from cxlkv.hdl.controller import Controller
    return Controller(**params)


#: a small geometry (2 layers x 2 KV heads x 64 positions, 4 slots per queue, 4 BITags) so that the
#: tracker evicts all the time with QUEUE_BUDGET = 2 and the filter stays small (2048 lines)
CXL_PARAMS = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4, "bitags": 4,
              "host_data": True, "bisnoop": True}

#: the default structure (tracker on chip, tier mover, prefetch engine, HDM decode; no host data path, no
#: BI-snoop) in a small geometry: 3 layers x 3 KV heads (the event port's 2-bit layer and head fields
#: reach the out-of-range 3), 64 positions, 4 slots per queue (QUEUE_BUDGET 2 to 4: evictions all the time)
TOP_PARAMS = {"n_layers": 3, "n_kv_heads": 3, "entries_log2": 6, "max_budget": 4}

BENCHES = [CocotbBench("controller_cxl", _make_dut, "cxlkv.tb.controller.test_cxl", CXL_PARAMS),
           CocotbBench("controller_top", _make_dut, "cxlkv.tb.controller.test_top", TOP_PARAMS)]
