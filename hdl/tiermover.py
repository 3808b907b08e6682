"""Tier mover: moves KV entries between the fast tier (device DRAM frames) and the capacity tier
(flash) as the tracker's decisions command, with the evict permission of the BI-snoop engine.

Golden model (semantics, addresses, counters): :mod:`cxlkv.models.tiermover`.
Documentation: ``docs/tiermover.md``.

Structure. Accepted commands enter a ring of ``depth`` jobs in order; seven pointers walk it, each
at most one job per clock, none overtaking the one it depends on:

* ``a`` accept: the command is checked against the frame table {valid, dirty, position}
  (``lib.memory``, read combinationally, written at the clock edge, so a command per clock
  sees its predecessors), the table is updated, the job is written;
* ``e`` evict request: an evicting job asks ``evict_req`` {queue, position, slot};
* ``w`` writeback reader: takes the job's grant (grants come in request order), waits until every
  earlier job on the same frame has retired, then for a dirty victim issues the frame's DRAM
  reads into the writeback buffer (a clean victim is dropped);
* ``x`` writeback writer (x <= w): writes the buffered lines to the victims' flash entries;
* ``fr`` fill reader (fr <= x): issues the new position's flash reads into the fill buffer, so a
  position written back is read again only after its lines went out;
* ``f`` fill writer (f <= fr): writes the buffered lines into the frame, once the writeback reader
  has issued every DRAM read of that frame for the same job;
* ``r`` retire: a job both writers have passed leaves on ``done``, in command order.

Reads are issued only when the buffer has room for the answer, so responses are always taken
(``*_resp.ready`` = 1) and the two ports cannot deadlock each other. Writes are posted. Each
port is assumed to execute requests in acceptance order (a read returns the data written by
every write accepted before it).
"""
from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.models import tiermover as M


class TierMoverLayouts:
    """Stream payload layouts of a configuration (:class:`cxlkv.models.tiermover.TierMoverConfig`)."""

    def __init__(self, cfg: M.TierMoverConfig):
        self.cfg = cfg
        qb, pb, sb = cfg.queue_bits, cfg.pos_bits, cfg.slot_bits
        self.command = data.StructLayout({"queue": qb, "position": pb, "slot": sb, "hit": 1, "inserted": 1,
                                          "victim_valid": 1, "victim": pb, "write": 1})
        self.done = data.StructLayout({"queue": qb, "position": pb, "slot": sb, "write": 1, "hit": 1, "fill": 1,
                                       "writeback": 1, "clean_drop": 1, "bypass": 1, "bad": 1})
        self.evict_req = data.StructLayout({"queue": qb, "position": pb, "slot": sb})
        self.evict_grant = data.StructLayout({"queue": qb, "position": pb, "dirty_from_host": 1})
        self.dram_req = data.StructLayout({"addr": cfg.dram_addr_bits, "write": 1, "wdata": cfg.line_bits})
        self.flash_req = data.StructLayout({"addr": cfg.flash_addr_bits, "write": 1, "wdata": cfg.line_bits})
        self.frame = data.StructLayout({"valid": 1, "dirty": 1, "position": pb})


class _LineBuffer:
    """A FIFO of lines with room reserved by reads in flight: ``credit`` = free space."""

    def __init__(self, m, name, depth, width):
        self.depth = depth
        self.mem = Memory(shape=width, depth=depth, init=[])
        m.submodules[name] = self.mem
        self.rd = self.mem.read_port(domain="comb")
        self.wr = self.mem.write_port()
        ab = M.bits(depth)
        self.head = Signal(ab, name=f"{name}_head")
        self.tail = Signal(ab, name=f"{name}_tail")
        self.count = Signal(range(depth + 1), name=f"{name}_count")       # lines held
        self.reserved = Signal(range(depth + 1), name=f"{name}_reserved")  # held + reads in flight
        self.push = Signal(name=f"{name}_push")      # an answer arrives
        self.pop = Signal(name=f"{name}_pop")        # the head line is written out
        self.reserve = Signal(name=f"{name}_reserve")  # a read is issued
        self.data_in = Signal(width, name=f"{name}_din")
        m.d.comb += [self.rd.addr.eq(self.head), self.wr.addr.eq(self.tail), self.wr.data.eq(self.data_in),
                     self.wr.en.eq(self.push)]

        def inc(p):
            return Mux(p == depth - 1, 0, p + 1)
        with m.If(self.push):
            m.d.sync += self.tail.eq(inc(self.tail))
        with m.If(self.pop):
            m.d.sync += self.head.eq(inc(self.head))
        m.d.sync += [self.count.eq(self.count + self.push - self.pop),
                     self.reserved.eq(self.reserved + self.reserve - self.pop)]

    @property
    def nonempty(self):
        return self.count != 0

    @property
    def room(self):
        return self.reserved != self.depth

    @property
    def data(self):
        return self.rd.data


