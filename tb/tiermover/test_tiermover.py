"""cocotb tests of the tier mover against cxlkv.models.tiermover.

The stimulus is generated in command order from the golden model's own frame table (a
tracker-like stream: hits, inserts into free frames, evictions, write misses, bypasses, bad
commands, with the hazards: the same frame evicted back to back, a position evicted and refilled
at once). For every command the bench decides up front what the host does (the grant's
``dirty_from_host`` and the lines it writes back, the lines it writes after a write command), so
the model predicts every line each port must carry. Scoreboards, all in order:

* ``done``: one record per command;
* ``evict_req``: the evicting commands' {queue, victim, slot};
* DRAM reads (writebacks), DRAM writes with data (fills), flash reads (fills), flash writes with
  data (writebacks): each port's traffic of one kind is the concatenation, in command order, of the
  commands' traffic. The data checks the order per frame along the way: a writeback that read a
  frame before its fill, or a fill that read flash before the writeback, carries the wrong data.

At the end the DRAM and flash models' contents equal the model's, and the counters equal the
model's. Every output stream (``OUTPUTS``) is held to the stream rule every cycle (payload and
``valid`` kept while stalled: tb/common.py ``StreamStability``), which the scoreboards, seeing only
what is taken, cannot check. The bench's host: after a write command's ``done`` it writes its lines into the frame;
it grants an eviction after a random latency; with ``dirty_from_host`` it first waits until every
earlier command on the frame is done (it must have read the line to hold it dirty) and writes its
dirty lines into the frame.

With ``host_ops`` (the configurations with ``host_ops`` in their parameters) commands carry the
host's line ops (``host``, ``line``; data on ``host_wdata``, answers on ``host_rsp``) and the host
writes nothing behind the mover's back (but for a ``dirty_from_host`` grant's lines). A host op's
memory access interleaves with other commands' moves on a port, so the memory traffic is checked
per address instead of per kind: each line's sequence of reads and writes (with data) equals the
model's in command order (the mover keeps every address's accesses in command order; two reads
of one line may swap, which changes nothing). ``host_rsp`` is checked in order, data bit-exact.

Every wait on the block is bounded by a cycle count naming what was awaited: an input offered and
never taken (``cmd``, ``host_wdata``, ``evict_grant``) fails after OFFER_MAX_WAIT cycles (tb/common.py
``offer``), ``busy`` after reset after 1000, a grant waiting for the earlier commands on its
frame after OFFER_MAX_WAIT, a drain after 200,000.

Environment: CXLKV_COMMANDS (random test, default 3000), CXLKV_SEED; the throughput test:
CXLKV_TM_MIX (hit / evict), CXLKV_TM_DRAM_LATENCY, CXLKV_TM_FLASH_LATENCY, CXLKV_TM_COMMANDS.
"""
import os
from dataclasses import replace

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.hdl.tiermover import TierMoverLayouts
from cxlkv.models import tiermover as M
from cxlkv.tb.common import (OFFER_MAX_WAIT, InOrderScoreboard, Packer, ScoreboardError, StreamPort, StreamStability,
                             drive_ready, drive_stream, env_int, must_fail, offer, params, report_metric, test_rng,
                             watch_stability, watch_streams)
from cxlkv.tb.tiermover.memory import TierMemory


def config() -> M.TierMoverConfig:
    p = params()
    return M.TierMoverConfig(p["n_queues"], p["n_positions"], p["frames_per_queue"], p["lines_per_entry"],
                             p["line_bits"])


HOST = bool(params().get("host_ops", False))

#: the block's output streams, each checked for the stream rule every cycle (``TierEnv.stability``)
OUTPUTS = ("done", "evict_req", "dram_req", "flash_req") + (("host_rsp",) if HOST else ())


class IntPacker:
    """A plain-width payload (``host_wdata``): the value itself."""

    def __init__(self, width):
        self.width = width

    def pack(self, v):
        if not 0 <= v < (1 << self.width):
            raise ValueError(f"{v} does not fit {self.width} bits")
        return v


class AddrScoreboard:
    """One in-order scoreboard per (port, line address): each line's reads ("r",) and writes ("w", data)."""

    def __init__(self, name):
        self.name = name
        self.sbs = {}

    def _sb(self, key):
        if key not in self.sbs:
            self.sbs[key] = InOrderScoreboard(f"{self.name}[{key[0]} {key[1]}]")
        return self.sbs[key]

    def expect(self, key, item):
        self._sb(key).expect(item)

    def actual(self, key, item):
        self._sb(key).actual(item)

    @property
    def errors(self):
        return sum(sb.errors + len(sb.expected) for sb in self.sbs.values())

    def check(self):
        bad = []
        for sb in self.sbs.values():
            if sb.errors or sb.expected:
                try:
                    sb.check()
                except ScoreboardError as exc:
                    bad.append(str(exc))
        if bad:
            raise ScoreboardError(f"{self.name}: {len(bad)} line addresses differ\n" + "\n".join(bad[:5]))
        if not any(sb.compared for sb in self.sbs.values()):
            raise ScoreboardError(f"{self.name}: nothing was compared")

    def assert_caught_one(self, key, index, log):
        """Negative-test check: only line ``key`` differs, by exactly one mismatch at ``index``, and check()
        fails on it."""
        bad = [k for k, sb in self.sbs.items() if sb.errors or sb.expected]
        if bad != [key]:
            raise AssertionError(f"{self.name}: expected only {key} to differ, saw {len(bad)}: {bad[:5]}")
        sb = self.sbs[key]
        assert not sb.expected, f"{sb.name}: {len(sb.expected)} predictions never arrived"
        sb.assert_caught_one(index)
        must_fail(self.check, f"a corrupted access to {key}", log, match="line addresses differ")


