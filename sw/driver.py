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
import operator

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
#: registers whose values the tracker's slots and deadline-bucket ring must hold (Device._check_ring)
RING_REGS = {"QUEUE_BUDGET", "TLN_R", "TLN_D", "HW_BUCKET"}

CONFIG_FIELDS = {
    "alpha": ("ALPHA", "value"), "tau": ("TAU", "value"),
    "prefetch_window": ("PREFETCH", "window"), "prefetch_trigger": ("PREFETCH", "trigger"),
    "prefetch_overflow_stall": ("PREFETCH", "overflow_stall"), "prefetch_rate_issues": ("PREFETCH", "rate_issues"),
    "prefetch_period": ("PREFETCH_PERIOD", "cycles"), "prefetch_exact": ("PREFETCH", "exact"),
    "prefetch_decode_only": ("PREFETCH", "decode_only"),
    "phase_ratio": ("PHASE_CFG", "ratio"), "phase_window_log2": ("PHASE_CFG", "window_log2"),
    "phase_hysteresis": ("PHASE_CFG", "hysteresis"),
    "queue_budget": ("QUEUE_BUDGET", "entries"), "pin_first": ("PINS", "first_n"),
    "watermark_high": ("WATERMARKS", "high"), "watermark_low": ("WATERMARKS", "low"),
    "bi_timeout": ("BI_TIMEOUT", "cycles"),
    "enable": ("CONTROL", "enable"), "decode_lock": ("CONTROL", "decode_lock"),
    "phase_override": ("CONTROL", "phase_override"),
    "tln_r": ("TLN_R", "value"), "tln_d": ("TLN_D", "value"), "bucket_bits": ("HW_BUCKET", "bits"),
    "write_sample": ("HW_SAMPLE", "write_sample"), "read_credit": ("HW_SAMPLE", "read_credit"),
    "coldlist_threshold": ("COLDLIST_THRESHOLD", "entries"),
    "tier_lat_dram": ("TIER_LAT", "dram"), "tier_lat_flash": ("TIER_LAT", "flash"),
}

#: a register of an optional block -> the CAPS field saying the device has it: ``configure()``
#: refuses a setting of such a register other than its reset value on a device without the block
#: (the write would change nothing; the reset value is let through for scripts that set it on
#: every build, e.g. prefetch_window=0)
CONFIG_CAPS = {"PREFETCH": "prefetch", "PREFETCH_PERIOD": "prefetch", "PHASE_CFG": "phase",
               "BI_TIMEOUT": "bisnoop", "TIER_LAT": "tiermover",
               **dict.fromkeys(("ALPHA", "TAU", "QUEUE_BUDGET", "PINS", "TLN_R", "TLN_D", "HW_BUCKET", "HW_SAMPLE",
                                "COLDLIST_THRESHOLD"), "tracker")}

#: the tier mover's counters in ``replay()``'s answer (extra keys, when CAPS.tiermover = 1)
TIER_REPLAY_KEYS = ("tier_commands", "tier_hits", "tier_fills", "tier_writebacks", "tier_clean_drops",
                    "tier_bypasses", "tier_bad_commands", "tier_lines_to_flash", "tier_lines_to_dram",
                    "tier_proto_errors")
#: register reads (or 64-cycle steps on the sim transport) to wait for STATUS.busy = 0
SETTLE_POLLS = 100_000