class TierMover(wiring.Component):
    """See the module docstring and docs/tiermover.md.

    Parameters: ``n_queues``, ``n_positions`` (power of two), ``frames_per_queue`` (C),
    ``lines_per_entry``, ``line_bits``, ``depth`` (jobs in flight, power of two >= 2),
    ``buf_lines`` (line buffer of each engine; default ``lines_per_entry``), ``counter_width``.
    """

    def __init__(self, n_queues=4, n_positions=64, frames_per_queue=4, lines_per_entry=8, line_bits=512,
                 depth=8, buf_lines=None, counter_width=32):
        buf_lines = lines_per_entry if buf_lines is None else buf_lines
        try:
            self.cfg = cfg = M.TierMoverConfig(n_queues, n_positions, frames_per_queue, lines_per_entry, line_bits)
            if depth < 2 or depth & (depth - 1):
                raise M.TierMoverConfigError(f"tier mover: depth must be a power of two >= 2, got {depth}")
            if buf_lines < 1:
                raise M.TierMoverConfigError(f"tier mover: buf_lines must be >= 1, got {buf_lines}")
        except M.TierMoverConfigError:
            self._MustUse__silence = True        # never built: no unused-elaboratable warning
            raise
        self.depth, self.buf_lines, self.counter_width = depth, buf_lines, counter_width
        self.lay = lay = TierMoverLayouts(cfg)
        members = {
            "cmd": In(stream.Signature(lay.command)),
            "done": Out(stream.Signature(lay.done)),
            "evict_req": Out(stream.Signature(lay.evict_req)),
            "evict_grant": In(stream.Signature(lay.evict_grant)),
            "dram_req": Out(stream.Signature(lay.dram_req)),
            "dram_resp": In(stream.Signature(line_bits)),
            "flash_req": Out(stream.Signature(lay.flash_req)),
            "flash_resp": In(stream.Signature(line_bits)),
            "busy": Out(1),                 # clearing the frame table after reset
            "idle": Out(1),                 # no job in flight
            "clear_status": In(3),          # write-one-to-clear pulse for err_status
            "err_status": Out(3),           # sticky: grant unexpected / grant mismatch / response unexpected
        }
        for name in M.COUNTERS + M.COUNTERS_RTL:
            members[name] = Out(counter_width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg, lay, D, L = self.cfg, self.lay, self.depth, self.cfg.lines_per_entry
        F, N = cfg.frames_per_queue, cfg.n_positions
        ib = M.bits(D)               # ring index bits
        pw = ib + 1                  # pointer bits (one more: full/empty)

        def count(name, cond):
            ctr = getattr(self, name)
            with m.If(cond):
                m.d.sync += ctr.eq(ctr + 1)

        # ---- frame table, cleared after reset (one frame per clock)
        ftab = Memory(shape=lay.frame, depth=cfg.n_frames, init=[])
        m.submodules.frames = ftab
        frd = ftab.read_port(domain="comb")
        fwr = ftab.write_port()
        clear_idx = Signal(range(cfg.n_frames + 1))
        clearing = Signal()
        m.d.comb += [clearing.eq(clear_idx != cfg.n_frames), self.busy.eq(clearing)]
        with m.If(clearing):
            m.d.sync += clear_idx.eq(clear_idx + 1)

        # ---- the job ring
        a, e, w, x, fr, f, r = (Signal(pw, name=n) for n in
                                ("ptr_a", "ptr_e", "ptr_w", "ptr_x", "ptr_fr", "ptr_f", "ptr_r"))

        def ring(name, width):
            return Array(Signal(width, name=f"job{i}_{name}") for i in range(D))
        j_q, j_p, j_s, j_v = ring("queue", cfg.queue_bits), ring("pos", cfg.pos_bits), \
            ring("slot", cfg.slot_bits), ring("victim", cfg.pos_bits)
        j_write, j_hit, j_bypass, j_bad = ring("write", 1), ring("hit", 1), ring("bypass", 1), ring("bad", 1)
        j_evict, j_fill, j_vdirty = ring("evict", 1), ring("fill", 1), ring("vdirty", 1)
        j_wb, j_drop, j_rdone = ring("writeback", 1), ring("clean_drop", 1), ring("reads_done", 1)

        def idx(p):
            return p[:ib]

        # Each of the four copy engines (writeback reader/writer, fill reader/writer) walks an
        # entry's L lines for one job at a time: ``busy`` while walking, ``i`` the next line,
        # ``base`` the entry's first line address; its pointer moves to the next job after line L-1.
        def walk_begin(busy, i, base, addr):
            return [busy.eq(1), i.eq(0), base.eq(addr)]

        def walk_next(ready, needed, ptr, busy, i, base, addr):
            """Idle at job ``ptr`` (``ready``): walk its lines if ``needed``, else pass over it."""
            with m.If(~busy & ready):
                with m.If(needed):
                    m.d.sync += walk_begin(busy, i, base, addr)
                with m.Else():
                    m.d.sync += ptr.eq(ptr + 1)

        def walk_step(go, busy, i, ptr, *at_end):
            """One line per ``go``; after line L-1 the walk ends (with ``at_end``), ``ptr`` moves on."""
            with m.If(go):
                m.d.sync += i.eq(i + 1)
                with m.If(i == L - 1):
                    m.d.sync += [busy.eq(0), ptr.eq(ptr + 1), *at_end]

        # ---- accept
        c = self.cmd.payload
        q_ok = Signal()
        s_ok = Signal()
        m.d.comb += [q_ok.eq(c.queue < cfg.n_queues), s_ok.eq(c.slot < F)]
        frame_no = Signal(range(cfg.n_frames))
        m.d.comb += frame_no.eq(Mux(q_ok & s_ok, c.queue * F + c.slot, 0))
        fst = lay.frame(frd.data)
        m.d.comb += frd.addr.eq(frame_no)
        bad = Signal()
        with m.If(~q_ok | ~s_ok):
            m.d.comb += bad.eq(1)
        with m.Elif(c.hit):
            m.d.comb += bad.eq(c.inserted | c.victim_valid | ~fst.valid | (fst.position != c.position))
        with m.Elif(~c.inserted):
            m.d.comb += bad.eq(c.victim_valid)
        with m.Elif(c.victim_valid):
            m.d.comb += bad.eq((c.victim == c.position) | ~fst.valid | (fst.position != c.victim))
        with m.Else():
            m.d.comb += bad.eq(fst.valid)
        full = Signal()
        m.d.comb += [full.eq((a - r)[:pw] == D), self.cmd.ready.eq(~clearing & ~full)]
        take = Signal()
        m.d.comb += take.eq(self.cmd.valid & self.cmd.ready)
        count("stall_cycles", self.cmd.valid & ~self.cmd.ready)
        ia = idx(a)
        ins = c.inserted & ~c.hit
        with m.If(take):
            m.d.sync += [
                a.eq(a + 1),
                j_q[ia].eq(c.queue), j_p[ia].eq(c.position), j_s[ia].eq(c.slot), j_v[ia].eq(c.victim),
                j_write[ia].eq(c.write), j_bad[ia].eq(bad), j_hit[ia].eq(~bad & c.hit),
                j_bypass[ia].eq(~bad & ~c.hit & ~c.inserted),
                j_evict[ia].eq(~bad & ins & c.victim_valid), j_fill[ia].eq(~bad & ins & ~c.write),
                j_vdirty[ia].eq(fst.dirty), j_wb[ia].eq(0), j_drop[ia].eq(0), j_rdone[ia].eq(0),
            ]
        count("commands", take)
        count("bad_commands", take & bad)
        count("hits", take & ~bad & c.hit)
        count("bypasses", take & ~bad & ~c.hit & ~c.inserted)
        new_fr = Signal(lay.frame)
        m.d.comb += [new_fr.valid.eq(1), new_fr.position.eq(c.position),
                     new_fr.dirty.eq(Mux(c.hit, fst.dirty | c.write, c.write))]
        with m.If(clearing):
            m.d.comb += [fwr.addr.eq(clear_idx), fwr.data.eq(0), fwr.en.eq(1)]
        with m.Else():
            m.d.comb += [fwr.addr.eq(frame_no), fwr.data.eq(new_fr),
                         fwr.en.eq(take & ~bad & (c.hit | c.inserted))]

        # ---- evict requests, in job order
        ie = idx(e)
        n_out = Signal(range(D + 1))            # requests sent, grant not yet taken
        req_fire = Signal()
        grant_take = Signal()
        m.d.comb += [self.evict_req.payload.queue.eq(j_q[ie]), self.evict_req.payload.position.eq(j_v[ie]),
                     self.evict_req.payload.slot.eq(j_s[ie])]
        with m.If(e != a):
            with m.If(j_evict[ie]):
                m.d.comb += self.evict_req.valid.eq(1)
                with m.If(self.evict_req.ready):
                    m.d.comb += req_fire.eq(1)
                    m.d.sync += e.eq(e + 1)
            with m.Else():
                m.d.sync += e.eq(e + 1)
        m.d.sync += n_out.eq(n_out + req_fire - grant_take)

        # ---- line buffers and port arbitration
        wbuf = _LineBuffer(m, "wbbuf", self.buf_lines, cfg.line_bits)
        fbuf = _LineBuffer(m, "fillbuf", self.buf_lines, cfg.line_bits)
        wb_pend = Signal(range(self.buf_lines + 1))       # DRAM reads awaiting their answer
        fl_pend = Signal(range(self.buf_lines + 1))       # flash reads awaiting their answer

        # requesters (valid + address); the arbiters below pick one per port
        wb_rd_v, fl_wr_v = Signal(), Signal()             # DRAM: writeback reads, fill writes
        wb_wr_v, fl_rd_v = Signal(), Signal()             # flash: writeback writes, fill reads
        wb_rd_addr = Signal(cfg.dram_addr_bits)
        fl_wr_addr = Signal(cfg.dram_addr_bits)
        wb_wr_addr = Signal(cfg.flash_addr_bits)
        fl_rd_addr = Signal(cfg.flash_addr_bits)
        # arbitration is held while an offered request waits, so a payload never changes under valid
        dram_lock, dram_sel = Signal(), Signal()          # sel 1: fill write
        flash_lock, flash_sel = Signal(), Signal()        # sel 1: writeback write
        dsel = Mux(dram_lock, dram_sel, fl_wr_v)
        fsel = Mux(flash_lock, flash_sel, wb_wr_v)
        m.d.comb += [
            self.dram_req.valid.eq(Mux(dsel, fl_wr_v, wb_rd_v)),
            self.dram_req.payload.write.eq(dsel),
            self.dram_req.payload.addr.eq(Mux(dsel, fl_wr_addr, wb_rd_addr)),
            self.dram_req.payload.wdata.eq(Mux(dsel, fbuf.data, 0)),
            self.flash_req.valid.eq(Mux(fsel, wb_wr_v, fl_rd_v)),
            self.flash_req.payload.write.eq(fsel),
            self.flash_req.payload.addr.eq(Mux(fsel, wb_wr_addr, fl_rd_addr)),
            self.flash_req.payload.wdata.eq(Mux(fsel, wbuf.data, 0)),
        ]
        m.d.sync += [dram_lock.eq(self.dram_req.valid & ~self.dram_req.ready), dram_sel.eq(dsel),
                     flash_lock.eq(self.flash_req.valid & ~self.flash_req.ready), flash_sel.eq(fsel)]
        dram_fire = self.dram_req.valid & self.dram_req.ready
        flash_fire = self.flash_req.valid & self.flash_req.ready
        wb_rd_go = Signal()
        fl_wr_go = Signal()
        wb_wr_go = Signal()
        fl_rd_go = Signal()
        m.d.comb += [wb_rd_go.eq(dram_fire & ~dsel), fl_wr_go.eq(dram_fire & dsel),
                     wb_wr_go.eq(flash_fire & fsel), fl_rd_go.eq(flash_fire & ~fsel)]
        count("mem_wait_cycles", (self.dram_req.valid & ~self.dram_req.ready)
              | (self.flash_req.valid & ~self.flash_req.ready))

        # responses: always taken; one with no read pending is a protocol error (counted, dropped)
        m.d.comb += [self.dram_resp.ready.eq(1), self.flash_resp.ready.eq(1)]
        dresp = self.dram_resp.valid
        fresp = self.flash_resp.valid
        d_ok = dresp & (wb_pend != 0)
        f_ok = fresp & (fl_pend != 0)
        m.d.comb += [wbuf.push.eq(d_ok), wbuf.data_in.eq(self.dram_resp.payload), wbuf.reserve.eq(wb_rd_go),
                     wbuf.pop.eq(wb_wr_go),
                     fbuf.push.eq(f_ok), fbuf.data_in.eq(self.flash_resp.payload), fbuf.reserve.eq(fl_rd_go),
                     fbuf.pop.eq(fl_wr_go)]
        m.d.sync += [wb_pend.eq(wb_pend + wb_rd_go - d_ok), fl_pend.eq(fl_pend + fl_rd_go - f_ok)]
        resp_bad = (dresp & (wb_pend == 0)) | (fresp & (fl_pend == 0))
        count("resp_unexpected", resp_bad)

        # ---- writeback engine (pointer w)
        iw = idx(w)
        wb_busy = Signal()                   # copying the victim of job w
        wb_rd_i = Signal(range(L + 1))
        wb_wr_i = Signal(range(L + 1))
        wb_dbase = Signal(cfg.dram_addr_bits)
        wb_fbase = Signal(cfg.flash_addr_bits)
        g = self.evict_grant.payload
        wb_dirty_r = Signal()
        # frame hazard: an earlier job on the same frame that writes it and has not left on ``done``:
        # a fill (it may still be writing the frame) or a write command (the host's data lands after
        # its done). Read hits, bypasses and bad commands do not hold an eviction back.
        rw = (w - r)[:pw]
        haz = Signal()
        hz = []
        for i in range(D):
            off = (Const(i, ib) - r[:ib])[:ib]
            writes_frame = j_fill[i] | (j_write[i] & ~j_bad[i] & ~j_bypass[i])
            hz.append((off < rw) & writes_frame & (j_q[i] == j_q[iw]) & (j_s[i] == j_s[iw]))
        m.d.comb += haz.eq(Cat(*hz).any())
        wb_dirty = j_vdirty[iw] | g.dirty_from_host
        with m.If(~wb_busy & (w != e)):
            with m.If(~j_evict[iw]):
                m.d.sync += [j_rdone[iw].eq(1), w.eq(w + 1)]
            with m.Else():
                m.d.comb += self.evict_grant.ready.eq(1)
                with m.If(self.evict_grant.valid):
                    with m.If((g.queue == j_q[iw]) & (g.position == j_v[iw])):
                        m.d.comb += grant_take.eq(1)
                        m.d.sync += [*walk_begin(wb_busy, wb_rd_i, wb_dbase, (j_q[iw] * F + j_s[iw]) * L),
                                     wb_dirty_r.eq(wb_dirty), j_wb[iw].eq(wb_dirty), j_drop[iw].eq(~wb_dirty)]
                    with m.Else():
                        count("grant_mismatch", 1)
        with m.If(n_out == 0):
            m.d.comb += self.evict_grant.ready.eq(1)
            count("grant_unexpected", self.evict_grant.valid)
        with m.If(wb_busy & ~wb_dirty_r & ~haz):        # a clean victim: dropped once the frame is free
            m.d.sync += [j_rdone[iw].eq(1), wb_busy.eq(0), w.eq(w + 1)]
        m.d.comb += [wb_rd_v.eq(wb_busy & wb_dirty_r & ~haz & wbuf.room),
                     wb_rd_addr.eq(wb_dbase + wb_rd_i)]
        walk_step(wb_rd_go, wb_busy, wb_rd_i, w, j_rdone[iw].eq(1))   # every DRAM read issued: the reader moves on

        # writeback writer (pointer x <= w): the buffered lines, in job order, to the victims' entries
        ix = idx(x)
        x_busy = Signal()
        victim_entry = (j_q[ix] * N + j_v[ix]) * L
        walk_next(x != w, j_wb[ix], x, x_busy, wb_wr_i, wb_fbase, victim_entry)
        with m.If(~x_busy & (x == w) & wb_busy & wb_dirty_r):        # start beside the reader
            m.d.sync += walk_begin(x_busy, wb_wr_i, wb_fbase, victim_entry)
        m.d.comb += [wb_wr_v.eq(x_busy & wbuf.nonempty), wb_wr_addr.eq(wb_fbase + wb_wr_i)]
        walk_step(wb_wr_go, x_busy, wb_wr_i, x)
        count("writebacks", grant_take & wb_dirty)
        count("clean_drops", grant_take & ~wb_dirty)
        count("lines_to_flash", wb_wr_go)

        # ---- fill reader (pointer fr): flash reads of the new positions, in job order, into the buffer.
        # fr <= x: every earlier job's writeback has issued its flash writes (a position written back
        # is read again only after its lines went out).
        jr = idx(fr)
        fr_ok = (x - fr)[:pw] <= D
        fr_busy = Signal()
        fl_rd_i = Signal(range(L + 1))
        fl_fbase = Signal(cfg.flash_addr_bits)
        walk_next((fr != a) & fr_ok, j_fill[jr], fr, fr_busy, fl_rd_i, fl_fbase, (j_q[jr] * N + j_p[jr]) * L)
        m.d.comb += [fl_rd_v.eq(fr_busy & fbuf.room), fl_rd_addr.eq(fl_fbase + fl_rd_i)]
        walk_step(fl_rd_go, fr_busy, fl_rd_i, fr)

        # ---- fill writer (pointer f <= fr): the buffered lines into the frame, once the writeback of
        # the same job has issued every DRAM read of it
        jf = idx(f)
        fl_busy = Signal()
        fl_wr_i = Signal(range(L + 1))
        fl_dbase = Signal(cfg.dram_addr_bits)
        walk_next((f != fr) | fr_busy, j_fill[jf], f, fl_busy, fl_wr_i, fl_dbase, (j_q[jf] * F + j_s[jf]) * L)
        m.d.comb += [fl_wr_v.eq(fl_busy & fbuf.nonempty & j_rdone[jf]),
                     fl_wr_addr.eq(fl_dbase + fl_wr_i)]
        walk_step(fl_wr_go, fl_busy, fl_wr_i, f)
        count("fills", fl_wr_go & (fl_wr_i == L - 1))
        count("lines_to_dram", fl_wr_go)

        # ---- retire, in order
        ir = idx(r)
        dn = self.done.payload
        m.d.comb += [
            self.done.valid.eq((r != a) & (r != x) & (r != f)),
            dn.queue.eq(j_q[ir]), dn.position.eq(j_p[ir]), dn.slot.eq(j_s[ir]), dn.write.eq(j_write[ir]),
            dn.hit.eq(j_hit[ir]), dn.fill.eq(j_fill[ir]), dn.writeback.eq(j_wb[ir]),
            dn.clean_drop.eq(j_drop[ir]), dn.bypass.eq(j_bypass[ir]), dn.bad.eq(j_bad[ir]),
            self.idle.eq((r == a) & ~clearing),
        ]
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += r.eq(r + 1)

        # ---- sticky status
        err_now = Cat(self.evict_grant.valid & (n_out == 0),
                      self.evict_grant.valid & self.evict_grant.ready & (n_out != 0) & ~grant_take,
                      resp_bad)
        m.d.sync += self.err_status.eq((self.err_status & ~self.clear_status) | err_now)
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks: the bench's small one and
    a full-width one (640 queues, 64 frames per queue, 8 lines of 512 bits per entry)."""
    return {"tiermover": lambda: TierMover(n_queues=3, n_positions=32, frames_per_queue=3, lines_per_entry=4,
                                           line_bits=32, depth=8, buf_lines=4),
            "tiermover_full": lambda: TierMover(n_queues=640, n_positions=131072, frames_per_queue=64,
                                                lines_per_entry=8, line_bits=512, depth=8)}
