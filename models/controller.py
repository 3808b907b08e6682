"""Golden model of the controller top (hdl/controller.py), as the host sees it through registers.

Work in progress with the integration issue: today the top holds the register
block, the per-queue format table behind FMT_SEL/FMT_DATA, and the cold-list
ring memory, with the geometry fixed by parameters. The blocks (tracker,
scoring, prefetch, quantizer, BI-snoop) join it as they are integrated.
"""
from __future__ import annotations

from cxlkv.models import regmap
from cxlkv.models.regs import FormatTable, RegisterFile

COLDLIST = regmap.MEMORIES[0]


class ControllerModel:
    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16):
        self.n_queues = n_layers * n_kv_heads
        self.regs = RegisterFile()
        self.formats = FormatTable(self.n_queues, self.regs)
        self.coldlist = [0] * COLDLIST.entries
        self.regs.external = self
        for field, v in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads)):
            self.regs.set_hw("GEOMETRY", field, v)
        for field, v in (("entries_log2", entries_log2), ("bitags", bitags), ("coldlist_depth", COLDLIST.entries)):
            self.regs.set_hw("GEOMETRY2", field, v)

    # external window of the register block
    def read(self, name, word):
        if name == COLDLIST.name:
            return (self.coldlist[word // 2] >> (32 * (word % 2))) & 0xFFFFFFFF, True
        return self.formats.read(name, word)

    def write(self, name, data, strb):
        return self.formats.write(name, data, strb)

    # the host's view
    def read32(self, addr: int) -> tuple[int, int]:
        return self.regs.read(addr)

    def write32(self, addr: int, value: int) -> int:
        return self.regs.write(addr, value)