class Stimulus:
    """Tracker-like commands generated against the model's frame table; the host's data decided up front."""

    def __init__(self, cfg, rng, *, p_hit=0.35, p_write=0.3, p_bypass=0.03, p_bad=0.03, p_grant_dirty=0.25,
                 p_same_frame=0.25, p_refill=0.25, queues=None, host=False, p_host=0.75):
        self.cfg, self.rng = cfg, rng
        self.host = host                    # commands carry host line ops (host_ops)
        self.p = dict(hit=p_hit, write=p_write, bypass=p_bypass, bad=p_bad, grant_dirty=p_grant_dirty,
                      same_frame=p_same_frame, refill=p_refill, host=p_host)
        self.queues = list(range(cfg.n_queues)) if queues is None else queues
        mask = (1 << cfg.line_bits) - 1
        flash = {a: rng.getrandbits(cfg.line_bits) & mask for a in range(cfg.flash_lines)}
        self.flash0 = dict(flash)
        self.model = M.TierMoverModel(cfg, flash=flash, host_ops=host)
        self.items = []          # per command: dict(cmd, res, grant_dirty, grant_lines, host_lines)
        self.last_slot = {}      # queue -> slot of its last eviction
        self.last_victim = {}    # queue -> position evicted last
        self.cover = dict.fromkeys(("hit", "write_hit", "fill_free", "write_miss", "writeback", "clean_drop",
                                    "grant_dirty", "same_frame_b2b", "evict_then_refill", "bypass", "bad"), 0)
        if host:
            self.cover.update(dict.fromkeys(
                ("host_read_dram", "host_write_dram", "host_read_flash", "host_write_flash", "host_bad",
                 "host_wdata_dropped", "host_after_fill", "host_after_writeback", "host_same_frame_b2b",
                 "evict_after_host", "bypass_read_after_writeback", "bypass_write_then_fill"), 0))
        self.last_wb = {}        # (queue, position) -> command index of its last writeback
        self.last_bpw = {}       # queue -> (position, command index) of its last bypass host write
        self.last_host_frame = None   # (queue, slot) of the previous command's resident host op
        self.prev = None

    def _lines(self, all_lines):
        cfg, rng = self.cfg, self.rng
        idx = range(cfg.lines_per_entry) if all_lines else \
            sorted(rng.sample(range(cfg.lines_per_entry), rng.randint(1, cfg.lines_per_entry)))
        return {i: rng.getrandbits(cfg.line_bits) for i in idx}

    def _bad(self, q):
        cfg, rng = self.cfg, self.rng
        frames = [self.model.frames[cfg.frame(q, s)] for s in range(cfg.frames_per_queue)]
        choices = [M.Command((1 << cfg.queue_bits) - 1, 0, 0, hit=1)] if cfg.n_queues < (1 << cfg.queue_bits) else []
        if cfg.frames_per_queue < (1 << cfg.slot_bits):
            choices.append(M.Command(q, 1, (1 << cfg.slot_bits) - 1, inserted=1))
        s = rng.randrange(cfg.frames_per_queue)
        fr = frames[s]
        choices.append(M.Command(q, (fr.position + 1) % cfg.n_positions, s, hit=1))        # wrong position
        if fr.valid:
            choices.append(M.Command(q, (fr.position + 2) % cfg.n_positions, s, inserted=1))   # occupied
            choices.append(M.Command(q, (fr.position + 2) % cfg.n_positions, s, inserted=1, victim_valid=1,
                                     victim=(fr.position + 1) % cfg.n_positions))       # wrong victim
        choices.append(M.Command(q, 0, s, victim_valid=1))                               # victim without insert
        if self.host and fr.valid and cfg.lines_per_entry < (1 << cfg.line_idx_bits):
            choices.append(M.Command(q, fr.position, s, hit=1, host=1, line=cfg.lines_per_entry))   # line range
        return rng.choice(choices)

    def next(self):
        cfg, rng, p = self.cfg, self.rng, self.p
        q = rng.choice(self.queues)
        frames = [self.model.frames[cfg.frame(q, s)] for s in range(cfg.frames_per_queue)]
        resident = {fr.position: s for s, fr in enumerate(frames) if fr.valid}
        write = int(rng.random() < p["write"])
        x = rng.random()
        if x < p["bad"]:
            cmd = replace(self._bad(q), write=write)       # (a bad host write's data is dropped)
        elif x < p["bad"] + p["bypass"]:
            pos = rng.randrange(cfg.n_positions)
            if self.host and q in self.last_victim and self.last_victim[q] not in resident and rng.random() < 0.5:
                pos = self.last_victim[q]        # a bypass op on a position just written back
            cmd = M.Command(q, pos, rng.randrange(cfg.frames_per_queue), write=write)
        elif resident and x < p["bad"] + p["bypass"] + p["hit"]:
            pos = rng.choice(sorted(resident))
            pv = self.prev
            if self.host and pv is not None and pv.queue == q and rng.random() < p["same_frame"]:
                pos = next((x for x, s in resident.items() if s == pv.slot), pos)    # the same frame again
            cmd = M.Command(q, pos, resident[pos], hit=1, write=write)
        else:
            free = [s for s, fr in enumerate(frames) if not fr.valid]
            if self.host and q in self.last_bpw and self.last_bpw[q][0] not in resident \
                    and rng.random() < 0.6:
                pos = self.last_bpw[q][0]        # fill a position just written by a bypass op
            elif q in self.last_victim and self.last_victim[q] not in resident and rng.random() < p["refill"]:
                pos = self.last_victim[q]
            else:
                pos = rng.choice([x for x in range(cfg.n_positions) if x not in resident])
            if free:
                cmd = M.Command(q, pos, free[0], inserted=1, write=write)
            else:
                if q in self.last_slot and rng.random() < p["same_frame"]:
                    s = self.last_slot[q]
                else:
                    s = rng.randrange(cfg.frames_per_queue)
                cmd = M.Command(q, pos, s, inserted=1, victim_valid=1, victim=frames[s].position, write=write)
        if self.host and not cmd.host and rng.random() < p["host"]:
            cmd = replace(cmd, host=1, line=rng.randrange(cfg.lines_per_entry))
        return self.add(cmd)

    def add(self, cmd, grant_dirty=None, wdata=None, wdata_delay=None):
        """Apply ``cmd`` to the model. ``wdata``: a host write's data (default random); ``wdata_delay``:
        cycles the bench's host waits before offering it (default random)."""
        cfg, rng = self.cfg, self.rng
        evicting = M.check_command(cfg, self._frame(cmd), cmd) is None and cmd.inserted and cmd.victim_valid \
            and not cmd.hit
        gd = evicting and (rng.random() < self.p["grant_dirty"] if grant_dirty is None else grant_dirty)
        glines = self._lines(False) if gd else None
        prev = self.prev
        if cmd.host and cmd.write and wdata is None:
            wdata = rng.getrandbits(cfg.line_bits)
        res = self.model.command(cmd, gd, glines, wdata=wdata if cmd.host and cmd.write else None)
        host = None
        if not self.host and cmd.write and not (res.done["bad"] or res.done["bypass"]):
            host = self._lines(not res.done["hit"])     # a write miss overwrites the whole entry
            self.model.host_write(cmd.queue, cmd.slot, host)
        d = res.done
        cv = self.cover
        cv["bad"] += d["bad"]
        cv["bypass"] += d["bypass"]
        cv["hit"] += d["hit"]
        cv["write_hit"] += d["hit"] & cmd.write
        cv["writeback"] += d["writeback"]
        cv["clean_drop"] += d["clean_drop"]
        cv["grant_dirty"] += int(bool(gd))
        cv["fill_free"] += d["fill"] and not cmd.victim_valid
        cv["write_miss"] += int(cmd.inserted and cmd.write and not d["bad"])
        if evicting:
            if prev is not None and prev.queue == cmd.queue and prev.slot == cmd.slot and prev.inserted \
                    and not prev.hit:
                cv["same_frame_b2b"] += 1
            self.last_slot[cmd.queue] = cmd.slot
            self.last_victim[cmd.queue] = cmd.victim
        if prev is not None and prev.inserted and prev.victim_valid and cmd.inserted and not d["bad"] \
                and prev.queue == cmd.queue and prev.victim == cmd.position:
            cv["evict_then_refill"] += 1
        if self.host:
            self._cover_host(cmd, res, evicting)
        self.prev = cmd if not d["bad"] else None
        self.items.append(dict(cmd=cmd, res=res, grant_dirty=bool(gd), grant_lines=glines, host_lines=host,
                               wdata=wdata if cmd.host and cmd.write else None, wdata_delay=wdata_delay))
        return self.items[-1]

    def _cover_host(self, cmd, res, evicting):
        cv, d, k = self.cover, res.done, len(self.items)
        key = (cmd.queue, cmd.slot)
        prev_host_frame = self.last_host_frame
        if evicting and prev_host_frame == key:
            cv["evict_after_host"] += 1                  # hazard (b): evicted right after a host op on it
        if d["writeback"]:
            self.last_wb[(cmd.queue, cmd.victim)] = k
        rsp = res.host_rsp
        self.last_host_frame = key if rsp is not None and rsp["resident"] else None
        if d["fill"] and cmd.queue in self.last_bpw and self.last_bpw[cmd.queue][0] == cmd.position \
                and k - self.last_bpw[cmd.queue][1] <= 8:
            cv["bypass_write_then_fill"] += 1            # hazard (d)
        if rsp is None:
            return
        if rsp["bad"]:
            cv["host_bad"] += 1
            cv["host_wdata_dropped"] += cmd.write
            return
        port = "dram" if rsp["resident"] else "flash"
        cv[f"host_{'write' if cmd.write else 'read'}_{port}"] += 1
        cv["host_after_fill"] += d["fill"]               # hazard (a)
        cv["host_after_writeback"] += d["writeback"]
        if rsp["resident"] and prev_host_frame == key:
            cv["host_same_frame_b2b"] += 1               # host ops on one frame back to back
        if not rsp["resident"]:
            if cmd.write:
                self.last_bpw[cmd.queue] = (cmd.position, k)
            elif k - self.last_wb.get((cmd.queue, cmd.position), -100) <= 8:
                cv["bypass_read_after_writeback"] += 1   # hazard (c)

    def _frame(self, cmd):
        cfg = self.cfg
        if 0 <= cmd.queue < cfg.n_queues and 0 <= cmd.slot < cfg.frames_per_queue:
            return self.model.frames[cfg.frame(cmd.queue, cmd.slot)]
        return None


