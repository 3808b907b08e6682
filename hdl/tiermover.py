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

With ``host_ops`` a command may carry one host line op (``cmd.host``, ``cmd.line``; the
direction is ``cmd.write``), served by an eighth pointer between the fill writer and retire:

* ``h`` host stage (h <= f): after the command's own moves, a read or write of the line in the
  DRAM frame (resident) or in flash (bypass); a write takes its data from ``host_wdata``; a read
  is issued only when the ``host_rsp`` buffer has a slot for its answer; a bad command's op
  answers ``bad`` without an access (its data is taken and dropped). ``done`` leaves after it.

Each port then has two readers; a tag FIFO per port records who issued each outstanding read
(responses come back in request order). Further ordering rules: the writeback reader also waits
for every earlier job with a host op on the frame; the fill reader waits while an earlier job's
bypass host write of the same position has not been issued (docs/tiermover.md, "Hazards").
"""
from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import refusals, require_bool, require_int
from cxlkv.models import tiermover as M


class TierMoverLayouts:
    """Stream payload layouts of a configuration (:class:`cxlkv.models.tiermover.TierMoverConfig`)."""

    def __init__(self, cfg: M.TierMoverConfig, host_ops: bool = False):
        self.cfg = cfg
        qb, pb, sb = cfg.queue_bits, cfg.pos_bits, cfg.slot_bits
        cmd = {"queue": qb, "position": pb, "slot": sb, "hit": 1, "inserted": 1, "victim_valid": 1, "victim": pb,
               "write": 1}
        if host_ops:                   # appended: the host line op of the command (direction: write)
            cmd.update({"host": 1, "line": cfg.line_idx_bits})
        self.command = data.StructLayout(cmd)
        self.host_rsp = data.StructLayout({"data": cfg.line_bits, "write": 1, "resident": 1, "bad": 1})
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
    ``buf_lines`` (line buffer of each engine, >= 1; default ``lines_per_entry``), ``counter_width``
    (>= 1), ``host_ops`` (a bool: host line operations, ``cmd.host``/``cmd.line``, ``host_wdata``,
    ``host_rsp``), ``host_rsp_depth`` (with ``host_ops``: the response buffer, host ops answered but
    not yet taken, a power of two >= 2). Every count is an int (not a bool); a value the block cannot
    build raises :class:`cxlkv.models.tiermover.TierMoverConfigError` naming it.

    ``max_reads``: the most reads the mover keeps outstanding on each port (a memory model behind a
    port needs room for that many answers): ``buf_lines``, plus ``host_rsp_depth`` with ``host_ops``.
    """

    def __init__(self, n_queues=4, n_positions=64, frames_per_queue=4, lines_per_entry=8, line_bits=512,
                 depth=8, buf_lines=None, counter_width=32, host_ops=False, host_rsp_depth=4):
        buf_lines = lines_per_entry if buf_lines is None else buf_lines
        err = M.TierMoverConfigError
        with refusals(self):
            self.cfg = cfg = M.TierMoverConfig(n_queues, n_positions, frames_per_queue, lines_per_entry, line_bits)
            if require_int(self, "depth", depth, 2, error=err) & (depth - 1):
                raise err(f"TierMover: depth must be a power of two >= 2, got {depth}")
            require_int(self, "buf_lines", buf_lines, 1, error=err)
            require_int(self, "counter_width", counter_width, 1, error=err)
            require_bool(self, "host_ops", host_ops, error=err)
            if host_ops and require_int(self, "host_rsp_depth", host_rsp_depth, 2, error=err) & (host_rsp_depth - 1):
                raise err(f"TierMover: host_rsp_depth must be a power of two >= 2, got {host_rsp_depth}")
        self.depth, self.buf_lines, self.counter_width = depth, buf_lines, counter_width
        self.host_ops = host_ops
        self.host_rsp_depth = host_rsp_depth if self.host_ops else 0
        self.max_reads = buf_lines + self.host_rsp_depth
        self.lay = lay = TierMoverLayouts(cfg, self.host_ops)
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
        if self.host_ops:
            members["host_wdata"] = In(stream.Signature(line_bits))     # a host write's data, in command order
            members["host_rsp"] = Out(stream.Signature(lay.host_rsp))   # one per host op, in command order
        for name in M.COUNTERS + M.COUNTERS_RTL + (M.COUNTERS_HOST if self.host_ops else ()):
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
        H = self.host_ops
        if H:
            h = Signal(pw, name="ptr_h")                  # host stage (h <= f)
            j_host, j_line = ring("host", 1), ring("line", cfg.line_idx_bits)

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
        if H:
            with m.If(c.host & (c.line >= L)):           # a host line outside the entry: the command is bad
                m.d.comb += bad.eq(1)
        full = Signal()
        m.d.comb += [full.eq((a - r)[:pw] == D), self.cmd.ready.eq(~clearing & ~full)]
        take = Signal()
        m.d.comb += take.eq(self.cmd.valid & self.cmd.ready)
        count("stall_cycles", self.cmd.valid & ~self.cmd.ready)
        ia = idx(a)
        ins = c.inserted & ~c.hit
        # a write miss carrying a host line op fills first: the host writes one line, the others must be
        # the entry's (without host ops the write-miss rule: the host writes the whole entry)
        host_fill = c.host if H else Const(0, 1)
        with m.If(take):
            m.d.sync += [
                a.eq(a + 1),
                j_q[ia].eq(c.queue), j_p[ia].eq(c.position), j_s[ia].eq(c.slot), j_v[ia].eq(c.victim),
                j_write[ia].eq(c.write), j_bad[ia].eq(bad), j_hit[ia].eq(~bad & c.hit),
                j_bypass[ia].eq(~bad & ~c.hit & ~c.inserted),
                j_evict[ia].eq(~bad & ins & c.victim_valid), j_fill[ia].eq(~bad & ins & (~c.write | host_fill)),
                j_vdirty[ia].eq(fst.dirty), j_wb[ia].eq(0), j_drop[ia].eq(0), j_rdone[ia].eq(0),
            ]
            if H:
                m.d.sync += [j_host[ia].eq(c.host), j_line[ia].eq(c.line)]
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
        if not self.host_ops:
            wb_pend = Signal(range(self.buf_lines + 1))   # DRAM reads awaiting their answer
            fl_pend = Signal(range(self.buf_lines + 1))   # flash reads awaiting their answer

        # requesters (valid + address); the arbiters below pick one per port
        wb_rd_v, fl_wr_v = Signal(name="wb_rd_v"), Signal(name="fl_wr_v")  # DRAM: writeback reads, fill writes
        wb_wr_v, fl_rd_v = Signal(name="wb_wr_v"), Signal(name="fl_rd_v")  # flash: writeback writes, fill reads
        wb_rd_addr = Signal(cfg.dram_addr_bits)
        fl_wr_addr = Signal(cfg.dram_addr_bits)
        wb_wr_addr = Signal(cfg.flash_addr_bits)
        fl_rd_addr = Signal(cfg.flash_addr_bits)
        if H:
            # the host stage's requests (driven below); a write's data comes straight from host_wdata
            hd_v, hf_v = Signal(name="hd_v"), Signal(name="hf_v")
            hd_addr = Signal(cfg.dram_addr_bits)
            hf_addr = Signal(cfg.flash_addr_bits)
            h_wr = Signal()
        # arbitration is held while an offered request waits, so a payload never changes under valid
        if not H:
            dram_lock, dram_sel = Signal(name="dram_lock"), Signal(name="dram_sel")  # sel 1: fill write
            flash_lock, flash_sel = Signal(name="flash_lock"), Signal(name="flash_sel")  # sel 1: writeback write
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
        else:
            # three requesters per port; priority: the buffer's writes, the host op, the engine's reads
            # DRAM sel: 0 writeback read, 1 fill write, 2 host; flash sel: 0 fill read, 1 writeback write, 2 host
            dram_lock, flash_lock = Signal(name="dram_lock"), Signal(name="flash_lock")
            dram_sel, flash_sel = Signal(2, name="dram_sel"), Signal(2, name="flash_sel")
            dsel, fsel = Signal(2, name="dsel"), Signal(2, name="fsel")
            m.d.comb += [
                dsel.eq(Mux(dram_lock, dram_sel, Mux(fl_wr_v, 1, Mux(hd_v, 2, 0)))),
                fsel.eq(Mux(flash_lock, flash_sel, Mux(wb_wr_v, 1, Mux(hf_v, 2, 0)))),
                self.dram_req.valid.eq(Mux(dsel == 1, fl_wr_v, Mux(dsel == 2, hd_v, wb_rd_v))),
                self.dram_req.payload.write.eq(Mux(dsel == 2, h_wr, dsel == 1)),
                self.dram_req.payload.addr.eq(Mux(dsel == 1, fl_wr_addr, Mux(dsel == 2, hd_addr, wb_rd_addr))),
                self.dram_req.payload.wdata.eq(Mux(dsel == 1, fbuf.data,
                                                   Mux((dsel == 2) & h_wr, self.host_wdata.payload, 0))),
                self.flash_req.valid.eq(Mux(fsel == 1, wb_wr_v, Mux(fsel == 2, hf_v, fl_rd_v))),
                self.flash_req.payload.write.eq(Mux(fsel == 2, h_wr, fsel == 1)),
                self.flash_req.payload.addr.eq(Mux(fsel == 1, wb_wr_addr, Mux(fsel == 2, hf_addr, fl_rd_addr))),
                self.flash_req.payload.wdata.eq(Mux(fsel == 1, wbuf.data,
                                                    Mux((fsel == 2) & h_wr, self.host_wdata.payload, 0))),
            ]
            m.d.sync += [dram_lock.eq(self.dram_req.valid & ~self.dram_req.ready), dram_sel.eq(dsel),
                         flash_lock.eq(self.flash_req.valid & ~self.flash_req.ready), flash_sel.eq(fsel)]
        dram_fire = self.dram_req.valid & self.dram_req.ready
        flash_fire = self.flash_req.valid & self.flash_req.ready
        wb_rd_go = Signal()
        fl_wr_go = Signal()
        wb_wr_go = Signal()
        fl_rd_go = Signal()
        if not H:
            m.d.comb += [wb_rd_go.eq(dram_fire & ~dsel), fl_wr_go.eq(dram_fire & dsel),
                         wb_wr_go.eq(flash_fire & fsel), fl_rd_go.eq(flash_fire & ~fsel)]
        else:
            hd_go, hf_go = Signal(name="hd_go"), Signal(name="hf_go")
            m.d.comb += [wb_rd_go.eq(dram_fire & (dsel == 0)), fl_wr_go.eq(dram_fire & (dsel == 1)),
                         hd_go.eq(dram_fire & (dsel == 2)),
                         wb_wr_go.eq(flash_fire & (fsel == 1)), fl_rd_go.eq(flash_fire & (fsel == 0)),
                         hf_go.eq(flash_fire & (fsel == 2))]
        count("mem_wait_cycles", (self.dram_req.valid & ~self.dram_req.ready)
              | (self.flash_req.valid & ~self.flash_req.ready))

        # responses: always taken; one with no read pending is a protocol error (counted, dropped)
        m.d.comb += [self.dram_resp.ready.eq(1), self.flash_resp.ready.eq(1)]
        dresp = self.dram_resp.valid
        fresp = self.flash_resp.valid
        if not H:
            d_ok = dresp & (wb_pend != 0)
            f_ok = fresp & (fl_pend != 0)
        else:
            # each port has two readers: a FIFO of tags {host, response slot} per outstanding read,
            # in request order, routes each answer (the port answers in request order)
            HR = self.host_rsp_depth
            rb = M.bits(HR)
            TD = 1 << M.bits(self.max_reads)
            tb_ = M.bits(TD)

            def tag_fifo(name, push, push_host, push_slot, pop):
                t_host = Array(Signal(name=f"{name}_tag{i}_host") for i in range(TD))
                t_slot = Array(Signal(rb, name=f"{name}_tag{i}_slot") for i in range(TD))
                head = Signal(tb_ + 1, name=f"{name}_tag_head")
                tail = Signal(tb_ + 1, name=f"{name}_tag_tail")
                nonempty = Signal(name=f"{name}_tag_nonempty")
                m.d.comb += nonempty.eq(head != tail)
                with m.If(push):
                    m.d.sync += [t_host[tail[:tb_]].eq(push_host), t_slot[tail[:tb_]].eq(push_slot),
                                 tail.eq(tail + 1)]
                with m.If(pop & nonempty):
                    m.d.sync += head.eq(head + 1)
                return nonempty, t_host[head[:tb_]], t_slot[head[:tb_]]

            rsp_tail = Signal(rb + 1)
            d_tag_v, d_tag_host, d_tag_slot = tag_fifo("dram", wb_rd_go | (hd_go & ~h_wr), hd_go, rsp_tail[:rb],
                                                        dresp)
            f_tag_v, f_tag_host, f_tag_slot = tag_fifo("flash", fl_rd_go | (hf_go & ~h_wr), hf_go, rsp_tail[:rb],
                                                        fresp)
            d_ok = dresp & d_tag_v & ~d_tag_host
            f_ok = fresp & f_tag_v & ~f_tag_host
            d_host = dresp & d_tag_v & d_tag_host             # a host read's answer
            f_host = fresp & f_tag_v & f_tag_host
            resp_bad = (dresp & ~d_tag_v) | (fresp & ~f_tag_v)
        m.d.comb += [wbuf.push.eq(d_ok), wbuf.data_in.eq(self.dram_resp.payload), wbuf.reserve.eq(wb_rd_go),
                     wbuf.pop.eq(wb_wr_go),
                     fbuf.push.eq(f_ok), fbuf.data_in.eq(self.flash_resp.payload), fbuf.reserve.eq(fl_rd_go),
                     fbuf.pop.eq(fl_wr_go)]
        if not H:
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
        # its done). Read hits, bypasses and bad commands do not hold an eviction back. With host_ops:
        # also an earlier job with a host op on the frame (reads included: it must see the old occupant).
        rw = (w - r)[:pw]
        haz = Signal()
        hz = []
        for i in range(D):
            off = (Const(i, ib) - r[:ib])[:ib]
            writes_frame = j_fill[i] | (j_write[i] & ~j_bad[i] & ~j_bypass[i])
            if not H:
                hz.append((off < rw) & writes_frame & (j_q[i] == j_q[iw]) & (j_s[i] == j_s[iw]))
                continue
            writes_frame = writes_frame | (j_host[i] & ~j_bad[i] & ~j_bypass[i])
            # and a bypass host op on the victim's position (a bypass of a resident position, as an
            # errored decision can be): the victim's flash lines are written after it
            same_q = j_q[i] == j_q[iw]
            hz.append((off < rw) & same_q & ((writes_frame & (j_s[i] == j_s[iw]))
                                             | (j_host[i] & j_bypass[i] & (j_p[i] == j_v[iw]))))
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
        if H:
            # a bypass host write of the same position by an earlier job not yet issued (h <= job < fr):
            # the fill must read flash after it (the in-order flash port then returns the host's data)
            fhz = []
            hfr = (fr - h)[:pw]
            for i in range(D):
                off = (Const(i, ib) - h[:ib])[:ib]
                fhz.append((off < hfr) & j_host[i] & j_write[i] & j_bypass[i]
                           & (j_q[i] == j_q[jr]) & (j_p[i] == j_p[jr]))
            fill_haz = Signal()
            m.d.comb += fill_haz.eq(Cat(*fhz).any())
            fr_ok = fr_ok & ~fill_haz
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

        # ---- host stage (pointer h <= f): the command's host line op, after its moves
        if H:
            rsp_count = self._host_stage(m, count, idx, h, f, j_q, j_p, j_s, j_write, j_bad, j_bypass, j_host, j_line, j_rdone,
                             hd_v, hf_v, hd_addr, hf_addr, h_wr, hd_go, hf_go, rsp_tail, d_host, d_tag_slot,
                             f_host, f_tag_slot)

        # ---- retire, in order
        ir = idx(r)
        dn = self.done.payload
        m.d.comb += [
            self.done.valid.eq(((r != a) & (r != x) & (r != f) & (r != h)) if H else ((r != a) & (r != x) & (r != f))),
            dn.queue.eq(j_q[ir]), dn.position.eq(j_p[ir]), dn.slot.eq(j_s[ir]), dn.write.eq(j_write[ir]),
            dn.hit.eq(j_hit[ir]), dn.fill.eq(j_fill[ir]), dn.writeback.eq(j_wb[ir]),
            dn.clean_drop.eq(j_drop[ir]), dn.bypass.eq(j_bypass[ir]), dn.bad.eq(j_bad[ir]),
            self.idle.eq(((r == a) & ~clearing & (rsp_count == 0)) if H else ((r == a) & ~clearing)),
        ]
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += r.eq(r + 1)

        # ---- sticky status
        err_now = Cat(self.evict_grant.valid & (n_out == 0),
                      self.evict_grant.valid & self.evict_grant.ready & (n_out != 0) & ~grant_take,
                      resp_bad)
        m.d.sync += self.err_status.eq((self.err_status & ~self.clear_status) | err_now)
        return m


    def _host_stage(self, m, count, idx, h, f, j_q, j_p, j_s, j_write, j_bad, j_bypass, j_host, j_line, j_rdone,
                    hd_v, hf_v, hd_addr, hf_addr, h_wr, hd_go, hf_go, rsp_tail, d_host, d_tag_slot,
                    f_host, f_tag_slot):
        """The host stage and the ``host_rsp`` buffer (``host_ops``): one job per clock at most, in order.
        A host op allocates its response slot when it is issued (a read's data lands in the slot when the
        port answers); ``host_rsp`` offers the head slot once it is complete. Returns the slots taken."""
        cfg, L, F, N = self.cfg, self.cfg.lines_per_entry, self.cfg.frames_per_queue, self.cfg.n_positions
        HR = self.host_rsp_depth
        rb = M.bits(HR)
        ih = idx(h)
        at = Signal()               # a job waits at the host stage
        is_host, bad, flash, line = j_host[ih], j_bad[ih], j_bypass[ih], j_line[ih]
        # h != f: the job's fill writes (and every earlier job's) are issued; reads_done: so are its own
        # writeback's DRAM reads (a write miss has no fill, so the fill writer does not wait for them)
        m.d.comb += [at.eq((h != f) & j_rdone[ih]), h_wr.eq(j_write[ih])]
        # response buffer: slot fields; a slot is ``full`` once its answer is complete
        r_data = Array(Signal(cfg.line_bits, name=f"hrsp{i}_data") for i in range(HR))
        r_write = Array(Signal(name=f"hrsp{i}_write") for i in range(HR))
        r_res = Array(Signal(name=f"hrsp{i}_resident") for i in range(HR))
        r_bad = Array(Signal(name=f"hrsp{i}_bad") for i in range(HR))
        r_full = Array(Signal(name=f"hrsp{i}_full") for i in range(HR))
        r_head = Signal(rb + 1)
        n = Signal(range(HR + 1), name="hrsp_count")        # slots taken (returned: idle needs it)
        room = Signal()
        m.d.comb += room.eq(n != HR)
        data_ok = ~h_wr | self.host_wdata.valid          # a write waits for its data
        go_ok = at & is_host & room & data_ok
        m.d.comb += [hd_v.eq(go_ok & ~bad & ~flash), hf_v.eq(go_ok & ~bad & flash),
                     hd_addr.eq((j_q[ih] * F + j_s[ih]) * L + line),
                     hf_addr.eq((j_q[ih] * N + j_p[ih]) * L + line)]
        bad_go = Signal()
        alloc = Signal()
        m.d.comb += [bad_go.eq(go_ok & bad), alloc.eq(hd_go | hf_go | bad_go),
                     self.host_wdata.ready.eq(alloc & h_wr)]
        with m.If(at & ~is_host):
            m.d.sync += h.eq(h + 1)
        with m.If(alloc):
            m.d.sync += h.eq(h + 1)
        it = rsp_tail[:rb]
        with m.If(alloc):
            m.d.sync += [r_write[it].eq(h_wr), r_res[it].eq(~bad & ~flash), r_bad[it].eq(bad),
                         r_full[it].eq(h_wr | bad), r_data[it].eq(0), rsp_tail.eq(rsp_tail + 1)]
        for i in range(HR):          # read answers (both ports may answer in the same clock, other slots)
            with m.If(d_host & (d_tag_slot == i)):
                m.d.sync += [r_data[i].eq(self.dram_resp.payload), r_full[i].eq(1)]
            with m.If(f_host & (f_tag_slot == i)):
                m.d.sync += [r_data[i].eq(self.flash_resp.payload), r_full[i].eq(1)]
        ihd = r_head[:rb]
        rp = self.host_rsp.payload
        m.d.comb += [self.host_rsp.valid.eq((n != 0) & r_full[ihd]),
                     rp.data.eq(r_data[ihd]), rp.write.eq(r_write[ihd]), rp.resident.eq(r_res[ihd]),
                     rp.bad.eq(r_bad[ihd])]
        pop = self.host_rsp.valid & self.host_rsp.ready
        with m.If(pop):
            m.d.sync += r_head.eq(r_head + 1)
        m.d.sync += n.eq(n + alloc - pop)
        count("host_reads", (hd_go | hf_go) & ~h_wr)
        count("host_writes", (hd_go | hf_go) & h_wr)
        count("host_bypasses", hf_go)
        count("host_wdata_dropped", bad_go & h_wr)
        return n


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks: the bench's small one,
    a full-width one (640 queues, 64 frames per queue, 8 lines of 512 bits per entry), and the
    bench's with host line operations."""
    return {"tiermover": lambda: TierMover(n_queues=3, n_positions=32, frames_per_queue=3, lines_per_entry=4,
                                           line_bits=32, depth=8, buf_lines=4),
            "tiermover_full": lambda: TierMover(n_queues=640, n_positions=131072, frames_per_queue=64,
                                                lines_per_entry=8, line_bits=512, depth=8),
            "tiermover_host": lambda: TierMover(n_queues=3, n_positions=32, frames_per_queue=3, lines_per_entry=4,
                                                line_bits=32, depth=8, buf_lines=4, host_ops=True)}
