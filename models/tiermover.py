"""Golden model of the tier mover: which lines move between the fast tier (device DRAM) and the
capacity tier (flash) for each command of the tracker's decision stream, in what order, with
what data, and the counters (transaction level; docs/tiermover.md).

Geometry: ``n_queues`` queues, ``n_positions`` positions per queue (a power of two),
``frames_per_queue`` resident frames per queue (the budget C), an entry = ``lines_per_entry``
lines of ``line_bits`` bits. Line addresses (one word = one line on both ports):

* DRAM frame ``f = queue * frames_per_queue + slot``, line ``i``: ``f * lines_per_entry + i``;
* flash entry ``e = queue * n_positions + position``, line ``i``: ``e * lines_per_entry + i``.

One command (the tracker's decision, with the resident slot it concerns):

* ``hit``: no traffic; ``write`` sets the frame's dirty bit;
* ``inserted`` with ``victim_valid``: the victim leaves the frame ``slot``. After the evict
  permission (``evict_req`` / ``evict_grant``; the grant's ``dirty_from_host`` makes the frame
  dirty) a dirty victim is written back, lines 0..L-1 (DRAM read, flash write); a clean one is
  dropped without traffic. Then the new position takes the frame;
* ``inserted`` without a victim: the new position takes the free frame ``slot``;
* an insert by a read (``write`` = 0) fills the frame from flash, lines 0..L-1 (flash read,
  DRAM write); an insert by a write allocates without a fill (the host overwrites the whole
  entry) and the frame is dirty;
* neither ``hit`` nor ``inserted`` (the tracker's ``no_victim`` bypass, or an errored
  decision): no traffic, counted in ``bypasses``;
* a command inconsistent with the frame table or out of range is *bad*: no traffic, no state
  change, ``bad`` in its done record, counted in ``bad_commands`` (:func:`check_command`).

Host line operations (``host_ops``; docs/tiermover.md "Host line operations"): a command with
``host`` = 1 also carries one host access to line ``line`` of its entry, a read (``write`` = 0) or
a write (``write`` = 1, data ``wdata``). It is applied *after* the command's own moves (writeback,
then fill):

* the entry is resident after the command (a hit, or inserted): the DRAM line
  ``dram_addr(queue, slot, line)``; a write makes the frame dirty;
* otherwise (a bypass): the flash line ``flash_addr(queue, position, line)`` (``host_bypasses``);
* a bad command (a ``line`` >= ``lines_per_entry`` makes it bad too): no access; a write's data
  is dropped (``host_wdata_dropped``).

Each host op answers one response {data, write, resident, bad}: a read's data, 0 for a write
(a completion) and for a bad command. A write miss that carries a host op fills first (the host
writes one line; the entry's other lines must be the entry's, not the previous occupant's); a write
miss without a host op keeps the write-miss rule (no fill: the host writes the whole entry).

The model keeps the frame table {valid, dirty, position} and the data of both tiers; the host's
writes (its host ops; without ``host_ops`` the writes after a write command is done; or with a
``dirty_from_host`` grant) are applied through the same calls, so the data the RTL moves can be
predicted line by line.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from cxlkv.errors import CxlkvError

#: counters the model predicts (the RTL has these and the timing/protocol ones of COUNTERS_RTL)
COUNTERS = ("commands", "hits", "fills", "writebacks", "clean_drops", "bypasses", "bad_commands",
            "lines_to_flash", "lines_to_dram")
#: counters only the RTL can know (cycles, protocol violations of the grant and response streams)
COUNTERS_RTL = ("stall_cycles", "mem_wait_cycles", "grant_unexpected", "grant_mismatch", "resp_unexpected")

#: counters of the host line operations (only with ``host_ops``; the model predicts these): ops served
#: (reads, writes), ops served from flash (bypass), write data of bad commands dropped
COUNTERS_HOST = ("host_reads", "host_writes", "host_bypasses", "host_wdata_dropped")

#: bits of ``err_status`` (sticky)
ERR_GRANT_UNEXPECTED, ERR_GRANT_MISMATCH, ERR_RESP_UNEXPECTED = 1, 2, 4


class TierMoverConfigError(CxlkvError, ValueError):
    """A tier-mover geometry that cannot be built."""


class TierMoverUsageError(CxlkvError, ValueError):
    """A model call that cannot be a command of the RTL (a host op without ``host_ops``, missing data)."""


def bits(n: int) -> int:
    """Bits to index ``n`` things (at least 1)."""
    return max(1, (n - 1).bit_length())


@dataclass(frozen=True)
class TierMoverConfig:
    n_queues: int = 4
    n_positions: int = 64
    frames_per_queue: int = 4
    lines_per_entry: int = 8
    line_bits: int = 512

    def __post_init__(self):
        for name in ("n_queues", "n_positions", "frames_per_queue", "lines_per_entry", "line_bits"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TierMoverConfigError(f"tier mover: {name} must be a positive integer, got {v!r}")
        if self.n_positions < 2 or self.n_positions & (self.n_positions - 1):
            raise TierMoverConfigError(f"tier mover: n_positions must be a power of two >= 2, got {self.n_positions}")
        if self.frames_per_queue > self.n_positions:
            raise TierMoverConfigError(f"tier mover: frames_per_queue ({self.frames_per_queue}) exceeds "
                                       f"n_positions ({self.n_positions})")

    # field widths
    @property
    def queue_bits(self): return bits(self.n_queues)
    @property
    def pos_bits(self): return bits(self.n_positions)
    @property
    def slot_bits(self): return bits(self.frames_per_queue)
    @property
    def n_frames(self): return self.n_queues * self.frames_per_queue
    @property
    def dram_lines(self): return self.n_frames * self.lines_per_entry
    @property
    def flash_lines(self): return self.n_queues * self.n_positions * self.lines_per_entry
    @property
    def line_idx_bits(self): return bits(self.lines_per_entry)
    @property
    def dram_addr_bits(self): return bits(self.dram_lines)
    @property
    def flash_addr_bits(self): return bits(self.flash_lines)

    def frame(self, queue, slot):
        return queue * self.frames_per_queue + slot

    def dram_addr(self, queue, slot, line):
        return self.frame(queue, slot) * self.lines_per_entry + line

    def flash_addr(self, queue, position, line):
        return (queue * self.n_positions + position) * self.lines_per_entry + line


@dataclass(frozen=True)
class Command:
    queue: int
    position: int
    slot: int
    hit: int = 0
    inserted: int = 0
    victim_valid: int = 0
    victim: int = 0
    write: int = 0
    host: int = 0        # host_ops only: the command carries one host line op (direction: ``write``)
    line: int = 0        # ... on this line of the entry

    def as_dict(self):
        return dict(queue=self.queue, position=self.position, slot=self.slot, hit=self.hit,
                    inserted=self.inserted, victim_valid=self.victim_valid, victim=self.victim, write=self.write,
                    host=self.host, line=self.line)


@dataclass
class Result:
    """What one command does: its done record and its memory traffic, per port and kind, in order."""
    done: dict
    evict: bool = False                                # asks for permission (evict_req)
    dram_reads: list = field(default_factory=list)     # [addr]            writeback: frame lines
    flash_writes: list = field(default_factory=list)   # [(addr, data)]    writeback: to the victim's entry
    flash_reads: list = field(default_factory=list)    # [addr]            fill: the new position's entry
    dram_writes: list = field(default_factory=list)    # [(addr, data)]    fill: into the frame
    host_rsp: dict | None = None                       # host op: {data, write, resident, bad}
    host_access: tuple | None = None                   # host op's memory access: (port, write, addr, data)
                                                       # port "dram" or "flash"; data 0 for a read


@dataclass
class Frame:
    valid: bool = False
    dirty: bool = False
    position: int = 0


def check_command(cfg: TierMoverConfig, frame: Frame | None, c: Command) -> str | None:
    """Why command ``c`` is bad (None: it is good). ``frame`` is the frame state (None: out of range)."""
    if not 0 <= c.queue < cfg.n_queues:
        return f"queue {c.queue} out of range"
    if not 0 <= c.slot < cfg.frames_per_queue:
        return f"slot {c.slot} out of range"
    if not 0 <= c.position < cfg.n_positions or not 0 <= c.victim < cfg.n_positions:
        return "position out of range"
    if c.host and not 0 <= c.line < cfg.lines_per_entry:
        return f"host line {c.line} out of range"
    if c.hit:
        if c.inserted or c.victim_valid:
            return "hit with inserted or victim_valid"
        if not frame.valid or frame.position != c.position:
            return f"hit on frame ({c.queue}, {c.slot}) that does not hold position {c.position}"
        return None
    if not c.inserted:
        return "victim_valid without inserted" if c.victim_valid else None
    if c.victim_valid:
        if c.victim == c.position:
            return "victim equals the inserted position"
        if not frame.valid or frame.position != c.victim:
            return f"victim {c.victim} is not in frame ({c.queue}, {c.slot})"
        return None
    if frame.valid:
        return f"insert without a victim into occupied frame ({c.queue}, {c.slot})"
    return None


class TierMoverModel:
    """Transaction-level model. ``flash``/``dram``: {line address: data}; missing lines read 0.
    ``host_ops``: commands may carry host line ops (and the counters include COUNTERS_HOST)."""

    def __init__(self, cfg: TierMoverConfig, flash: dict | None = None, dram: dict | None = None,
                 host_ops: bool = False):
        self.cfg = cfg
        self.host_ops = bool(host_ops)
        self.frames = [Frame() for _ in range(cfg.n_frames)]
        self.flash = dict(flash or {})
        self.dram = dict(dram or {})
        self.counters = dict.fromkeys(COUNTERS + (COUNTERS_HOST if self.host_ops else ()), 0)

    def _done(self, c: Command, **bits_):
        d = dict(queue=c.queue, position=c.position, slot=c.slot, write=c.write, hit=0, fill=0,
                 writeback=0, clean_drop=0, bypass=0, bad=0)
        d.update(bits_)
        return d

    def host_write(self, queue: int, slot: int, lines: dict):
        """The host writes lines {line index: data} of frame (queue, slot) (after a write command is done)."""
        cfg = self.cfg
        for i, v in lines.items():
            if not 0 <= i < cfg.lines_per_entry:
                raise TierMoverConfigError(f"tier mover: line {i} out of range")
            self.dram[cfg.dram_addr(queue, slot, i)] = v

    def _move(self, res: Result, kind: str, lines_counter: str, src: dict, src_base: int, reads: list,
              dst: dict, dst_base: int, writes: list):
        """One entry moved between the tiers (``kind``: "writeback" or "fill"): counted in
        ``kind + "s"`` and ``lines_counter``, flagged in the done record; lines 0..L-1 in order,
        line i read from ``src`` at ``src_base + i`` (a line never written reads 0) and written to
        ``dst`` at ``dst_base + i``, logged in ``reads`` ([addr]) and ``writes`` ([(addr, data)])."""
        L = self.cfg.lines_per_entry
        self.counters[kind + "s"] += 1
        self.counters[lines_counter] += L
        res.done[kind] = 1
        for i in range(L):
            v = src.get(src_base + i, 0)
            reads.append(src_base + i)
            dst[dst_base + i] = v
            writes.append((dst_base + i, v))

    def command(self, c: Command, grant_dirty: bool = False, grant_lines: dict | None = None, *,
                host: int | None = None, line: int | None = None, wdata: int | None = None) -> Result:
        """Apply one command. ``grant_dirty``/``grant_lines``: the evict grant's ``dirty_from_host``
        and the lines the host wrote back into the frame before granting (only for an eviction).
        ``host``/``line`` (override ``c.host``/``c.line``) and ``wdata`` (the host write's data, also
        for a bad command, whose data is dropped): the command's host line op (``host_ops`` only)."""
        if host is not None or line is not None:
            c = replace(c, host=c.host if host is None else int(bool(host)), line=c.line if line is None else line)
        if c.host:
            self._check_host_args(c, wdata)
        res = self._command(c, grant_dirty, grant_lines)
        if c.host:
            self._host_op(c, res, wdata)
        return res

    def _check_host_args(self, c: Command, wdata):
        if not self.host_ops:
            raise TierMoverUsageError("tier mover: a host line op needs a model built with host_ops=True")
        if c.write:
            if wdata is None:
                raise TierMoverUsageError("tier mover: a host write needs wdata (its data is taken even when "
                                          "the command is bad)")
            if not isinstance(wdata, int) or not 0 <= wdata < (1 << self.cfg.line_bits):
                raise TierMoverUsageError(f"tier mover: wdata {wdata!r} does not fit {self.cfg.line_bits} bits")
        elif wdata is not None:
            raise TierMoverUsageError("tier mover: wdata given for a host read")

    def _host_op(self, c: Command, res: Result, wdata):
        """The host op of command ``c``, after its moves (``res`` holds them)."""
        cfg, ctr = self.cfg, self.counters
        d = res.done
        rsp = dict(data=0, write=int(bool(c.write)), resident=0, bad=0)
        if d["bad"]:
            rsp["bad"] = 1
            if c.write:
                ctr["host_wdata_dropped"] += 1
            res.host_rsp = rsp
            return
        if d["bypass"]:
            port, mem, addr = "flash", self.flash, cfg.flash_addr(c.queue, c.position, c.line)
            ctr["host_bypasses"] += 1
        else:
            port, mem, addr = "dram", self.dram, cfg.dram_addr(c.queue, c.slot, c.line)
            rsp["resident"] = 1
        if c.write:
            mem[addr] = wdata
            ctr["host_writes"] += 1
            if rsp["resident"]:
                self.frames[cfg.frame(c.queue, c.slot)].dirty = True
            res.host_access = (port, 1, addr, wdata)
        else:
            rsp["data"] = mem.get(addr, 0)
            ctr["host_reads"] += 1
            res.host_access = (port, 0, addr, 0)
        res.host_rsp = rsp

    def _command(self, c: Command, grant_dirty: bool, grant_lines: dict | None) -> Result:
        cfg, ctr = self.cfg, self.counters
        ctr["commands"] += 1
        in_range = 0 <= c.queue < cfg.n_queues and 0 <= c.slot < cfg.frames_per_queue
        fr = self.frames[cfg.frame(c.queue, c.slot)] if in_range else None
        if check_command(cfg, fr, c) is not None:
            ctr["bad_commands"] += 1
            return Result(self._done(c, bad=1))
        if c.hit:
            ctr["hits"] += 1
            fr.dirty = fr.dirty or bool(c.write)
            return Result(self._done(c, hit=1))
        if not c.inserted:
            ctr["bypasses"] += 1
            return Result(self._done(c, bypass=1))
        res = Result(self._done(c))
        frame_base = cfg.dram_addr(c.queue, c.slot, 0)
        if c.victim_valid:
            res.evict = True
            if grant_dirty:
                self.host_write(c.queue, c.slot, grant_lines or {})
            if fr.dirty or grant_dirty:
                self._move(res, "writeback", "lines_to_flash", self.dram, frame_base, res.dram_reads,
                           self.flash, cfg.flash_addr(c.queue, c.victim, 0), res.flash_writes)
            else:
                ctr["clean_drops"] += 1
                res.done["clean_drop"] = 1
        if not c.write or c.host:               # a host line write into a new frame: the entry's other lines first
            self._move(res, "fill", "lines_to_dram", self.flash, cfg.flash_addr(c.queue, c.position, 0),
                       res.flash_reads, self.dram, frame_base, res.dram_writes)
        fr.valid, fr.dirty, fr.position = True, bool(c.write), c.position
        return res
