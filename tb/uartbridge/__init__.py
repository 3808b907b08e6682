"""cocotb bench of the UART bridge (cxlkv.hdl.uartbridge) in front of the controller top,
against the protocol model (cxlkv.models.uartbridge) and the controller model.

A fast divisor (5 clock cycles per bit), a short frame timeout, event batches of at
most 8 records and a 20,000-cycle decision timeout (more than the tracker's memory
sweep of 8,192 cycles after CONTROL.enable) keep the bit-level simulation quick; all
are parameters of the RTL.
"""
from cxlkv.tb.runner import CocotbBench

#: parameters of the bench's DUT (BridgedController with the default small controller)
PARAMS = {"divisor": 5, "timeout_cycles": 200, "event_batch": 8, "event_timeout_cycles": 20000}


def _make_dut(divisor, timeout_cycles, event_batch, event_timeout_cycles):
    from cxlkv.hdl.uartbridge import BridgedController
    return BridgedController(divisor=divisor, timeout_cycles=timeout_cycles, event_batch=event_batch,
                             event_timeout_cycles=event_timeout_cycles)


BENCHES = [CocotbBench("uartbridge", _make_dut, "cxlkv.tb.uartbridge.test_uartbridge", PARAMS)]
