"""The controller top level (being integrated; docs/controller.md).

Today: the register block (AXI4-Lite), geometry constants, the per-queue
storage-format table behind FMT_SEL/FMT_DATA, and the cold-list ring memory.
The blocks join as they are integrated; CAPS says which are present.
"""
from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl.regs import AXI4LiteSignature, RegisterBlock
from cxlkv.models import regmap

COLDLIST = regmap.MEMORIES[0]
FMT_DATA = regmap.BY_NAME["FMT_DATA"]


class Controller(wiring.Component):
    """Controller top.

    Parameters: ``n_layers``, ``n_kv_heads`` (queues = their product),
    ``entries_log2`` (positions tracked per queue), ``bitags`` (BI-snoop tags).
    Ports: ``s_axil`` (AXI4-Lite register slave), ``irq``.
    """

    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16):
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self.entries_log2, self.bitags = entries_log2, bitags
        super().__init__({"s_axil": In(AXI4LiteSignature()), "irq": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock()
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        m.d.comb += [
            self.irq.eq(regs.irq),
            regs.geometry_n_layers.eq(self.n_layers),
            regs.geometry_n_kv_heads.eq(self.n_kv_heads),
            regs.geometry2_entries_log2.eq(self.entries_log2),
            regs.geometry2_bitags.eq(self.bitags),
            regs.geometry2_coldlist_depth.eq(COLDLIST.entries),
        ]

        # external window: answers one cycle after the strobe
        n_queues = self.n_layers * self.n_kv_heads
        m.submodules.formats = fmt = Memory(shape=2, depth=n_queues, init=[])
        fmt_rd = fmt.read_port(domain="comb")
        fmt_wr = fmt.write_port()
        m.submodules.coldlist = cold = Memory(shape=64, depth=COLDLIST.entries, init=[])
        cold_rd = cold.read_port(domain="comb")

        ext = regs.ext
        sel = regs.fmt_sel_queue
        sel_ok = sel < n_queues
        is_fmt = ext.addr == FMT_DATA.offset
        word = Signal(range(COLDLIST.size // 4))
        m.d.comb += [
            word.eq((ext.addr - COLDLIST.offset) >> 2),
            fmt_rd.addr.eq(sel),
            cold_rd.addr.eq(word >> 1),
        ]
        # the table write is registered (timing); the next bus access is cycles away
        m.d.sync += [fmt_wr.addr.eq(sel), fmt_wr.data.eq(ext.wdata[:2]),
                     fmt_wr.en.eq(ext.we & is_fmt & sel_ok & ext.wstrb[0])]
        rdata = Signal(32)
        err = Signal()
        with m.If(ext.re | ext.we):
            with m.If(is_fmt):
                m.d.sync += [rdata.eq(Mux(sel_ok, fmt_rd.data, 0)), err.eq(~sel_ok)]
            with m.Else():                              # cold-list window (read only)
                m.d.sync += [rdata.eq(Mux(word[0], cold_rd.data[32:], cold_rd.data[:32])), err.eq(ext.we)]
        m.d.comb += [ext.rdata.eq(rdata), ext.err.eq(err)]
        return m


def verilog_tops():
    return {"controller": lambda: Controller(),
            # the full Llama-70B geometry must elaborate and lint
            "controller_llama70b": lambda: Controller(n_layers=80, n_kv_heads=8, entries_log2=17)}