class TierEnv:
    def __init__(self, dut, stim: Stimulus, rng, *, dram_latency=(2, 3), flash_latency=(6, 10), ready_prob=1.0,
                 cmd_idle=0.0, done_ready=1.0, grant_latency=(1, 6), manual_grants=False, rsp_ready=1.0,
                 wdata_idle=0.0, wdata_late=0.0, rsp_block=0, ereq_ready=1.0):
        self.dut, self.stim, self.cfg, self.rng = dut, stim, stim.cfg, rng
        self.host = HOST
        lay = TierMoverLayouts(self.cfg, self.host)
        self.cmd_pack, self.done_pack = Packer(lay.command), Packer(lay.done)
        self.ereq_pack, self.grant_pack = Packer(lay.evict_req), Packer(lay.evict_grant)
        self.cmd_port, self.done_port = StreamPort(dut, "cmd"), StreamPort(dut, "done")
        self.ereq_port, self.grant_port = StreamPort(dut, "evict_req"), StreamPort(dut, "evict_grant")
        kinds = ("done", "evict_req", "host_rsp") if self.host else \
            ("done", "evict_req", "dram_read", "dram_write", "flash_read", "flash_write")
        self.sb = {n: InOrderScoreboard(f"tiermover.{n}") for n in kinds}
        self.addr_sb = AddrScoreboard("tiermover.line_traffic")     # host_ops: per line address
        self.seen = dict.fromkeys(("dram_read", "dram_write", "flash_read", "flash_write"), 0)
        if self.host:
            self.rsp_port, self.wdata_port = StreamPort(dut, "host_rsp"), StreamPort(dut, "host_wdata")
            self.rsp_pack, self.wdata_pack = Packer(lay.host_rsp), IntPacker(self.cfg.line_bits)
        self.rsp_ready, self.wdata_idle, self.wdata_late, self.rsp_block = rsp_ready, wdata_idle, wdata_late, rsp_block
        self.dram = TierMemory(dut.clk, StreamPort(dut, "dram_req"), StreamPort(dut, "dram_resp"),
                               Packer(lay.dram_req), rng, ready_prob=ready_prob, burst=3,
                               latency=dram_latency[0], jitter=dram_latency[1] - dram_latency[0], name="dram",
                               rst=dut.rst,
                               on_request=lambda w, a, d: self._mem("dram", w, a, d))
        self.flash = TierMemory(dut.clk, StreamPort(dut, "flash_req"), StreamPort(dut, "flash_resp"),
                                Packer(lay.flash_req), rng, ready_prob=ready_prob, burst=3,
                                latency=flash_latency[0], jitter=flash_latency[1] - flash_latency[0],
                                name="flash", words=stim.flash0, rst=dut.rst,
                                on_request=lambda w, a, d: self._mem("flash", w, a, d))
        self.cmd_idle, self.done_ready, self.grant_latency = cmd_idle, done_ready, grant_latency
        self.ereq_ready = ereq_ready     # evict_req is a plain stream: the snoop engine may stall it
        self.manual_grants = manual_grants
        self.n_expected = 0
        self.cum = []                # per command: traffic of each kind up to and including it
        self._tot = dict.fromkeys(("dram_read", "dram_write", "flash_read", "flash_write"), 0)
        self.early_done = []         # commands that were done before all their traffic was issued
        self.done_count = 0
        self.ereqs = []              # evict_req handshakes not yet granted: (command index, payload, cycle)
        self.evict_idx = []          # command indices of evicting commands, in order
        self.n_ereq = 0
        self.cycle = 0
        self.first_accept = None
        self.accepted = 0
        self.cmd_stalls = 0          # cycles with cmd valid and not ready, as the monitor saw them
        self.ereq_stalls = 0         # cycles with evict_req valid and not ready
        self.last_done_cycle = None

    def _mem(self, port, write, addr, data):
        self.seen[f"{port}_{'write' if write else 'read'}"] += 1
        if self.host:
            self.addr_sb.actual((port, addr), ("w", data) if write else ("r",))
            return
        if port == "dram":
            self.sb["dram_write"].actual((addr, data)) if write else self.sb["dram_read"].actual(addr)
        else:
            self.sb["flash_write"].actual((addr, data)) if write else self.sb["flash_read"].actual(addr)

    def expect(self, items):
        """Queue the model's predictions of ``items`` (Stimulus items, in command order)."""
        for it in items:
            res = it["res"]
            idx = self.n_expected
            self.n_expected += 1
            self.sb["done"].expect(res.done)
            if res.evict:
                c = it["cmd"]
                self.sb["evict_req"].expect({"queue": c.queue, "position": c.victim, "slot": c.slot})
                self.evict_idx.append(idx)
            if self.host:
                self._expect_lines(res)
            else:
                self._expect_kinds(res)
            for kind, n in (("dram_read", res.dram_reads), ("dram_write", res.dram_writes),
                            ("flash_read", res.flash_reads), ("flash_write", res.flash_writes)):
                self._tot[kind] += len(n)
            if res.host_access is not None:
                port, w = res.host_access[:2]
                self._tot[f"{port}_{'write' if w else 'read'}"] += 1
            self.cum.append(dict(self._tot))

    def _expect_lines(self, res):
        """host_ops: each line's accesses, in command order (per command: writeback, fill, host op)."""
        ex = self.addr_sb.expect
        for a in res.dram_reads:
            ex(("dram", a), ("r",))
        for a, v in res.dram_writes:
            ex(("dram", a), ("w", v))
        for a, v in res.flash_writes:
            ex(("flash", a), ("w", v))
        for a in res.flash_reads:
            ex(("flash", a), ("r",))
        if res.host_access is not None:
            port, w, a, v = res.host_access
            ex((port, a), ("w", v) if w else ("r",))
        if res.host_rsp is not None:
            self.sb["host_rsp"].expect(res.host_rsp)

    def _expect_kinds(self, res):
        """Without host_ops: each port's traffic of one kind, in command order."""
        for a in res.dram_reads:
            self.sb["dram_read"].expect(a)
        for x in res.dram_writes:
            self.sb["dram_write"].expect(x)
        for a in res.flash_reads:
            self.sb["flash_read"].expect(a)
        for x in res.flash_writes:
            self.sb["flash_write"].expect(x)

    async def start(self, first=None):
        """Clock, reset, the memories, monitors and readies; then wait until ``busy`` falls. ``first``
        (a Stimulus item): offered on ``cmd`` from reset on, and ``start`` returns in the first
        cycle out of reset (busy) with it still offered, for the caller to watch."""
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst.value = 1
        for s in (dut.cmd__valid, dut.done__ready, dut.evict_req__ready, dut.evict_grant__valid, dut.clear_status):
            s.value = 0
        if first is not None:
            self.cmd_port.payload.value = self.cmd_pack.pack(first["cmd"].as_dict())
            self.cmd_port.valid.value = 1
        self.stability = watch_streams(dut, OUTPUTS, rst=dut.rst)
        cocotb.start_soon(self.dram.run())
        cocotb.start_soon(self.flash.run())
        cocotb.start_soon(self._monitor())
        if not self.manual_grants:
            cocotb.start_soon(self._grants())
        cocotb.start_soon(drive_ready(dut.clk, self.done_port, self.rng, self.done_ready, burst=3))
        cocotb.start_soon(drive_ready(dut.clk, self.ereq_port, self.rng, self.ereq_ready, burst=3))
        if self.host:
            self.wdata_port.valid.value = 0
            self.rsp_port.ready.value = 0
            cocotb.start_soon(self._rsp_ready())
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        if first is not None:
            return
        for _ in range(1000):             # busy: clearing the frame table, a cycle per frame
            if not int(dut.busy.value):
                break
            await RisingEdge(dut.clk)
        else:
            raise AssertionError("busy stayed high for 1000 cycles after reset (clearing the frame table)")

    async def _monitor(self):
        dut = self.dut
        while True:
            await ReadOnly()
            if int(dut.rst.value):        # the state an earlier test left is not this test's traffic
                await RisingEdge(dut.clk)
                continue
            self.cycle += 1
            if int(self.cmd_port.valid.value) and not int(self.cmd_port.ready.value):
                self.cmd_stalls += 1
            if int(self.cmd_port.valid.value) and int(self.cmd_port.ready.value):
                if self.first_accept is None:
                    self.first_accept = self.cycle
                self.accepted += 1
            if int(self.ereq_port.valid.value) and not int(self.ereq_port.ready.value):
                self.ereq_stalls += 1
            if int(self.ereq_port.valid.value) and int(self.ereq_port.ready.value):
                pl = self.ereq_pack.unpack(int(self.ereq_port.payload.value))
                self.sb["evict_req"].actual(pl)
                k = self.evict_idx[self.n_ereq] if self.n_ereq < len(self.evict_idx) else None
                self.n_ereq += 1
                self.ereqs.append((k, pl, self.cycle))
            if self.host and int(self.rsp_port.valid.value) and int(self.rsp_port.ready.value):
                self.sb["host_rsp"].actual(self.rsp_pack.unpack(int(self.rsp_port.payload.value)))
            if int(self.done_port.valid.value) and int(self.done_port.ready.value):
                pl = self.done_pack.unpack(int(self.done_port.payload.value))
                self.sb["done"].actual(pl)
                k = self.done_count
                self.done_count += 1
                if k < len(self.cum):      # done means every request of the command was accepted
                    seen = dict(self.seen)
                    if any(seen[n] < self.cum[k][n] for n in self._tot) and len(self.early_done) < 10:
                        self.early_done.append((k, seen, self.cum[k]))
                self.last_done_cycle = self.cycle
                if k < len(self.stim.items):
                    it = self.stim.items[k]
                    if it["host_lines"]:          # the host writes the entry once the command is done
                        c = it["cmd"]
                        for i, v in it["host_lines"].items():
                            self.dram.words[self.cfg.dram_addr(c.queue, c.slot, i)] = v
            await RisingEdge(dut.clk)

    def _frame_free(self, k):
        """The host may answer the snoop of command ``k``'s victim. A clean answer needs nothing (the
        host holds no copy; the host's data of earlier write commands is ordered by the tier mover, which
        reads a frame only after every earlier command on it is done). With ``dirty_from_host`` the host
        read the victim, so every earlier command on the frame is done before it writes the lines back."""
        it = self.stim.items[k]
        if not it["grant_dirty"]:
            return True
        c = it["cmd"]
        for j in range(k - 1, self.done_count - 1, -1):
            cj = self.stim.items[j]["cmd"]
            if cj.queue == c.queue and cj.slot == c.slot:
                return False
        return True

    async def _grants(self):
        dut, rng = self.dut, self.rng
        while True:
            if not self.ereqs:
                await RisingEdge(dut.clk)
                continue
            k, pl, t = self.ereqs[0]
            wait = rng.randint(*self.grant_latency)
            since = self.cycle
            while self.cycle < t + wait or (k is not None and not self._frame_free(k)):
                if self.cycle - since > OFFER_MAX_WAIT:
                    raise AssertionError(f"evict_req {pl}: the earlier commands on its frame were not done "
                                         f"after {OFFER_MAX_WAIT} cycles (done_count {self.done_count}, "
                                         f"command {k}): the design stopped completing commands")
                await RisingEdge(dut.clk)
            dirty = 0
            if k is not None:
                it = self.stim.items[k]
                dirty = int(it["grant_dirty"])
                if dirty:                        # the host writes its dirty lines back, then answers
                    c = it["cmd"]
                    for i, v in it["grant_lines"].items():
                        self.dram.words[self.cfg.dram_addr(c.queue, c.slot, i)] = v
            await self.grant(pl["queue"], pl["position"], dirty)
            self.ereqs.pop(0)

    async def grant(self, queue, position, dirty=0):
        """Offer one grant and wait until it is taken: at most OFFER_MAX_WAIT cycles, then an
        AssertionError naming ``evict_grant`` (``offer``)."""
        await offer(self.dut.clk, self.grant_port, self.grant_pack,
                    {"queue": queue, "position": position, "dirty_from_host": dirty})

    async def _rsp_ready(self):
        """host_rsp backpressure: low for the first ``rsp_block`` cycles, then ready with ``rsp_ready``."""
        while self.cycle < self.rsp_block:
            await RisingEdge(self.dut.clk)
        await drive_ready(self.dut.clk, self.rsp_port, self.rng, self.rsp_ready, burst=3)

    async def _drive_wdata(self, items):
        """The host's write data, one item per host write, in command order; each after its item's
        ``wdata_delay`` or a random one (idle cycles with ``wdata_idle``, a late item (up to 40 cycles)
        with ``wdata_late``), so it arrives before, with or after its command."""
        rng = self.rng
        for it in items:
            if it["wdata"] is None:
                continue
            delay = it["wdata_delay"]
            if delay is None:
                delay = rng.randrange(41) if rng.random() < self.wdata_late else 0
                while self.wdata_idle and rng.random() < self.wdata_idle:
                    delay += 1
            for _ in range(delay):
                await RisingEdge(self.dut.clk)
            await offer(self.dut.clk, self.wdata_port, self.wdata_pack, it["wdata"])

    async def drive(self, items):
        if self.host:
            cocotb.start_soon(self._drive_wdata(items))
        await drive_stream(self.dut.clk, self.cmd_port, self.cmd_pack, [it["cmd"].as_dict() for it in items],
                           self.rng, idle=self.cmd_idle)

    async def drain(self, count=None, limit=200000):
        """Wait until ``count`` (default: every expected) commands are done and nothing is in flight."""
        dut = self.dut
        count = self.n_expected if count is None else count
        for _ in range(limit):
            await RisingEdge(dut.clk)
            if self.done_count >= count and int(dut.idle.value) and self.dram.quiet and self.flash.quiet:
                for _ in range(5):
                    await RisingEdge(dut.clk)
                return
        raise AssertionError(f"tier mover did not drain: {self.done_count} of {self.n_expected} done")

    def check(self, *, counters=True, scoreboards=True):
        """Every scoreboard (``scoreboards``: the negative test checks its own), the stream rule on every
        output, the ``done`` order, the memories' contents and (``counters``) the counters against the
        model."""
        assert not self.early_done, f"done before all of the command's traffic: {self.early_done[:2]}"
        for chk in self.stability.values():
            chk.check()
        if self.host and scoreboards:
            self.addr_sb.check()
        for sb in self.sb.values() if scoreboards else ():
            if sb.name.endswith("evict_req") and not self.evict_idx and not self.n_ereq:
                continue
            if not sb.compared and not sb.expected and not sb.unexpected:
                continue         # a kind of traffic this run did not produce (checked by coverage)
            sb.check()
        model = self.stim.model
        cfg = self.cfg
        bad_d = [a for a in range(cfg.dram_lines) if self.dram.words.get(a, 0) != model.dram.get(a, 0)]
        bad_f = [a for a in range(cfg.flash_lines) if self.flash.words.get(a, 0) != model.flash.get(a, 0)]
        assert not bad_d, f"DRAM content differs from the model at {len(bad_d)} lines, first {bad_d[:4]}"
        assert not bad_f, f"flash content differs from the model at {len(bad_f)} lines, first {bad_f[:4]}"
        if counters:
            got = {n: int(getattr(self.dut, n).value) for n in M.COUNTERS + (M.COUNTERS_HOST if self.host else ())}
            assert got == model.counters, f"counters {got} != model {model.counters}"


