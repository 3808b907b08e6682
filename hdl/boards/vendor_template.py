"""Template top for a PCIe/CXL-capable vendor board (documented, elaborated and linted; not built here).

A vendor CXL Type-3 IP (the Intel Agilex CXL design example is the reference,
../shared/reference/cxl-back-invalidate.md) terminates the link and hands user
logic three things; :class:`CXLVendorTop` exposes exactly those:

* ``s_axil``: AXI4-Lite from a PCIe BAR (the IP's user CSR window) to the
  controller's register block: the driver's ``mmio`` transport reaches it.
* ``m2s_req``, ``m2s_rwd``, ``m2s_birsp`` in and ``s2m_ndr``, ``s2m_drs``,
  ``s2m_bisnp`` out: the CXL.mem message channels, as ``lib.stream`` with the
  payload layouts of cxlkv.hdl.bisnoop (one message per beat; ``addr`` is the
  64-byte line address Addr[51:6]; one line of data per RwD/DRS beat).
* ``m_axi``: AXI4 towards device memory (the vendor's DDR/HBM controller),
  ``data_width`` bits (512: one line per beat), 52-bit byte address,
  ``ruser``/``wuser`` carrying poison, as the Agilex example does.

What the template does with HDM traffic today, one transaction at a time:
MemRd/MemRdData become an AXI4 read and a DRS MemData (an AXI error or
poison answers MemData-NXM), MemWr/MemWrPtl an AXI4 write (byte enables as
WSTRB) and an NDR Cmp, MemInv an NDR Cmp. Every other opcode and every BIRsp
is accepted and counted in ``unsupported``: the BI-snoop engine and the
tracker are in the controller (``Controller(host_data=True, bisnoop=True)``
takes CXL.mem itself), but this template does not route its streams through
them yet; it uses the controller for its registers only. No BISnp is sent,
and no meta state is kept: NDR and DRS carry MetaField NoOp and echo the
request's MetaValue.
A write's AXI error response (BRESP) is not reported: the NDR is Cmp
whatever BRESP says (CXL.mem has no error completion for a write; a full
design would poison the line so that a later read answers it).

Pin-out and clock constraints for such a board are vendor files
(constraints/vendor/): the template's clock is the IP's user clock, one domain.
"""
from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from cxlkv.hdl.bisnoop import birsp_layout, bisnp_layout, drs_layout, ndr_layout, req_layout, rwd_layout
from cxlkv.hdl.regs import AXI4LiteSignature
from cxlkv.models import bisnoop as cxl

OKAY = 0


class AXI4Signature(wiring.Signature):
    """AXI4 (full) from the master's side, single-beat use (LEN = 0), ``user`` bits on R and W."""

    def __init__(self, addr_width=52, data_width=512, id_width=8, user_width=1):
        super().__init__({
            "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1), "wuser": Out(user_width),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "ruser": In(user_width),
            "rvalid": In(1), "rready": Out(1),
        })