class Device:
    def __init__(self, transport: Transport):
        self.t = transport
        #: the decision records (transport.DECISION_DTYPE) of the last replay, one per event
        self.last_decisions = None

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
        # the geometry a controller reports is one models/controller.check_geometry accepts (its
        # constructor refuses any other); anything else is not a working device's registers
        from cxlkv.models.controller import check_geometry
        geo, geo2 = await self.read_fields("GEOMETRY"), await self.read_fields("GEOMETRY2")
        try:
            check_geometry(geo["n_layers"], geo["n_kv_heads"], geo2["entries_log2"], geo2["bitags"])
        except ValueError as exc:
            raise DeviceError(f"device reports a geometry no controller has ({geo['n_layers']} layers x "
                              f"{geo['n_kv_heads']} KV heads, entries_log2 {geo2['entries_log2']}, "
                              f"bitags {geo2['bitags']}; {exc}): its registers are not a working cxlkv "
                              f"controller's") from None

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

    @staticmethod
    def check_fields(name: str, **fields):
        """Raise ConfigError unless every field named exists in register ``name`` and its value is in
        range; nothing is read or written."""
        reg = _reg(name)
        for fname, v in fields.items():
            try:
                f = reg.field(fname)
            except KeyError as exc:
                raise ConfigError(str(exc.args[0])) from None
            lo = f.range_min or 0
            hi = f.range_max if f.range_max is not None else (1 << f.width) - 1
            try:
                v = operator.index(v)
            except TypeError:
                raise ConfigError(f"{name}.{fname} = {v!r} is not an integer") from None
            if not lo <= v <= hi:
                raise ConfigError(f"{name}.{fname} = {v} is outside {lo} .. {hi}")

    async def write_fields(self, name: str, **fields):
        """Read-modify-write of some fields of one register; out-of-range values raise ConfigError
        before anything is read or written."""
        self.check_fields(name, **fields)
        await self._write_checked(name, fields)

    async def _write_checked(self, name: str, fields: dict):
        """The read-modify-write of :meth:`write_fields`, for fields :meth:`check_fields` passed."""
        reg = _reg(name)
        value = await self.read_reg(name) if reg.sw_writable else 0
        for fname, v in fields.items():
            f = reg.field(fname)
            value = (value & ~f.mask) | (operator.index(v) << f.lsb)
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
        """Write configuration by name (see CONFIG_FIELDS): all are checked, then written, so a refused
        request changes nothing."""
        unknown = sorted(set(settings) - set(CONFIG_FIELDS))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(CONFIG_FIELDS)}")
        by_reg = {}
        for key, v in settings.items():
            reg, field = CONFIG_FIELDS[key]
            by_reg.setdefault(reg, {})[field] = v
        for reg, fields in by_reg.items():        # every value checked before the first write
            self.check_fields(reg, **fields)
        if any(reg in CONFIG_CAPS for reg in by_reg):
            caps = await self.read_fields("CAPS")
            absent = {}
            for key, v in settings.items():
                reg, field = CONFIG_FIELDS[key]
                cap, reset = CONFIG_CAPS.get(reg), _reg(reg).field(field).reset
                if cap is not None and not caps[cap] and v != reset:
                    absent.setdefault(cap, []).append(f"{key} (only its reset value {reset} is taken)")
            if absent:
                raise ConfigError("; ".join(f"this device has no {cap} block (CAPS.{cap} = 0), so "
                                            f"{', '.join(keys)} would have no effect" for cap, keys in absent.items())
                                  + "; nothing was written")
        if by_reg.keys() & RING_REGS:
            await self._check_ring(by_reg)
        for reg, fields in by_reg.items():
            await self._write_checked(reg, fields)

    async def _check_ring(self, by_reg: dict):
        """A QUEUE_BUDGET above the tracker's slots, or TLN_R/TLN_D/HW_BUCKET needing more deadline
        buckets than its ring has, would hold the device's events (STATUS.ring_error): refused before
        anything is written, with replay's messages (docs/controller.md)."""
        from cxlkv.models.controller import buckets_needed
        if not (await self.read_fields("CAPS"))["tracker"]:
            return
        now = {}
        for reg, field in (("QUEUE_BUDGET", "entries"), ("TLN_R", "value"), ("TLN_D", "value"), ("HW_BUCKET", "bits")):
            now[reg] = by_reg.get(reg, {}).get(field)
            if now[reg] is None:
                now[reg] = (await self.read_fields(reg))[field]
        hw_ring = await self.read_fields("HW_RING")
        slots, ring = 1 << hw_ring["slots_log2"], 1 << hw_ring["buckets_log2"]
        if now["QUEUE_BUDGET"] > slots:
            raise ConfigError(f"queue_budget = {now['QUEUE_BUDGET']}: the device's tracker runs at most {slots} "
                              f"entries per queue (HW_RING.slots_log2); nothing was written")
        need = buckets_needed(now["TLN_R"], now["TLN_D"], now["HW_BUCKET"])
        if need > ring:
            raise ConfigError(f"tln_r = {now['TLN_R']}, tln_d = {now['TLN_D']} and bucket_bits = {now['HW_BUCKET']} "
                              f"need {need} deadline buckets per queue; the device's ring has {ring} (HW_RING): "
                              f"nothing was written")

    async def config(self) -> dict:
        out = {}
        for key, (reg, field) in CONFIG_FIELDS.items():
            out[key] = (await self.read_fields(reg))[field]
        return out

    async def counters(self) -> dict:
        return {name.lower(): await self.read_reg(name) for name in COUNTERS}

    async def status(self) -> dict:
        return await self.read_fields("STATUS")

    async def settle(self):
        """Wait until STATUS.busy = 0: the tier mover has moved every decision's entry and the prefetch
        engine has inserted every candidate, so the counters (TIER_*, PREFETCH*) are final. Raises DeviceError if it stays busy."""
        step = getattr(self.t, "step", None)       # the sim transport runs the clock without bus traffic
        for _ in range(SETTLE_POLLS):
            if not (await self.status())["busy"]:
                return
            if step is not None:
                step(64)
        raise DeviceError(f"STATUS.busy stayed 1 for {SETTLE_POLLS} polls (tier mover, prefetch engine or tracker stuck, "
                          "or CONTROL.enable = 0 while it was busy)")

    async def clear_counters(self):
        await self.write_fields("CONTROL", counters_clear=1)

    async def set_format(self, queue: int, fmt: int):
        await self.write_fields("FMT_SEL", queue=queue)
        await self.write_fields("FMT_DATA", format=fmt)

    async def get_format(self, queue: int) -> int:
        await self.write_fields("FMT_SEL", queue=queue)
        return (await self.read_fields("FMT_DATA"))["format"]

    async def cold_list(self) -> dict:
        """The cold-list ring's state: head, tail, pending entries, threshold, depth."""
        head = (await self.read_fields("COLDLIST_HEAD"))["index"]
        tail = (await self.read_fields("COLDLIST_TAIL"))["index"]
        depth = (await self.read_fields("GEOMETRY2"))["coldlist_depth"]
        return {"head": head, "tail": tail, "pending": (head - tail) % depth if depth else 0,
                "threshold": (await self.read_fields("COLDLIST_THRESHOLD"))["entries"], "depth": depth}

    async def drain_cold_list(self) -> list[dict]:
        """Read the pending cold-list entries (oldest first) and hand them back to the device
        (COLDLIST_TAIL = HEAD). Each: queue, layer, head, position, count (the eviction's
        ordinal mod 2^16: a gap from one entry to the next is entries the full ring dropped)
        and ``entry`` (the raw 64-bit CHMU hot-list entry)."""
        from cxlkv.models.controller import decode_coldlist_entry
        mem = next(m for m in regmap.MEMORIES if m.name == "COLDLIST")
        geo, geo2 = await self.read_fields("GEOMETRY"), await self.read_fields("GEOMETRY2")
        state = await self.cold_list()
        out = []
        i = state["tail"]
        for _ in range(state["pending"]):
            lo = await self.t.read32(mem.offset + 8 * i)
            hi = await self.t.read32(mem.offset + 8 * i + 4)
            entry = hi << 32 | lo
            out.append({**decode_coldlist_entry(entry, geo2["entries_log2"], geo["n_kv_heads"]), "entry": entry})
            i = (i + 1) % state["depth"]
        if out:
            await self.write_fields("COLDLIST_TAIL", index=state["head"])
        return out

    async def configure_hdm(self, cfg) -> None:
        """Write an HDM decode configuration (models.hdm.HdmConfig) into HDM_* and HINT_DEFAULT;
        a refused one (STATUS.hdm_cfg_error) raises ConfigError."""
        await self.write_fields("HDM_BASE_LO", value=cfg.base & 0xFFFFFFFF)
        await self.write_fields("HDM_BASE_HI", value=cfg.base >> 32)
        await self.write_fields("HDM_SIZE_LO", value=cfg.size & 0xFFFFFFFF)
        await self.write_fields("HDM_SIZE_HI", value=cfg.size >> 32)
        await self.write_fields("HDM_LAYOUT", entry_shift=cfg.entry_shift, pos_shift=cfg.pos_shift,
                                head_shift=cfg.head_shift)
        await self.write_fields("HDM_GEOMETRY", n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads)
        await self.write_fields("HDM_POSITIONS", n_positions=cfg.n_positions)
        await self.write_fields("HINT_DEFAULT", sample=cfg.default_sample)
        if (await self.status())["hdm_cfg_error"]:
            raise ConfigError(f"the device refuses the HDM configuration {cfg}")

    async def send_hint(self, step: int, layer: int | None = None, head: int | None = None,
                        position: int | None = None, sample: int | None = None) -> None:
        """Push one hint to the HDM decode through the registers: a step-only hint, or with
        ``layer``, ``head``, ``position`` and ``sample`` (UQ0.16) a sample hint for that entry's
        next read. A push the device drops (HINT_PUSH_DROPS: disabled, one still waiting, an
        entry beyond the built geometry) raises DeviceError."""
        entry = (layer, head, position, sample)
        has = entry != (None, None, None, None)
        if has and None in entry:
            raise ConfigError("a sample hint needs layer, head, position and sample")
        drops = await self.read_reg("HINT_PUSH_DROPS")
        await self.write_fields("HINT_STEP", step=step)
        if has:
            await self.write_fields("HINT_ENTRY", layer=layer, head=head, position=position)
        await self.write_fields("HINT_PUSH", sample=sample if has else 0, has_sample=int(has), push=1)
        if await self.read_reg("HINT_PUSH_DROPS") != drops:
            raise DeviceError(f"the device dropped the hint (step {step}, entry {entry}): CONTROL.enable = 0, "
                              "a hint still waiting (STATUS.hint_busy), or an entry beyond the geometry")

    async def replay(self, trace, entries: int, via: str = "events", **overrides) -> dict:
        """Drive ``trace`` through the device's tracker with ``entries`` per queue; the device's
        counters under the keys of ``cxlkv policy replay --json`` (docs/controller.md, "Replay").

        ``overrides`` are ``hw`` policy parameters: ``hw_alpha``, ``hw_tau`` and ``hw_pinned``
        go to ALPHA, TAU and PINS; ``hw_rank_tau``, ``hw_rank_tau_long``, ``hw_bucket_bits``,
        ``hw_write_sample`` and ``hw_read_credit`` to TLN_R, TLN_D, HW_BUCKET and HW_SAMPLE (a
        configuration needing more deadline buckets than the device's ring, HW_RING, is
        refused). ``window`` = W > 0 (at most PREFETCH.window's 64) needs a device with the prefetch
        engine (CAPS.prefetch = 1): PREFETCH gets W, the trigger, exact = 1 (the top holds each demand
        event until the previous one's candidates are inserted: the simulator's order), drop mode and
        no rate limit. ``prefetch_trigger_all`` (not a policy parameter): 1 (default) every read
        triggers, as ``policy replay``'s default ``prefetch_trigger`` (TRIGGER_READ); 0 demand misses
        only (``policy.replay(..., prefetch_trigger=TRIGGER_MISS)``). Any other name (another policy's
        parameter, or a reporting one, ``entry_bytes`` or the step-time model's: the device reports
        neither bytes moved nor a modelled time) is refused (``replay_params``).

        ``via``: ``events`` drives the tracker's direct event port; ``hdm`` sends the trace as the
        host would: the HDM window packed over the device's geometry (512-byte entries at
        address 0), line 0 of each event's entry, a sample hint before each read whose sample
        is not the default (models.hdm.stimulus_from_trace), through the HDM decode.
        """
        if via not in ("events", "hdm"):
            raise ConfigError(f"via must be 'events' or 'hdm', got {via!r}")
        return await _replay(self, trace, entries, overrides, via)

    async def lines(self, records, data):
        """The host data path (CAPS.quant = 1: the quantizer in the top behind the tier mover): HDM items
        (transport.ACCESS_DTYPE records, as ``accesses``) in order, each with its row of ``data``, an
        (n, 32) uint16 array of FP16 lines (a write's line; rows of hints and reads are ignored).
        Returns (decisions, routes, responses): DECISION_DTYPE per event, ROUTE_DTYPE per access, and
        LINE_RSP_DTYPE per access (tag, flags = write | status << 1 | resident << 3 | bad << 4, a read's
        FP16 line). Writes are stored in their queue's format (``set_format``); reads come back FP16."""
        caps = await self.read_fields("CAPS")
        if not caps["quant"]:
            raise DeviceError("this device has no host data path (CAPS.quant = 0): it cannot take line data "
                              "(a sim or model build needs host_data=True)")
        return await self.t.lines(records, data)

    async def close(self):
        await self.t.close()


