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

One transaction at a time: a write needs AW and W together; B follows 4
cycles after the handshake (the range check and the address decode, the write
enable registered, the update: docs/regs.md), R after 4 (the decode, then the read mux in two registered
stages; for 125 MHz on the ECP5); 4 also for an external read (the strobe
follows the decode), and a write to an external register has B after 4.
"""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cxlkv.models import regmap
from cxlkv.models.regdefs import Field, Register
from cxlkv.models.regs import INTERNAL_FIELDS, OKAY, SLVERR

ADDR_WIDTH = 12          # 4 KiB window
READ_GROUP = 16          # words per first-stage read-mux group (timing)


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

        # The address decode has a cycle of its own (READ / CHECK): every local word's select
        # flag, one-hot, and the external-window flags, registered every cycle from the latched
        # address (no enable: addr is stable from the handshake to the response). The states
        # after it (READ_GRP / WRITE) use only these flags, never addr.
        words = []                  # (offset, read value, register, index of the word)
        for reg in regmap.REGISTERS:
            if reg.external:
                continue
            v = values[reg.name]
            if reg.words == 1:
                words.append((reg.offset, v, reg, 0))
            else:
                words.append((reg.offset, v[:32], reg, 0))
                words.append((reg.offset + 4, hi_latch[reg.name], reg, 1))
        sel = Signal(len(words))
        for i, (off, _, _, _) in enumerate(words):
            m.d.sync += sel[i].eq(addr[2:] == (off >> 2))
        sel_of = {(reg.name, w): sel[i] for i, (_, _, reg, w) in enumerate(words)}
        # "some local word is selected", registered from the selects (valid from READ_SEL): the
        # OR of every select was in front of resp in READ_GRP (9.82 ns in the board build of aa35c72)
        sel_any = Signal()
        m.d.sync += sel_any.eq(sel.any())
        ext_rd = Signal()           # READ_GRP: an external register or memory read
        ext_wr = Signal()           # WRITE: an external register write (memories are read only)
        m.d.sync += [ext_rd.eq(ext_hit), ext_wr.eq(ext_hit & ~mem_hit)]

        # Read mux in two registered stages: READ_GRP loads each group of READ_GROUP words'
        # AND-OR (the selects are one-hot, so at most one group is non-zero), READ_SEL ORs the
        # groups into rdata.
        groups = [words[k:k + READ_GROUP] for k in range(0, len(words), READ_GROUP)]
        grp = [Signal(32, name=f"rgrp{g}") for g in range(len(groups))]
        base = 0
        for g, group in enumerate(groups):
            acc = Const(0, 32)
            for i, (_, v, _, _) in enumerate(group):
                acc = acc | (sel[base + i].replicate(32) & v)
            base += len(group)
            m.d.sync += grp[g].eq(acc)
        grp_or = Const(0, 32)
        for gv in grp:
            grp_or = grp_or | gv

        writable = [reg for reg in regmap.REGISTERS if not reg.external and reg.sw_writable and reg.words == 1]
        write_hit = Const(0, 1)     # the write addresses a writable register
        for reg in writable:
            write_hit = write_hit | sel_of[(reg.name, 0)]
        refused = Const(0, 1)       # ... and the range check refuses it
        for reg in writable:
            if reg.name in refuse:
                refused = refused | (sel_of[(reg.name, 0)] & refuse[reg.name])

        pulses = {}
        for reg in regmap.REGISTERS:
            for f in reg.fields:
                if not reg.external and _field_kind(reg, f) == "pulse":
                    pulses[(reg.name, f.name)] = getattr(self, port_name(reg, f))
                    m.d.sync += getattr(self, port_name(reg, f)).eq(0)

        # each writable register's write enable, registered in WRITE_SEL from the state, the
        # select and the range flag, so that in WRITE a register's enable is one flip-flop (from
        # the FSM's state through the decode to the enables of registers all over the part was
        # a failing group of the board top at 125 MHz, 305 endpoints in one build)
        write_en = {reg.name: Signal(name=f"we_{reg.name.lower()}") for reg in writable}

        with m.FSM() as fsm:
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

            with m.State("CHECK"):                   # the range flags and the decode settle
                m.next = "WRITE_SEL"

            with m.State("WRITE_SEL"):               # the write enables load (below)
                with m.If(ext_wr):
                    m.d.comb += self.ext.we.eq(1)
                    m.next = "WRITE_EXT"
                with m.Else():
                    m.next = "WRITE"
                    with m.If(refused):
                        m.d.sync += [store[("STATUS", "cfg_reject")].eq(1),
                                     store[("IRQ_STATUS", "cfg_reject")].eq(1),
                                     store[("REJECT_ADDR", "addr")].eq(addr)]
                    m.d.sync += resp.eq(Mux(write_hit & ~refused, OKAY, SLVERR))

            with m.State("WRITE"):                   # the addressed register takes the write
                m.next = "BRESP"

            with m.State("WRITE_EXT"):
                m.d.sync += resp.eq(Mux(self.ext.err, SLVERR, OKAY))
                m.next = "BRESP"

            with m.State("BRESP"):
                m.d.comb += [bus.bvalid.eq(1), bus.bresp.eq(resp)]
                with m.If(bus.bready):
                    m.next = "IDLE"

            with m.State("READ"):                    # the decode settles
                m.next = "READ_GRP"

            with m.State("READ_GRP"):                # the groups load (above); values sampled here
                # the low-word read of a 64-bit register latches the high word, in the cycle its
                # low word is sampled: LO then HI is one snapshot (a local select excludes ext_rd:
                # not in the enable, for timing)
                for reg in regmap.REGISTERS:
                    if not reg.external and reg.words == 2:
                        with m.If(sel_of[(reg.name, 0)]):
                            m.d.sync += hi_latch[reg.name].eq(values[reg.name][32:])
                with m.If(ext_rd):
                    m.d.comb += self.ext.re.eq(1)
                    m.next = "READ_EXT"
                with m.Else():
                    m.next = "READ_SEL"

            with m.State("READ_SEL"):
                m.d.sync += [rdata.eq(grp_or), resp.eq(Mux(sel_any, OKAY, SLVERR))]
                m.next = "RRESP"

            with m.State("READ_EXT"):
                m.d.sync += [rdata.eq(Mux(self.ext.err, 0, self.ext.rdata)), resp.eq(Mux(self.ext.err, SLVERR, OKAY))]
                m.next = "RRESP"

            with m.State("RRESP"):
                m.d.comb += [bus.rvalid.eq(1), bus.rdata.eq(rdata), bus.rresp.eq(resp)]
                with m.If(bus.rready):
                    m.next = "IDLE"

        for reg in writable:                    # one-hot selects: at most one of these applies
            ok = fsm.ongoing("WRITE_SEL") & ~ext_wr & sel_of[(reg.name, 0)]
            if reg.name in refuse:
                ok = ok & ~refuse[reg.name]
            m.d.sync += write_en[reg.name].eq(ok)
            with m.If(write_en[reg.name]):
                self._write_register(m, reg, store, pulses, wdata, bmask)

        # Every register's range check on the latched write, registered every cycle (no
        # enable: off the FSM's decode). wdata is latched in IDLE and the stored fields do not
        # change in CHECK, so in WRITE_SEL the flags describe the write in flight; WRITE_SEL only
        # selects the addressed one. Compare chains, decode, enable and update take three cycles.
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
    def _write_register(cls, m, reg, store, pulses, wdata, bmask):
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


def verilog_tops():
    return {"regs": lambda: RegisterBlock()}
