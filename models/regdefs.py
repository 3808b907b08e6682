"""Types of the register map table (the data itself is generated into cxlkv.models.regmap)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    sw: str                 # "r", "rw", "w"
    hw: str                 # "r" (hardware reads it: a configuration output), "w" (hardware drives it), "rw", "na"
    reset: int | None
    woclr: bool = False     # software writes 1 to clear
    singlepulse: bool = False
    hwset: bool = False     # a hardware pulse sets it (sticky event bit)
    range_min: int | None = None
    range_max: int | None = None
    desc: str = ""

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    @property
    def sw_writable(self) -> bool:
        return "w" in self.sw

    @property
    def hw_driven(self) -> bool:
        """The field's value comes from the hardware (status, counters)."""
        return self.hw in ("w", "rw") and not self.sw_writable


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    width: int              # 32, or 64 for counters read as LO/HI words
    fields: tuple[Field, ...]
    external: bool = False
    desc: str = ""

    @property
    def words(self) -> int:
        return self.width // 32

    @property
    def sw_writable(self) -> bool:
        return any(f.sw_writable for f in self.fields)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}")


@dataclass(frozen=True)
class Memory:
    name: str
    offset: int
    entries: int
    width: int              # bits per entry (64: two words, low first)
    desc: str = ""

    @property
    def size(self) -> int:
        return self.entries * self.width // 8