@cocotb.test()
async def test_random(dut):
    """Random tracker-like commands with hazards, memory stalls and latency jitter, done and evict_req
    backpressure, idle input cycles; every port's traffic, data and counters against the model."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, host=HOST, **({"p_bypass": 0.06} if HOST else {}))
    # first a read fill into a free frame, so that bin is hit whatever the seed (with few frames, every
    # free frame can otherwise be taken by a write miss or a bypass first: ~1 % of seeds in PARAMS_MIN)
    items = [stim.add(M.Command(stim.queues[0], 0, 0, inserted=1))]
    items += [stim.next() for _ in range(env_int("CXLKV_COMMANDS", 3000) - 1)]
    env = TierEnv(dut, stim, rng, dram_latency=(1, 6), flash_latency=(3, 14), ready_prob=0.75, cmd_idle=0.2,
                  done_ready=0.7, grant_latency=(0, 12), rsp_ready=0.6, wdata_idle=0.2, wdata_late=0.05,
                  ereq_ready=0.6)
    env.expect(items)
    await env.start()
    await env.drive(items)
    await env.drain()
    env.check()
    for name in M.COUNTERS_RTL[2:]:
        assert int(getattr(dut, name).value) == 0, f"{name} = {int(getattr(dut, name).value)}"
    assert int(dut.err_status.value) == 0
    assert int(dut.stall_cycles.value) == env.cmd_stalls > 0
    assert env.ereq_stalls > 0, "coverage: evict_req never waited"
    wait, d, f = int(dut.mem_wait_cycles.value), env.dram.stall_cycles, env.flash.stall_cycles
    assert max(d, f) <= wait <= d + f and wait > 0, (wait, d, f)     # cycles either port waited
    dut._log.info("coverage %s; stall_cycles %d, mem_wait_cycles %d, evict_req waits %d", stim.cover,
                  int(dut.stall_cycles.value), int(dut.mem_wait_cycles.value), env.ereq_stalls)
    missing = [k for k, v in stim.cover.items() if v == 0]
    assert not missing, f"coverage bins not hit: {missing}"
    unstalled = [n for n, chk in env.stability.items() if not chk.checked]
    assert not unstalled, f"coverage: the stream rule was never exercised on {unstalled} (never stalled)"
    dut._log.info("stream rule: %s", {n: (chk.stalled, chk.handshakes) for n, chk in env.stability.items()})
    for k, v in stim.cover.items():
        report_metric(f"tiermover.coverage.{k}", v, "commands", {"commands": len(items)})


@cocotb.test(skip=params().get("frames_per_queue", 3) < 3 or params().get("n_positions", 32) < 16)
async def test_hazards_back_to_back(dut):
    """Directed hazards with slow flash and fast grants: the same frame evicted on consecutive commands
    (dirty by write misses and by the host's grant), a position evicted and at once refilled into
    another frame, a hit on a frame still being filled, all offered back to back. Needs 3 frames per
    queue and 16 positions (skipped in the minimal configuration, whose random test has the same bins)."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, p_grant_dirty=0.0, host=HOST)
    C = M.Command
    q = 0
    items = [stim.add(C(q, s, s, inserted=1)) for s in range(cfg.frames_per_queue)]   # read fills into free frames
    items.append(stim.add(C(q, 10, 0, inserted=1, victim_valid=1, victim=0, write=1)))  # evict clean 0, write miss
    items.append(stim.add(C(q, 11, 0, inserted=1, victim_valid=1, victim=10)))          # evict dirty 10, fill 11
    items.append(stim.add(C(q, 11, 0, hit=1)))                                          # hit on the frame being filled
    items.append(stim.add(C(q, 12, 0, inserted=1, victim_valid=1, victim=11), grant_dirty=True))  # host-dirty
    items.append(stim.add(C(q, 10, 1, inserted=1, victim_valid=1, victim=1)))           # refill 10 (written back)
    items.append(stim.add(C(q, 1, 2, inserted=1, victim_valid=1, victim=2, write=1)))   # 1 again, by a write miss
    items.append(stim.add(C(q, 2, 2, inserted=1, victim_valid=1, victim=1)))            # same frame: 1 out (dirty)
    items.append(stim.add(C(q, 1, 1, inserted=1, victim_valid=1, victim=10)))           # ... and 1 filled at once
    items.append(stim.add(C(q, 12, 0, hit=1, write=1)))
    items.append(stim.add(C(q, 13, 0, inserted=1, victim_valid=1, victim=12)))          # dirty by the hit above
    env = TierEnv(dut, stim, rng, dram_latency=(1, 1), flash_latency=(12, 12), grant_latency=(0, 0))
    env.expect(items)
    await env.start()
    await env.drive(items)
    await env.drain()
    env.check()
    d = [it["res"].done for it in items]
    assert [x["writeback"] for x in d[3:]] == [0, 1, 0, 1, 0, 0, 1, 0, 0, 1]
    assert [x["clean_drop"] for x in d[3:]] == [1, 0, 0, 0, 1, 1, 0, 1, 0, 0]


@cocotb.test()
async def test_protocol_errors(dut):
    """An unexpected grant, a grant for the wrong entry, and a DRAM response nobody asked for are counted
    and latched in err_status (W1C), and lost nowhere: the eviction still completes with the right grant."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, p_grant_dirty=0.0, host=HOST)
    C = M.Command
    items = [stim.add(C(1, 5, 0, inserted=1, write=1)),
             stim.add(C(1, 6, 0, inserted=1, victim_valid=1, victim=5))]
    env = TierEnv(dut, stim, rng, manual_grants=True, ereq_ready=0.5)
    env.expect(items)
    await env.start()
    await env.grant(1, 5)                                  # nothing requested yet
    for _ in range(2):
        await RisingEdge(dut.clk)
    assert int(dut.grant_unexpected.value) == 1 and int(dut.err_status.value) == M.ERR_GRANT_UNEXPECTED
    await env.drive(items)
    for _ in range(1000):                                  # bounded: a lost request must fail, not hang
        if env.ereqs:
            break
        await RisingEdge(dut.clk)
    else:
        raise AssertionError("no evict_req in 1000 cycles")
    await env.grant(1, 7)                                  # the wrong entry: counted, still waiting
    await env.grant(0, 5)
    for _ in range(3):
        await RisingEdge(dut.clk)
    assert int(dut.grant_mismatch.value) == 2
    assert env.done_count == 1, "the eviction must wait for its own grant"
    env.dram.inject.append(0x1234)                         # a DRAM answer with no read pending
    for _ in range(3):
        await RisingEdge(dut.clk)
    assert int(dut.resp_unexpected.value) == 1
    assert int(dut.err_status.value) == M.ERR_GRANT_UNEXPECTED | M.ERR_GRANT_MISMATCH | M.ERR_RESP_UNEXPECTED
    await env.grant(1, 5)
    env.ereqs.clear()
    await env.drain()
    env.check()
    dut.clear_status.value = M.ERR_GRANT_MISMATCH | M.ERR_RESP_UNEXPECTED
    await RisingEdge(dut.clk)
    dut.clear_status.value = 0
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.err_status.value) == M.ERR_GRANT_UNEXPECTED
    assert int(dut.grant_unexpected.value) == 1 and int(dut.grant_mismatch.value) == 2


async def _offer_through_busy(env, item, unstable=False):
    """``item`` offered on ``cmd`` from reset on (``env.start(first=item)``), watched every cycle until
    it is taken: returns (cycles busy, cycles cmd.ready was high while busy). ``unstable``: the bench
    breaks the stream rule while ``cmd`` waits (payload changed in the second busy cycle, valid
    withdrawn in the third), then offers ``item`` again once busy has fallen."""
    dut, cmd = env.dut, env.cmd_port
    await env.start(first=item)
    busy = ready_while_busy = 0
    word = env.cmd_pack.pack(item["cmd"].as_dict())
    for t in range(1000):
        await ReadOnly()
        was_busy = int(dut.busy.value)
        if was_busy:
            busy += 1
            ready_while_busy += int(cmd.ready.value)
        taken = int(cmd.valid.value) and int(cmd.ready.value)
        await RisingEdge(dut.clk)
        if taken:
            cmd.valid.value = 0
            return busy, ready_while_busy
        if unstable and t == 0:
            cmd.payload.value = word ^ 1                 # another command, while the first waits
        elif unstable and t == 1:
            cmd.valid.value = 0                          # withdrawn before it was taken
        elif unstable and not was_busy:
            cmd.payload.value, cmd.valid.value = word, 1
    raise AssertionError(f"cmd not taken in 1000 cycles after reset ({busy} busy)")


@cocotb.test()
async def test_command_offered_while_busy(dut):
    """A command offered from reset on, through the frame table's clearing: cmd.ready stays low while
    busy (one cycle per frame, so nothing is taken into a table still being cleared), the command is
    taken in the first cycle after, and it and the commands behind it run as the model predicts."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, host=HOST)
    items = [stim.add(M.Command(0, 3, 0, inserted=1, **({"host": 1, "line": 0} if HOST else {})))]
    items += [stim.next() for _ in range(40)]
    env = TierEnv(dut, stim, rng)
    env.expect(items)
    busy, ready_while_busy = await _offer_through_busy(env, items[0])
    assert busy == cfg.n_frames, f"busy for {busy} cycles, not one per frame ({cfg.n_frames})"
    assert ready_while_busy == 0, f"cmd.ready high in {ready_while_busy} of the {busy} busy cycles"
    assert env.accepted == 1 and env.first_accept == busy + 1, (env.accepted, env.first_accept)
    await env.drive(items[1:])
    await env.drain()
    env.check()
    assert int(dut.stall_cycles.value) == env.cmd_stalls >= busy     # the busy cycles count as stalls


@cocotb.test()
async def test_stream_rule_check_catches_an_unstable_stream(dut):
    """Negative test of the stream rule checker (tb/common.py StreamStability), here on cmd, which the
    bench drives: while cmd waits for busy to fall, the bench changes its payload, then withdraws it.
    The checker reports exactly those two cycles; the output streams' checkers, the same code, report
    nothing, and the command, offered again, runs as the model predicts."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, host=HOST)
    items = [stim.add(M.Command(0, 3, 0, inserted=1))]
    env = TierEnv(dut, stim, rng)
    env.expect(items)
    cmd_rule = StreamStability("cmd stability")
    cocotb.start_soon(watch_stability(dut.clk, env.cmd_port, cmd_rule, dut.rst))
    await _offer_through_busy(env, items[0], unstable=True)
    await env.drain()
    env.check()
    cmd_rule.assert_caught([0, 1], log=dut._log)          # cmd changed at #0, withdrawn at #1


#: a corruption per scoreboard: one field of one predicted item, by one bit
CORRUPT = {"done": lambda x: {**x, "position": x["position"] ^ 1},
           "evict_req": lambda x: {**x, "position": x["position"] ^ 1},
           "dram_read": lambda a: a ^ 1, "flash_read": lambda a: a ^ 1,
           "dram_write": lambda x: (x[0], x[1] ^ 1), "flash_write": lambda x: (x[0], x[1] ^ 1),
           "host_rsp": lambda x: {**x, "data": x["data"] ^ 1}}


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test, every scoreboard in one run: one predicted item of each is corrupted (the middle
    one: done, evict_req, DRAM reads, DRAM writes' data, flash reads, flash writes' data; with host_ops:
    done, evict_req, a host read's data on host_rsp, and the data of one write to the line written most
    in the per-line scoreboard), and each scoreboard reports exactly its one. Outputs see backpressure.
    Then the end-of-run checks: one line of the model's DRAM, one of its flash and one counter altered
    (one at a time) must each fail check(), naming it."""
    rng = test_rng()
    cfg = config()
    stim = Stimulus(cfg, rng, p_bad=0.0, p_bypass=0.0, host=HOST)
    items = [stim.next() for _ in range(300)]
    env = TierEnv(dut, stim, rng, done_ready=0.7, ereq_ready=0.7, rsp_ready=0.7)
    env.expect(items)
    target = {}
    for name, sb in env.sb.items():
        at = range(len(sb.expected))
        if name == "host_rsp":            # a read: a write's and a bad command's data is 0
            at = [i for i in at if not sb.expected[i]["write"] and not sb.expected[i]["bad"]]
        assert len(at) > 3, f"the run must produce {name} traffic"
        target[name] = at[len(at) // 2]
        sb.expected[target[name]] = CORRUPT[name](sb.expected[target[name]])
    if HOST:
        lines = env.addr_sb.sbs
        key = max(lines, key=lambda k: sum(x[0] == "w" for x in lines[k].expected))
        writes = [i for i, x in enumerate(lines[key].expected) if x[0] == "w"]
        assert len(writes) > 1, "the run must write a line more than once"
        line_at = writes[len(writes) // 2]
        lines[key].expected[line_at] = ("w", lines[key].expected[line_at][1] ^ 1)
    await env.start()
    await env.drive(items)
    await env.drain()
    for name, sb in env.sb.items():
        assert not sb.expected, f"{sb.name}: {len(sb.expected)} predictions never arrived"
        sb.assert_caught_one(target[name], log=dut._log)
    if HOST:
        env.addr_sb.assert_caught_one(key, line_at, dut._log)
    env.check(scoreboards=False)         # and the rest holds: done order, contents, counters

    # the end-of-run comparisons can fail too: the model's DRAM line, flash line and counter
    # altered, one at a time; each must be named, then the run checks clean again
    model = stim.model

    def end_of_run():
        env.check(scoreboards=False)
    for mem, tier in ((model.dram, "DRAM"), (model.flash, "flash")):
        addr = min(mem)
        mem[addr] ^= 1
        must_fail(end_of_run, f"one {tier} line altered", dut._log,
                  match=rf"{tier} content differs from the model at 1 lines, first \[{addr}\]")
        mem[addr] ^= 1
    model.counters["lines_to_dram"] += 1
    must_fail(end_of_run, "one counter altered", dut._log, match=r"counters \{.*\} != model")
    model.counters["lines_to_dram"] -= 1
    end_of_run()


@cocotb.test(skip=not HOST)
async def test_host_hazards(dut):
    """Directed host-op hazards (host_ops only), each made to bite: (a) a host read in the command that fills
    the frame; (b) a read hit held at the host stage (the response buffer full, host_rsp not ready) while the
    next command evicts the frame and fills it, which must wait; (c) a bypass read of a position just written
    back; (d) a bypass write whose data arrives late while the next command fills the same position, whose
    flash reads must wait; a write miss whose host write must follow its own dirty victim's writeback reads
    (grants after 10 cycles); (f) a late bypass write of a resident position (as an errored decision's bypass
    can be) followed by that position's writeback, which must wait. Without rule (b), (d), (f) or the
    own-writeback rule in the RTL the host_rsp and line scoreboards fail."""
    rng = test_rng()
    cfg = config()
    L = cfg.lines_per_entry
    HR = params().get("host_rsp_depth", 4)
    stim = Stimulus(cfg, rng, p_grant_dirty=0.0, host=True)
    C = M.Command
    items = [stim.add(C(0, 0, 0, inserted=1, host=1, line=L - 1)),                     # (a) fill, then read
             stim.add(C(0, 1, 1, inserted=1, write=1, host=1, line=0), wdata_delay=0)]  # write miss + host write
    items += [stim.add(C(0, 1, 1, hit=1, host=1, line=i % L)) for i in range(HR)]       # fill the rsp buffer
    items.append(stim.add(C(0, 0, 0, hit=1, host=1, line=0)))                         # (b) held read of frame 0
    items.append(stim.add(C(0, 5, 0, inserted=1, victim_valid=1, victim=0)))          # ... frame 0: drop, fill 5
    items.append(stim.add(C(0, 1, 1, hit=1, write=1, host=1, line=1), wdata_delay=0))
    items.append(stim.add(C(0, 6, 1, inserted=1, victim_valid=1, victim=1)))          # 1 written back
    items.append(stim.add(C(0, 1, 1, host=1, line=1)))                                # (c) bypass read of 1
    items.append(stim.add(C(0, 7, 1, write=1, host=1, line=2 % L), wdata_delay=150))  # (d) late bypass write
    items.append(stim.add(C(0, 7, 1, inserted=1, victim_valid=1, victim=6)))          # ... fill of 7
    items.append(stim.add(C(0, 7, 1, hit=1, host=1, line=2 % L)))                     # reads the host's data
    items.append(stim.add(C(0, 5, 0, hit=1, write=1, host=1, line=0), wdata_delay=0))  # frame 0 dirty
    items.append(stim.add(C(0, 8, 0, inserted=1, victim_valid=1, victim=5, write=1, host=1, line=0),
                          wdata_delay=0))    # (own writeback) a write miss's host write after its victim's reads
    items.append(stim.add(C(0, 8, 0, write=1, host=1, line=1 % L), wdata_delay=100))  # (f) bypass of resident 8
    items.append(stim.add(C(0, 9, 0, inserted=1, victim_valid=1, victim=8)))          # ... 8 written back after it
    rsp = [it["res"].host_rsp for it in items if it["res"].host_rsp is not None]
    assert rsp[HR + 2]["data"] != items[HR + 3]["res"].dram_writes[0][1]     # (b) is visible in the data
    assert rsp[-4]["data"] == items[-7]["wdata"] and items[-6]["res"].done["fill"]
    assert items[-3]["res"].flash_writes[0][1] == items[-4]["wdata"] and items[-3]["res"].done["writeback"]
    assert items[-2]["res"].done["bypass"] and items[-1]["res"].done["writeback"]
    env = TierEnv(dut, stim, rng, dram_latency=(1, 1), flash_latency=(6, 6), grant_latency=(10, 10), rsp_block=80)
    env.expect(items)
    await env.start()
    await env.drive(items)
    await env.drain()
    env.check()


@cocotb.test()
async def test_throughput(dut):
    """tiermover.commands_per_cycle for one mix at given latencies (a figure, not a goal): commands offered
    back to back, memories and done always ready, grants after a fixed latency."""
    rng = test_rng()
    cfg = config()
    mix = os.environ.get("CXLKV_TM_MIX", "hit")
    dl = env_int("CXLKV_TM_DRAM_LATENCY", 2)
    fl = env_int("CXLKV_TM_FLASH_LATENCY", 8)
    gl = env_int("CXLKV_TM_GRANT_LATENCY", 2)
    n = env_int("CXLKV_TM_COMMANDS", 2000)
    hk = dict(host=True, p_host=1.0) if HOST else {}     # with host_ops: a host op on every command
    if mix == "hit":
        stim = Stimulus(cfg, rng, p_hit=0.9, p_write=0.3, p_bypass=0.0, p_bad=0.0, p_grant_dirty=0.0,
                        p_same_frame=0.0, p_refill=0.0, **hk)
    elif mix == "evict":
        stim = Stimulus(cfg, rng, p_hit=0.0, p_write=0.3, p_bypass=0.0, p_bad=0.0, p_grant_dirty=0.0,
                        p_same_frame=0.0, p_refill=0.0, **hk)
    else:
        raise AssertionError(f"CXLKV_TM_MIX must be hit or evict, not {mix!r}")
    warm = [stim.add(M.Command(q, s, s, inserted=1)) for q in range(cfg.n_queues)
            for s in range(cfg.frames_per_queue)]
    items = warm + [stim.next() for _ in range(n)]
    env = TierEnv(dut, stim, rng, dram_latency=(dl, dl), flash_latency=(fl, fl), grant_latency=(gl, gl))

    env.expect(items)
    await env.start()
    await env.drive(warm)
    await env.drain(len(warm))
    start_done, start_cycle = env.done_count, env.cycle
    await env.drive(items[len(warm):])
    await env.drain()
    env.check()
    cycles = env.last_done_cycle - start_cycle
    measured = env.done_count - start_done
    d = [it["res"].done for it in items[len(warm):]]
    conf = {"mix": mix, "commands": measured, "host_ops": HOST, "hits": sum(x["hit"] for x in d),
            "writebacks": sum(x["writeback"] for x in d), "fills": sum(x["fill"] for x in d),
            "dram_latency": dl, "flash_latency": fl, "grant_latency": gl, "lines_per_entry": cfg.lines_per_entry,
            "depth": params()["depth"], "buf_lines": params()["buf_lines"]}
    value = round(measured / cycles, 4)
    metric = f"tiermover.host_ops_per_cycle.{mix}_heavy" if HOST else f"tiermover.commands_per_cycle.{mix}_heavy"
    dut._log.info("%s = %s (%s)", metric, value, conf)
    report_metric(metric, value, "host ops/cycle" if HOST else "commands/cycle", conf)
