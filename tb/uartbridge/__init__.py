"""cocotb bench of the UART bridge (cxlkv.hdl.uartbridge) in front of the controller top,
against the protocol model (cxlkv.models.uartbridge) and the controller model.

A fast divisor (5 clock cycles per bit) and a short frame timeout keep the
bit-level simulation quick; both are parameters of the RTL.
"""
from cxlkv.tb.runner import CocotbBench

#: parameters of the bench's DUT (BridgedController with the default small controller)
PARAMS = {"divisor": 5, "timeout_cycles": 200}


def _make_dut(divisor, timeout_cycles):
    from cxlkv.hdl.uartbridge import BridgedController
    return BridgedController(divisor=divisor, timeout_cycles=timeout_cycles)


BENCHES = [CocotbBench("uartbridge", _make_dut, "cxlkv.tb.uartbridge.test_uartbridge", PARAMS)]