class CXLVendorTop(wiring.Component):
    """User-logic top for a vendor CXL Type-3 IP; ``controller`` are the Controller's parameters."""

    def __init__(self, data_width=512, addr_width=52, id_width=8, controller=None):
        self.data_width, self.addr_width = data_width, addr_width
        self.controller_params = dict(controller or {})
        super().__init__({
            "s_axil": In(AXI4LiteSignature()), "irq": Out(1),
            "m2s_req": In(stream.Signature(req_layout())),
            "m2s_rwd": In(stream.Signature(rwd_layout(data_width))),
            "m2s_birsp": In(stream.Signature(birsp_layout())),
            "s2m_ndr": Out(stream.Signature(ndr_layout())),
            "s2m_drs": Out(stream.Signature(drs_layout(data_width))),
            "s2m_bisnp": Out(stream.Signature(bisnp_layout())),
            "m_axi": Out(AXI4Signature(addr_width, data_width, id_width)),
            "unsupported": Out(16),
        })

    def elaborate(self, platform):
        from cxlkv.hdl.controller import Controller
        m = Module()
        m.submodules.controller = ctl = Controller(**self.controller_params)
        wiring.connect(m, wiring.flipped(self.s_axil), ctl.s_axil)
        m.d.comb += self.irq.eq(ctl.irq)

        axi = self.m_axi
        size = (self.data_width // 8).bit_length() - 1           # one full beat
        tag = Signal.like(self.m2s_req.payload.tag)
        is_nxm = Signal()
        rdata = Signal(self.data_width)
        m.d.comb += [axi.awlen.eq(0), axi.arlen.eq(0), axi.awsize.eq(size), axi.arsize.eq(size),
                     axi.awburst.eq(1), axi.arburst.eq(1), axi.wlast.eq(1), axi.wuser.eq(0),
                     axi.awid.eq(0), axi.arid.eq(0)]
        req, rwd = self.m2s_req.payload, self.m2s_rwd.payload
        line_addr = Signal(cxl.ADDR_BITS)
        m.d.comb += [axi.araddr.eq(line_addr << 6), axi.awaddr.eq(line_addr << 6)]
        wdata = Signal(self.data_width)
        wstrb = Signal(self.data_width // 8)
        m.d.comb += [axi.wdata.eq(wdata), axi.wstrb.eq(wstrb)]
        aw_done, w_done = Signal(name="aw_done"), Signal(name="w_done")

        # BIRsp belongs to the BI-snoop engine: accepted and counted until it is integrated
        m.d.comb += self.m2s_birsp.ready.eq(1)
        unsupported = Signal()
        count = unsupported.as_unsigned() + (self.m2s_birsp.valid & self.m2s_birsp.ready)
        with m.If(count != 0):                                   # saturating
            m.d.sync += self.unsupported.eq(Mux(self.unsupported > 0xFFFF - count, 0xFFFF, self.unsupported + count))

        # no meta state is kept without the BI-snoop engine: responses echo the request's MetaValue
        meta_value = Signal(2)
        m.d.comb += [self.s2m_drs.payload.meta_value.eq(meta_value), self.s2m_ndr.payload.meta_value.eq(meta_value)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.m2s_rwd.valid):                    # RwD first: it never waits for Req
                    m.d.comb += self.m2s_rwd.ready.eq(1)
                    m.d.sync += [tag.eq(rwd.tag), line_addr.eq(rwd.addr), wdata.eq(rwd.data), wstrb.eq(rwd.be),
                                 meta_value.eq(rwd.meta_value),
                                 aw_done.eq(0), w_done.eq(0)]
                    with m.If((rwd.opcode == cxl.RWD_OPS["MemWr"]) | (rwd.opcode == cxl.RWD_OPS["MemWrPtl"])):
                        m.next = "WRITE"
                    with m.Else():
                        m.d.comb += unsupported.eq(1)
                with m.Elif(self.m2s_req.valid):
                    m.d.comb += self.m2s_req.ready.eq(1)
                    m.d.sync += [tag.eq(req.tag), line_addr.eq(req.addr), meta_value.eq(req.meta_value)]
                    with m.If((req.opcode == cxl.REQ_OPS["MemRd"]) | (req.opcode == cxl.REQ_OPS["MemRdData"])):
                        m.next = "READ_ADDRESS"
                    with m.Elif(req.opcode == cxl.REQ_OPS["MemInv"]):
                        m.next = "NDR"
                    with m.Else():
                        m.d.comb += unsupported.eq(1)

            with m.State("READ_ADDRESS"):
                m.d.comb += axi.arvalid.eq(1)
                with m.If(axi.arready):
                    m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += axi.rready.eq(1)
                with m.If(axi.rvalid):
                    m.d.sync += [rdata.eq(axi.rdata), is_nxm.eq((axi.rresp != OKAY) | axi.ruser[0])]
                    m.next = "DRS"
            with m.State("DRS"):
                drs = self.s2m_drs.payload
                m.d.comb += [self.s2m_drs.valid.eq(1), drs.tag.eq(tag), drs.data.eq(rdata),
                             drs.opcode.eq(is_nxm.as_unsigned() * cxl.DRS_OPS["MemData-NXM"]),
                             drs.meta_field.eq(cxl.META_FIELDS["NoOp"])]
                with m.If(self.s2m_drs.ready):
                    m.next = "IDLE"

            with m.State("WRITE"):                                 # AW and W together, each held until taken
                m.d.comb += [axi.awvalid.eq(~aw_done), axi.wvalid.eq(~w_done)]
                with m.If(axi.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(axi.wready):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | axi.awready) & (w_done | axi.wready)):
                    m.next = "WRITE_RESPONSE"
            with m.State("WRITE_RESPONSE"):
                m.d.comb += axi.bready.eq(1)
                with m.If(axi.bvalid):
                    m.next = "NDR"
            with m.State("NDR"):
                ndr = self.s2m_ndr.payload
                m.d.comb += [self.s2m_ndr.valid.eq(1), ndr.tag.eq(tag), ndr.opcode.eq(cxl.NDR_OPS["Cmp"]),
                             ndr.meta_field.eq(cxl.META_FIELDS["NoOp"])]
                with m.If(self.s2m_ndr.ready):
                    m.next = "IDLE"
        return m


def verilog_tops():
    return {"cxl_vendor_top": lambda: CXLVendorTop()}
