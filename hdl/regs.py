"""Register block: an AXI4-Lite slave generated from the register map table.

The table (cxlkv.models.regmap) is generated from ``hdl/regs.rdl``; this
component is built from it at elaboration, so register layout, resets,
access rules and range checks have one source. Behaviour is that of the
golden model cxlkv.models.regs (see docs/regs.md); tb/regs checks it with
cocotbext-axi against the model.

Ports, per field of the table (``<register>_<field>``, lower case):

* software-writable configuration fields: ``Out(width)``;
* ``singlepulse`` fields: ``Out(1)``, high for one cycle after a write of 1;
* ``hwset`` sticky bits: ``In(1)`` named ``..._set``: a pulse sets the bit
  (a set in the same cycle as a software clear wins);
* hardware-driven fields (status, geometry, counters): ``In(width)``;
* ``ext``: the window for external registers and memories: a one-cycle
  ``re``/``we`` strobe with ``addr``/``wdata``/``wstrb``; the responder answers
  ``rdata``/``err`` on the following cycle.
* ``irq``: ``(IRQ_STATUS & IRQ_ENABLE) != 0``.

One transaction at a time: a write needs AW and W together; B follows 3
cycles after the handshake (the range check has a cycle of its own), R after 2
(one more for external targets).
"""
from contextlib import contextmanager

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cxlkv.models import regmap
from cxlkv.models.regdefs import Field, Register
from cxlkv.models.regs import INTERNAL_FIELDS, OKAY, SLVERR

ADDR_WIDTH = 12          # 4 KiB window


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite, 32-bit data, from the master's side (a slave port is ``In(...)``)."""

    def __init__(self, addr_width=ADDR_WIDTH):
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


class ExternalSignature(wiring.Signature):
    """External register/memory window, from the register block's side."""

    def __init__(self, addr_width=ADDR_WIDTH):
        super().__init__({
            "addr": Out(addr_width), "re": Out(1), "we": Out(1), "wdata": Out(32), "wstrb": Out(4),
            "rdata": In(32), "err": In(1),
        })


def port_name(reg: Register, f: Field) -> str:
    return f"{reg.name.lower()}_{f.name}"


def _field_kind(reg: Register, f: Field) -> str:
    if (reg.name, f.name) in INTERNAL_FIELDS:
        return "internal"
    if f.singlepulse:
        return "pulse"
    if f.hwset:
        return "sticky"
    if f.sw_writable:
        return "woclr" if f.woclr else "config"
    if f.hw_driven:
        return "input"
    return "const"


