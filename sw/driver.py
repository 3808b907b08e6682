"""Host driver core: an async API over a :class:`~cxlkv.sw.transport.Transport`.

Registers are named as in the register map (generated from hdl/regs.rdl), so
no offset or field position is ever written by hand here.

    dev = await Device.open(transport)          # checks ID and VERSION
    await dev.configure(alpha=0x1000, tau=1000)
    print(await dev.counters())

:class:`SyncDevice` wraps it for scripts.
"""
from __future__ import annotations

import asyncio

from cxlkv.errors import CxlkvError
from cxlkv.models import regmap
from cxlkv.sw.transport import BusError, Transport

MAGIC = 0x43584B56
SUPPORTED_MAJOR = 0


class DeviceError(CxlkvError):
    """The device is not a cxlkv controller, or one this driver does not support."""


class ConfigError(CxlkvError):
    """A configuration value was refused (out of range, or an unknown name)."""


def _reg(name):
    try:
        return regmap.BY_NAME[name]
    except KeyError:
        raise ConfigError(f"no register {name!r}") from None


COUNTERS = tuple(r.name for r in regmap.REGISTERS if r.words == 2)

#: `configure()` keyword -> (register, field)
CONFIG_FIELDS = {
    "alpha": ("ALPHA", "value"), "tau": ("TAU", "value"),
    "prefetch_window": ("PREFETCH", "window"), "prefetch_trigger": ("PREFETCH", "trigger"),
    "prefetch_overflow_stall": ("PREFETCH", "overflow_stall"), "prefetch_rate_issues": ("PREFETCH", "rate_issues"),
    "prefetch_period": ("PREFETCH_PERIOD", "cycles"),
    "phase_ratio": ("PHASE_CFG", "ratio"), "phase_window_log2": ("PHASE_CFG", "window_log2"),
    "phase_hysteresis": ("PHASE_CFG", "hysteresis"),
    "queue_budget": ("QUEUE_BUDGET", "entries"), "pin_first": ("PINS", "first_n"),
    "watermark_high": ("WATERMARKS", "high"), "watermark_low": ("WATERMARKS", "low"),
    "bi_timeout": ("BI_TIMEOUT", "cycles"),
    "enable": ("CONTROL", "enable"), "decode_lock": ("CONTROL", "decode_lock"),
    "phase_override": ("CONTROL", "phase_override"),
}


class Device:
    def __init__(self, transport: Transport):
        self.t = transport

    @classmethod
    async def open(cls, transport: Transport) -> "Device":
        dev = cls(transport)
        await dev.check_identity()
        return dev

    async def check_identity(self):
        magic = await self.t.read32(_reg("ID").offset)
        if magic != MAGIC:
            raise DeviceError(f"ID register reads {magic:#010x}, not {MAGIC:#010x} ('CXKV'): "
                              f"not a cxlkv controller, or the {self.t.name} transport reaches nothing")
        version = await self.read_fields("VERSION")
        if version["major"] != SUPPORTED_MAJOR:
            raise DeviceError(f"device register interface version {version['major']}.{version['minor']}; "
                              f"this driver supports major {SUPPORTED_MAJOR}")

    async def read_reg(self, name: str) -> int:
        reg = _reg(name)
        value = 0
        for word in range(reg.words):          # low word first: it latches the high word
            value |= await self.t.read32(reg.offset + 4 * word) << (32 * word)
        return value

    async def read_fields(self, name: str) -> dict:
        reg = _reg(name)
        value = await self.read_reg(name)
        return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in reg.fields}

    async def write_fields(self, name: str, **fields):
        """Read-modify-write of some fields of one register; out-of-range values raise ConfigError."""
        reg = _reg(name)
        value = await self.read_reg(name) if reg.sw_writable else 0
        for fname, v in fields.items():
            try:
                f = reg.field(fname)
            except KeyError as exc:
                raise ConfigError(str(exc.args[0])) from None
            lo = f.range_min or 0
            hi = f.range_max if f.range_max is not None else (1 << f.width) - 1
            if not lo <= v <= hi:
                raise ConfigError(f"{name}.{fname} = {v} is outside {lo} .. {hi}")
            value = (value & ~f.mask) | (v << f.lsb)
        try:
            await self.t.write32(reg.offset, value)
        except BusError as exc:
            raise ConfigError(f"the device refused {name} = {value:#x} ({exc})") from None

    async def info(self) -> dict:
        geo = await self.read_fields("GEOMETRY")
        geo2 = await self.read_fields("GEOMETRY2")
        ver = await self.read_fields("VERSION")
        caps = await self.read_fields("CAPS")
        return {"id": f"{await self.read_reg('ID'):#010x}", "version": f"{ver['major']}.{ver['minor']}",
                "n_layers": geo["n_layers"], "n_kv_heads": geo["n_kv_heads"],
                "queues": geo["n_layers"] * geo["n_kv_heads"], **geo2,
                "caps": sorted(k for k, v in caps.items() if v), "transport": self.t.name}

    async def configure(self, **settings):
        """Write configuration by name (see CONFIG_FIELDS); each is checked, then written."""
        unknown = sorted(set(settings) - set(CONFIG_FIELDS))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(CONFIG_FIELDS)}")
        by_reg = {}
        for key, v in settings.items():
            reg, field = CONFIG_FIELDS[key]
            by_reg.setdefault(reg, {})[field] = v
        for reg, fields in by_reg.items():
            await self.write_fields(reg, **fields)

    async def config(self) -> dict:
        out = {}
        for key, (reg, field) in CONFIG_FIELDS.items():
            out[key] = (await self.read_fields(reg))[field]
        return out

    async def counters(self) -> dict:
        return {name.lower(): await self.read_reg(name) for name in COUNTERS}

    async def status(self) -> dict:
        return await self.read_fields("STATUS")

    async def clear_counters(self):
        await self.write_fields("CONTROL", counters_clear=1)

    async def set_format(self, queue: int, fmt: int):
        await self.write_fields("FMT_SEL", queue=queue)
        await self.write_fields("FMT_DATA", format=fmt)

    async def get_format(self, queue: int) -> int:
        await self.write_fields("FMT_SEL", queue=queue)
        return (await self.read_fields("FMT_DATA"))["format"]

    async def close(self):
        await self.t.close()


class SyncDevice:
    """Blocking wrapper around :class:`Device` for scripts and the CLI."""

    def __init__(self, transport: Transport):
        self._loop = asyncio.new_event_loop()
        try:
            self._dev = self._loop.run_until_complete(Device.open(transport))
        except BaseException:
            self._loop.run_until_complete(transport.close())
            self._loop.close()
            raise

    def __getattr__(self, name):
        attr = getattr(self._dev, name)
        if not callable(attr):
            return attr
        return lambda *a, **k: self._loop.run_until_complete(attr(*a, **k))

    def close(self):
        try:
            self._loop.run_until_complete(self._dev.close())
        finally:
            self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
