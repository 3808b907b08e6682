"""Register-file golden model: what the CSR block (hdl/regs.py) answers on its AXI4-Lite port.

Transaction-level and cycle-free. Rules (docs/regs.md), all derived from the
generated table cxlkv.models.regmap:

* 32-bit words at byte addresses; the low two address bits are ignored (byte
  lanes come from WSTRB, as AXI4-Lite slaves do). An unmapped address answers
  SLVERR; reads return 0 then.
* A write to a register with no software-writable field answers SLVERR and
  changes nothing. WSTRB selects bytes; unselected bytes keep their value.
* A write that would put any field outside its [range_min, range_max] is
  refused whole: nothing changes except STATUS.cfg_reject and
  IRQ_STATUS.cfg_reject (set) and REJECT_ADDR (the address); answer SLVERR.
* ``woclr`` fields clear where 1 is written; ``singlepulse`` fields read 0 and
  emit a one-cycle pulse (recorded in ``pulses``).
* 64-bit registers (counters) are read low word first: reading the low word
  returns it and latches the high word, which the high-word read returns.
* External registers and memories are forwarded to ``external`` (an object with
  ``read(name, word) -> (value, ok)`` and ``write(name, data, strb) -> ok``),
  which owns their semantics (no range check in the register block); a not-ok
  answer becomes SLVERR. Memories are read-only: a write answers SLVERR.
"""
from __future__ import annotations

from cxlkv.models import regmap
from cxlkv.models.regdefs import Register

OKAY, SLVERR = 0, 2
MASK32 = 0xFFFFFFFF

#: Fields the register block drives itself rather than taking from an input.
INTERNAL_FIELDS = {("STATUS", "cfg_reject"), ("REJECT_ADDR", "addr"), ("IRQ_STATUS", "cfg_reject")}


def decode(addr: int):
    """(register, word) or (memory, word) at ``addr`` (low two bits ignored), or (None, None)."""
    addr &= ~3
    for reg in regmap.REGISTERS:
        if reg.offset <= addr < reg.offset + 4 * reg.words:
            return reg, (addr - reg.offset) // 4
    for mem in regmap.MEMORIES:
        if mem.offset <= addr < mem.offset + mem.size:
            return mem, (addr - mem.offset) // 4
    return None, None


def strobe_mask(strb: int) -> int:
    return sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)


class RegisterFile:
    def __init__(self, external=None):
        self.external = external
        self.stored = {}            # (reg, field) -> value of software-held and internal fields
        self.hw = {}                # (reg, field) -> value driven by hardware
        self.hi_latch = {}          # reg -> latched high word of a 64-bit register
        self.pulses = []            # (reg, field) singlepulse events, in order
        for reg in regmap.REGISTERS:
            for f in reg.fields:
                if f.reset is not None:
                    self.stored[(reg.name, f.name)] = f.reset

    # ---- hardware side
    def set_hw(self, reg: str, field: str, value: int):
        self.hw[(reg, field)] = value

    def hw_set(self, reg: str, field: str):
        """A hardware event sets a sticky (hwset) bit."""
        self.stored[(reg, field)] = 1

    def get(self, reg: str, field: str) -> int:
        """The value a configuration field drives into the hardware."""
        f = regmap.BY_NAME[reg].field(field)
        if f.singlepulse:
            return 0
        return self.stored.get((reg, field), 0)

    def irq(self) -> bool:
        return bool(self._reg_value(regmap.BY_NAME["IRQ_STATUS"]) & self._reg_value(regmap.BY_NAME["IRQ_ENABLE"]))

    # ---- software side
    def _field_value(self, reg: Register, f) -> int:
        key = (reg.name, f.name)
        if f.singlepulse:
            return 0
        if f.hw_driven and key not in INTERNAL_FIELDS and not f.hwset:
            return self.hw.get(key, 0) & ((1 << f.width) - 1)
        return self.stored.get(key, 0)

    def _reg_value(self, reg: Register) -> int:
        return sum(self._field_value(reg, f) << f.lsb for f in reg.fields)

    def read(self, addr: int) -> tuple[int, int]:
        target, word = decode(addr)
        if target is None:
            return 0, SLVERR
        if not isinstance(target, Register):            # memory window
            value, ok = self.external.read(target.name, word) if self.external else (0, False)
            return (value & MASK32, OKAY) if ok else (0, SLVERR)
        if target.external:
            value, ok = self.external.read(target.name, word) if self.external else (0, False)
            return (value & MASK32, OKAY) if ok else (0, SLVERR)
        value = self._reg_value(target)
        if target.words == 2:
            if word == 0:
                self.hi_latch[target.name] = value >> 32
                return value & MASK32, OKAY
            return self.hi_latch.get(target.name, 0), OKAY
        return value, OKAY

    def _reject(self, addr: int) -> int:
        self.stored[("STATUS", "cfg_reject")] = 1
        self.stored[("IRQ_STATUS", "cfg_reject")] = 1
        # the word's address: the bus ignores the low two address bits (byte lanes are WSTRB)
        self.stored[("REJECT_ADDR", "addr")] = addr & 0xFFFC
        return SLVERR

    def write(self, addr: int, data: int, strb: int = 0xF) -> int:
        target, word = decode(addr)
        if target is None or not isinstance(target, Register) or not target.sw_writable:
            return SLVERR
        bmask = strobe_mask(strb)
        data &= MASK32
        if target.external:
            ok = self.external.write(target.name, data, strb) if self.external else False
            return OKAY if ok else SLVERR
        updates = {}
        for f in target.fields:
            if not f.sw_writable:
                continue
            key = (target.name, f.name)
            written = ((data & bmask) >> f.lsb) & ((1 << f.width) - 1)
            enabled = (bmask >> f.lsb) & ((1 << f.width) - 1)
            if f.woclr:
                updates[key] = self.stored.get(key, 0) & ~written
            elif f.singlepulse:
                if written:
                    updates[key] = ("pulse", written)
            else:
                v = (self.stored.get(key, 0) & ~enabled) | written
                if (f.range_min is not None and v < f.range_min) or (f.range_max is not None and v > f.range_max):
                    return self._reject(addr)
                updates[key] = v
        for key, v in updates.items():
            if isinstance(v, tuple):
                self.pulses.append(key)
            else:
                self.stored[key] = v
        return OKAY


class FormatTable:
    """The per-queue storage-format table behind FMT_SEL/FMT_DATA (external register)."""

    def __init__(self, n_queues: int, regs: RegisterFile | None = None):
        self.formats = [0] * n_queues
        self.regs = regs

    def _sel(self) -> int:
        return self.regs.get("FMT_SEL", "queue") if self.regs else 0

    def read(self, name, word):
        if name == "FMT_DATA":
            q = self._sel()
            return (self.formats[q], True) if q < len(self.formats) else (0, False)
        return 0, False

    def write(self, name, data, strb):
        if name == "FMT_DATA":
            q = self._sel()
            if q < len(self.formats):
                if strb & 1:
                    self.formats[q] = data & 3
                return True
        return False