class RegisterBlock(wiring.Component):
    """The controller's CSR block, generated from ``cxlkv.models.regmap``."""

    def __init__(self, addr_width=ADDR_WIDTH):
        self.addr_width = addr_width
        # read_hold: a read waits (ARREADY low) while the owner's status derived from the
        # configuration is settling, so a read right after a write sees the settled status
        members = {"s_axil": In(AXI4LiteSignature(addr_width)), "ext": Out(ExternalSignature(addr_width)),
                   "irq": Out(1), "read_hold": In(1)}
        for reg in regmap.REGISTERS:
            if reg.external:
                continue
            for f in reg.fields:
                kind = _field_kind(reg, f)
                name = port_name(reg, f)
                if kind == "config":
                    members[name] = Out(f.width, init=f.reset or 0)
                elif kind == "pulse":
                    members[name] = Out(1)
                elif kind == "sticky":
                    members[f"{name}_set"] = In(1)
                elif kind == "input":
                    members[name] = In(f.width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        aw = self.addr_width

        # storage of every software-held, sticky and internal field
        store = {}
        for reg in regmap.REGISTERS:
            if reg.external:
                continue
            for f in reg.fields:
                kind = _field_kind(reg, f)
                if kind in ("config", "woclr", "sticky", "internal"):
                    store[(reg.name, f.name)] = Signal(f.width, init=f.reset or 0,
                                                       name=f"r_{port_name(reg, f)}")
                if kind == "config":
                    m.d.comb += getattr(self, port_name(reg, f)).eq(store[(reg.name, f.name)])

        def field_value(reg, f):
            kind = _field_kind(reg, f)
            if kind == "pulse":
                return Const(0, f.width)
            if kind == "input":
                return getattr(self, port_name(reg, f))
            if kind == "const":
                return Const(f.reset or 0, f.width)
            return store[(reg.name, f.name)]

        def reg_value(reg):
            value = Signal(reg.width, name=f"v_{reg.name.lower()}")
            for f in reg.fields:
                m.d.comb += value[f.lsb:f.lsb + f.width].eq(field_value(reg, f))
            return value

        values = {reg.name: reg_value(reg) for reg in regmap.REGISTERS if not reg.external}
        m.d.comb += self.irq.eq((values["IRQ_STATUS"] & values["IRQ_ENABLE"]).any())

        addr = Signal(aw)
        wdata = Signal(32)
        wstrb = Signal(4)
        resp = Signal(2)
        ranged = [r for r in regmap.REGISTERS if not r.external and r.words == 1 and any(
            f.sw_writable and _field_kind(r, f) == "config" and (
                (f.range_min or 0) > 0 or (f.range_max is not None and f.range_max < (1 << f.width) - 1))
            for f in r.fields)]
        # per ranged register: the write in flight would put a field out of range (CHECK state)
        refuse = {r.name: Signal(name=f"refuse_{r.name.lower()}") for r in ranged}
        rdata = Signal(32)
        hi_latch = {reg.name: Signal(32, name=f"hi_{reg.name.lower()}")
                    for reg in regmap.REGISTERS if reg.words == 2}
        bmask = Signal(32)
        m.d.comb += bmask.eq(Cat(*[wstrb[i].replicate(8) for i in range(4)]))

        ext_hit = Signal()          # addr selects an external register or a memory window
        ext_cases = [r.offset for r in regmap.REGISTERS if r.external]
        hit = Const(0, 1)
        for off in ext_cases:
            hit = hit | (addr == off)
        for mem in regmap.MEMORIES:
            hit = hit | ((addr >= mem.offset) & (addr < mem.offset + mem.size) & (addr[:2] == 0))
        m.d.comb += ext_hit.eq(hit)
        mem_hit = Const(0, 1)
        for mem in regmap.MEMORIES:
            mem_hit = mem_hit | ((addr >= mem.offset) & (addr < mem.offset + mem.size))

        m.d.comb += [self.ext.addr.eq(addr), self.ext.wdata.eq(wdata), self.ext.wstrb.eq(wstrb)]

        pulses = {}
        for reg in regmap.REGISTERS:
            for f in reg.fields:
                if not reg.external and _field_kind(reg, f) == "pulse":
                    pulses[(reg.name, f.name)] = getattr(self, port_name(reg, f))
                    m.d.sync += getattr(self, port_name(reg, f)).eq(0)

        def reject():
            m.d.sync += [store[("STATUS", "cfg_reject")].eq(1), store[("IRQ_STATUS", "cfg_reject")].eq(1),
                         store[("REJECT_ADDR", "addr")].eq(addr), resp.eq(SLVERR)]

        @contextmanager
        def local_or_external(ext_sel, ext_strobe, ext_state, resp_state):
            """WRITE / READ: an access in the external window strobes it and waits (``ext_state``);
            any other is decoded here by address (the body: a ``m.Case`` per register) and
            answered from ``resp_state``."""
            with m.If(ext_sel):
                m.d.comb += ext_strobe.eq(1)
                m.next = ext_state
            with m.Else():
                m.next = resp_state
                with m.Switch(addr):
                    yield

        with m.FSM():
            with m.State("IDLE"):
                with m.If(bus.awvalid & bus.wvalid):
                    m.d.comb += [bus.awready.eq(1), bus.wready.eq(1)]
                    # byte lanes come from WSTRB: the low address bits are ignored (AXI4-Lite)
                    m.d.sync += [addr.eq(bus.awaddr & ~3), wdata.eq(bus.wdata), wstrb.eq(bus.wstrb)]
                    m.next = "CHECK"
                with m.Elif(bus.arvalid & ~self.read_hold):
                    m.d.comb += bus.arready.eq(1)
                    m.d.sync += addr.eq(bus.araddr & ~3)
                    m.next = "READ"

            with m.State("CHECK"):                   # the range flags settle (below)
                m.next = "WRITE"

            with m.State("WRITE"):
                m.d.sync += resp.eq(SLVERR)               # unless a case below accepts it
                with local_or_external(ext_hit & ~mem_hit, self.ext.we, "WRITE_EXT", "BRESP"):
                    for reg in regmap.REGISTERS:
                        if reg.external or not reg.sw_writable or reg.words != 1:
                            continue
                        with m.Case(reg.offset):
                            if reg.name in refuse:
                                with m.If(refuse[reg.name]):
                                    reject()
                                with m.Else():
                                    self._write_register(m, reg, store, pulses, wdata, bmask, resp)
                            else:
                                self._write_register(m, reg, store, pulses, wdata, bmask, resp)

            with m.State("WRITE_EXT"):
                m.d.sync += resp.eq(Mux(self.ext.err, SLVERR, OKAY))
                m.next = "BRESP"

            with m.State("BRESP"):
                m.d.comb += [bus.bvalid.eq(1), bus.bresp.eq(resp)]
                with m.If(bus.bready):
                    m.next = "IDLE"

            with m.State("READ"):
                m.d.sync += [rdata.eq(0), resp.eq(SLVERR)]
                with local_or_external(ext_hit, self.ext.re, "READ_EXT", "RRESP"):
                    for reg in regmap.REGISTERS:
                        if reg.external:
                            continue
                        v = values[reg.name]
                        if reg.words == 1:
                            with m.Case(reg.offset):
                                m.d.sync += [rdata.eq(v), resp.eq(OKAY)]
                        else:
                            with m.Case(reg.offset):
                                m.d.sync += [rdata.eq(v[:32]), resp.eq(OKAY), hi_latch[reg.name].eq(v[32:])]
                            with m.Case(reg.offset + 4):
                                m.d.sync += [rdata.eq(hi_latch[reg.name]), resp.eq(OKAY)]

            with m.State("READ_EXT"):
                m.d.sync += [rdata.eq(Mux(self.ext.err, 0, self.ext.rdata)), resp.eq(Mux(self.ext.err, SLVERR, OKAY))]
                m.next = "RRESP"

            with m.State("RRESP"):
                m.d.comb += [bus.rvalid.eq(1), bus.rdata.eq(rdata), bus.rresp.eq(resp)]
                with m.If(bus.rready):
                    m.next = "IDLE"

        # Every register's range check on the latched write, registered every cycle (no
        # enable: off the FSM's decode). wdata is latched in IDLE and the stored fields do not
        # change in CHECK, so in WRITE the flags describe the write in flight; WRITE only
        # selects the addressed one. Compare chains, decode and update then take two cycles.
        for reg in ranged:
            m.d.sync += refuse[reg.name].eq(self._out_of_range(m, reg, store, wdata, bmask))

        # hardware events last: a set in the same cycle as a software clear wins
        for reg in regmap.REGISTERS:
            for f in reg.fields:
                if not reg.external and _field_kind(reg, f) == "sticky":
                    with m.If(getattr(self, f"{port_name(reg, f)}_set")):
                        m.d.sync += store[(reg.name, f.name)].eq(1)
        return m

    @staticmethod
    def _merged(m, reg, f, store, wdata, bmask):
        """The value a write would give a plain read/write field (WSTRB-merged)."""
        sl = slice(f.lsb, f.lsb + f.width)
        cur = store[(reg.name, f.name)]
        new = Signal(f.width, name=f"new_{reg.name.lower()}_{f.name}")
        m.d.comb += new.eq((cur & ~bmask[sl]) | (wdata & bmask)[sl])
        return new

    @classmethod
    def _out_of_range(cls, m, reg, store, wdata, bmask):
        """1 if the write would put any field of ``reg`` outside its [range_min, range_max]."""
        bad = Const(0, 1)
        for f in reg.fields:
            if not f.sw_writable or _field_kind(reg, f) != "config":
                continue
            new = cls._merged(m, reg, f, store, wdata, bmask)
            if f.range_min is not None and f.range_min > 0:
                bad = bad | (new < f.range_min)
            if f.range_max is not None and f.range_max < (1 << f.width) - 1:
                bad = bad | (new > f.range_max)
        return bad

    @classmethod
    def _write_register(cls, m, reg, store, pulses, wdata, bmask, resp):
        """Apply a software write to ``reg`` (the range check has passed)."""
        for f in reg.fields:
            if not f.sw_writable:
                continue
            kind = _field_kind(reg, f)
            written = (wdata & bmask)[f.lsb:f.lsb + f.width]
            if kind in ("woclr", "sticky") or (kind == "internal" and f.woclr):
                cur = store[(reg.name, f.name)]
                m.d.sync += cur.eq(cur & ~written)
            elif kind == "pulse":
                m.d.sync += pulses[(reg.name, f.name)].eq(written.any())
            else:
                m.d.sync += store[(reg.name, f.name)].eq(cls._merged(m, reg, f, store, wdata, bmask))
        m.d.sync += resp.eq(OKAY)


def verilog_tops():
    return {"regs": lambda: RegisterBlock()}
