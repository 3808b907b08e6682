"""FPGA boards: platform definitions and board tops (docs/fpga.md, docs/bringup.md).

A :class:`Board` names an amaranth-boards platform and what the board top
needs from it (input clock, reset button, LEDs) plus the controller
configuration that fits the part. ``BOARDS`` is what
``python -m cxlkv.sw.fpga bitstream --board NAME`` accepts.

``vendor_template`` is the documented wrapper for a PCIe/CXL vendor board
(not built here); its ``verilog_tops`` make it elaborate and lint.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from cxlkv.errors import CxlkvError


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    platform: Callable[[], object]          # returns the amaranth-boards platform (Trellis toolchain)
    clock: str                              # resource name of the input clock
    clock_mhz: float
    reset_button: tuple                     # (resource name, number), active high after the platform's inversion
    leds: Callable[[object], list]          # platform -> LED ports (dir="-"), in the indicator order of ecp5.LEDS
    controller: dict = field(default_factory=dict)   # Controller parameters that fit the part
    core_mhz: float = 125.0                 # default core clock; the boards set one their top closes (docs/fpga.md)
    #: nextpnr's seed for the default build (None: nextpnr's own): one its netlist routes with (docs/bringup.md)
    nextpnr_seed: int | None = None
    program: str = ""                       # how to load the bitstream (docs)


def boards() -> dict:
    from cxlkv.hdl.boards import ecpix5, ulx3s
    return {b.name: b for b in (ulx3s.BOARD, ecpix5.BOARD)}


def get_board(name: str) -> Board:
    known = boards()
    try:
        return known[name]
    except KeyError:
        raise CxlkvError(f"unknown board {name!r}; known: {', '.join(sorted(known))}") from None


def verilog_tops():
    from cxlkv.hdl.boards.vendor_template import verilog_tops as vendor
    return vendor()