def replay_params(overrides: dict):
    """``(PolicyParams, prefetch trigger)`` of a device replay from its NAME=VALUE ``overrides``:
    ``hw`` parameters and ``prefetch_trigger_all``; any other name (another policy's, or a reporting
    one, ``policy.REPORTING_PARAMS``: the device reports neither bytes moved nor a modelled time) is
    refused, not ignored."""
    from cxlkv.models import policy as P
    from cxlkv.models import prefetch as PF
    overrides = dict(overrides)
    P.refuse_foreign_params("hw", overrides, P.accepted_params("hw", reporting=False), ConfigError,
                            subject="policy 'hw' on the device")
    trigger_given = "prefetch_trigger_all" in overrides
    trigger_all = PF.pop_trigger(overrides, ConfigError)
    params = P.make_params("hw", **overrides)
    PF.refuse_trigger_without_window(trigger_given, params.window, "the device replay", ConfigError)
    return params, trigger_all


async def _replay(dev: Device, trace, entries, overrides, via="events"):
    import numpy as np

    from cxlkv.models import policy as P
    from cxlkv.models import scoring as S
    from cxlkv.models.controller import buckets_needed, hw_registers
    from cxlkv.sw.transport import FLAG_ERROR, FLAG_HIT, event_records
    params, trigger_all = replay_params(overrides)
    pf_window = regmap.BY_NAME["PREFETCH"].field("window")
    if params.window > pf_window.range_max:
        raise ConfigError(f"window = {params.window}: the device's prefetch window is at most {pf_window.range_max} "
                          "(PREFETCH.window)")
    hw_regs = hw_registers(params)
    pins = regmap.BY_NAME["PINS"].field("first_n")
    if params.hw_pinned > pins.range_max:
        raise ConfigError(f"hw_pinned = {params.hw_pinned}: the device pins at most {pins.range_max} positions")
    budget = regmap.BY_NAME["QUEUE_BUDGET"].field("entries")
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)) or \
            not budget.range_min <= entries <= budget.range_max:
        raise ConfigError(f"entries must be an integer in {budget.range_min}..{budget.range_max}, got {entries!r}")
    info = await dev.info()
    if "tracker" not in info["caps"]:
        raise DeviceError("this device has no tracker (CAPS.tracker = 0): it cannot replay a trace")
    has_prefetch = "prefetch" in info["caps"]
    if params.window and not has_prefetch:
        raise ConfigError("this device has no prefetch engine (CAPS.prefetch = 0): window must be 0")
    n_pos = 1 << info["entries_log2"]
    maxpos = int(trace.pos.max()) if len(trace) else 0
    if trace.n_layers > info["n_layers"] or trace.n_kv_heads > info["n_kv_heads"] or maxpos >= n_pos:
        raise DeviceError(f"the trace's geometry ({trace.n_layers} layers x {trace.n_kv_heads} KV heads, positions up to "
                          f"{maxpos}) exceeds the device's ({info['n_layers']} x {info['n_kv_heads']}, {n_pos} positions)")
    hw_ring = await dev.read_fields("HW_RING")
    ring = 1 << hw_ring["buckets_log2"]
    if entries > 1 << hw_ring["slots_log2"]:
        raise ConfigError(f"entries = {entries}: the device's tracker runs at most {1 << hw_ring['slots_log2']} "
                          f"entries per queue (HW_RING.slots_log2)")
    need = buckets_needed(hw_regs[("TLN_R", "value")], hw_regs[("TLN_D", "value")], params.hw_bucket_bits)
    if need > ring:
        nb = 1 << (need - 1).bit_length()             # n_buckets is a power of two, at most 65536
        build = f"a build with n_buckets = {nb}" if nb <= 1 << 16 else "(no build has that many: n_buckets <= 65536)"
        raise ConfigError(f"hw_rank_tau = {params.hw_rank_tau}, hw_rank_tau_long = {params.hw_rank_tau_long} and "
                          f"hw_bucket_bits = {params.hw_bucket_bits} need {need} deadline buckets per queue; the device's "
                          f"ring has {ring} (HW_RING): shorter time constants, wider buckets, or {build}")
    if len(trace) and int(trace.step.min()) < 0:
        raise DeviceError(f"the trace has negative steps (first at event {int(np.flatnonzero(trace.step < 0)[0])}): "
                          "the device's step counter is unsigned")

    # everything that can refuse the replay is asked before the device is changed
    stream = "accesses" if via == "hdm" else "events"
    if not dev.t.can(stream):
        raise dev.t.cannot(stream)
    if via == "hdm":
        from cxlkv.models import hdm as MH
        from cxlkv.sw.transport import access_records
        geom = MH.HdmGeometry(info["n_layers"], info["n_kv_heads"], n_pos)
        cfg = MH.HdmConfig.packed(geom)
        try:
            items = MH.stimulus_from_trace(trace, geom, cfg, lines="first")
        except MH.HdmError as exc:
            raise DeviceError(f"the trace cannot be replayed through the HDM decode: {exc}") from None

    alpha, tau, _ = S.sanitize_config(params.hw_alpha, params.hw_tau)      # α = 0 is applied as 1 by both
    by_reg = {}
    for (reg, field), v in hw_regs.items():
        by_reg.setdefault(reg, {})[field] = v
    for reg, fields in by_reg.items():
        dev.check_fields(reg, **fields)

    # disabled: the tracker and its memories are held cleared; configure; enable; clear counters
    await dev.write_fields("CONTROL", enable=0)
    for reg, fields in by_reg.items():      # the hw registers first (checked above): configure()'s
        await dev._write_checked(reg, fields)  # ring check then sees this replay's constants
    await dev.configure(alpha=alpha, tau=tau, queue_budget=int(entries), pin_first=params.hw_pinned)
    if has_prefetch:        # exact mode, drop mode, no rate limit: the simulator's order
        await dev.write_fields("PREFETCH", window=params.window, trigger=trigger_all, overflow_stall=0,
                               rate_issues=0, exact=1, decode_only=0)
    await dev.write_fields("CONTROL", enable=1)
    await dev.clear_counters()

    if via == "hdm":
        await dev.configure_hdm(cfg)
        dec, _routes = await dev.t.accesses(access_records(items))
        if len(dec) != len(trace):
            raise DeviceError(f"the HDM decode made {len(dec)} events of the trace's {len(trace)}")
    else:
        dec = await dev.t.events(event_records(trace))
    dev.last_decisions = dec
    tiers = "tiermover" in info["caps"]
    if tiers or has_prefetch:
        await dev.settle()
    c = await dev.counters()

    # attention_recall: the float scores of the reads that hit, summed per queue in event order
    # and then over queues, exactly as policy.replay sums them (a host figure from the decisions)
    hit = (dec["flags"] & FLAG_HIT) != 0
    is_read = trace.op == 0
    q = trace.queue
    sums = np.zeros((trace.n_queues, 2), np.float64)
    for qi in range(trace.n_queues):
        sel = (q == qi) & is_read
        s = trace.score[sel].astype(np.float64)
        if len(s):
            sums[qi, 0] = np.cumsum(s)[-1]
            sh = trace.score[sel & hit].astype(np.float64)
            sums[qi, 1] = np.cumsum(sh)[-1] if len(sh) else 0.0
    sr, sh = (float(v) for v in sums.sum(axis=0))
    reads, hits = c["reads"], c["read_hits"]
    return {
        "policy": "hw", "entries": int(entries), "events": reads + c["writes"], "reads": reads, "read_hits": hits,
        "hit_rate": hits / reads if reads else 0.0, "writes": c["writes"], "fills": c["fills"],
        "evictions": c["evictions"], "prefetches": c["prefetches"], "prefetch_hits": c["prefetch_hits"],
        "attention_recall": sh / sr if sr > 0 else 0.0,
        "no_victim": c["no_victim"], "stall_cycles": c["stall_cycles"], "step_errors": c["step_errors"],
        "bad_events": c["bad_events"],
        "decision_errors": int(((dec["flags"] & FLAG_ERROR) != 0).sum()),
        "n_queues": trace.n_queues, "params": P.policy_param_dict("hw", params),
        "transport": dev.t.name, "via": via,
        **({k: c[k] for k in TIER_REPLAY_KEYS} if tiers else {}),
        **({"prefetch_trigger_all": trigger_all, "prefetch_drops": c["prefetch_drops"]} if has_prefetch else {}),
    }


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
