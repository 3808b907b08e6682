"""Access tracker and eviction selector: the ``hw`` policy, bit for bit.

Golden model: :mod:`cxlkv.models.tracker` (equal to ``policy.replay(..., "hw")`` event for
event). Documentation: ``docs/tracker.md``.

Per event in {layer, head, position, write, sample, step}; per event out {hit, inserted,
victim}. A "victim for queue q" request port answers the policy's rule without changing
state. One engine processes events and requests one at a time (a sequential FSM, several
cycles per event; docs/tracker.md "Timing"):

* per position, two words behind two request/response memory ports (device DRAM at the full
  geometry): the 64-bit *metadata* word {ema 16, t_last 32, reserved 16 (preserved)} and the
  *link* word {prev, next, key, resident}; list nodes are positions;
* per queue, on chip: a state word (step, read counter, dense bit, key cursor, expired list,
  resident count, bucket occupancy bitmap) and a ring of ``n_buckets`` (head, tail) pairs.

Memory ports: ``*_req`` carries {addr, write, [wmask,] wdata}; a read is answered on
``*_resp`` in order; writes are posted (no response). The engine has at most one request in
flight per port, and a read's response is awaited before the next request, so any memory that
answers in order (with any latency and any ready stalls) is correct.
"""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.models import policy as P
from cxlkv.models import scoring as S
from cxlkv.models import tracker as T

TLN_BITS = 28            # round(τ·ln2·256), τ <= 2^20
RATE_SHIFT_BITS = 5
AGE_BITS = S.AGE_BITS
F_BITS = 24
COUNTER_BITS = 32
META_BITS = 64
COUNTERS = T.COUNTER_NAMES + ("bad_events", "mem_wait_cycles")


def _bits(n):
    """Bits to index n things (at least 1)."""
    return max(1, (n - 1).bit_length())


class Geometry:
    """Fixed parameters and the widths they imply."""

    def __init__(self, n_layers, n_kv_heads, n_positions, n_buckets):
        for name, v in (("n_positions", n_positions), ("n_buckets", n_buckets)):
            if v < 2 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 2, got {v}")
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self.n_queues = n_layers * n_kv_heads
        self.n_positions, self.n_buckets = n_positions, n_buckets
        self.lb, self.hb = _bits(n_layers), _bits(n_kv_heads)
        self.qb = _bits(self.n_queues)
        self.pb = _bits(n_positions)
        self.bb = _bits(n_buckets)
        self.ptr = self.pb + 1                    # {valid, position}
        self.count = self.pb + 1                  # 0 .. n_positions
        self.step_reads = self.pb + 2             # saturating; > any budget
        self.addr = self.qb + self.pb             # word address {queue, position}

    def event_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "position": self.pb,
                                  "write": 1, "sample": S.SCORE_BITS, "step": S.STEP_BITS})

    def decision_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "position": self.pb,
                                  "hit": 1, "inserted": 1, "victim_valid": 1, "no_victim": 1,
                                  "error": 1, "victim": self.pb})

    def vreq_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb})

    def vresp_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "valid": 1, "locked": 1,
                                  "error": 1, "victim": self.pb})

    def link_layout(self):
        return data.StructLayout({"prev": self.ptr, "next": self.ptr, "key": T.KEY_BITS, "resident": 1})

    def qstate_layout(self):
        return data.StructLayout({
            "started": 1, "cur_step": S.STEP_BITS, "step_reads": self.step_reads, "dense": 1,
            "kc": S.STEP_BITS, "ehead": self.ptr, "etail": self.ptr, "nres": self.count,
            "bitmap": self.n_buckets})

    def bucket_layout(self):
        return data.StructLayout({"head": self.ptr, "tail": self.ptr})

    def meta_req_layout(self):
        return data.StructLayout({"addr": self.addr, "write": 1, "wdata": META_BITS})

    def link_req_layout(self):
        return data.StructLayout({"addr": self.addr, "write": 1, "wmask": 4,
                                  "wdata": self.link_layout().size})


META_LAYOUT = data.StructLayout({"ema": S.SCORE_BITS, "t_last": S.STEP_BITS, "reserved": 16})
#: link write mask bits
WM_PREV, WM_NEXT, WM_KEY, WM_RES = 1, 2, 4, 8
WM_ALL = 15


def lowest_set(m, vec, width):
    """(any, index) of the lowest set bit of ``vec``: a binary tree of 2:1 choices."""
    def rec(lo, n):
        if n == 1:
            return vec[lo], Const(0, 1)
        half = n // 2
        va, ia = rec(lo, half)
        vb, ib = rec(lo + half, n - half)
        w = _bits(n)
        return va | vb, Mux(va, ia, Const(half, w) + ib)[:w]
    anyset, idx = rec(0, width)
    a, i = Signal(), Signal(_bits(width))
    m.d.comb += [a.eq(anyset), i.eq(idx)]
    return a, i


class Tracker(wiring.Component):
    """The per-(layer, KV head) access tracker; see the module docstring and docs/tracker.md.

    Parameters: ``n_layers``, ``n_kv_heads`` (queues = their product), ``n_positions``
    (per queue, power of two), ``n_buckets`` (deadline ring, power of two >= the policy's NB).
    """

    def __init__(self, n_layers=2, n_kv_heads=2, n_positions=64, n_buckets=128):
        self.geom = g = Geometry(n_layers, n_kv_heads, n_positions, n_buckets)
        ports = {
            "event": In(stream.Signature(g.event_layout())),
            "decision": Out(stream.Signature(g.decision_layout())),
            "victim_req": In(stream.Signature(g.vreq_layout())),
            "victim_resp": Out(stream.Signature(g.vresp_layout())),
            "meta_req": Out(stream.Signature(g.meta_req_layout())),
            "meta_resp": In(stream.Signature(META_BITS)),
            "link_req": Out(stream.Signature(g.link_req_layout())),
            "link_resp": In(stream.Signature(g.link_layout().size)),
            # configuration (static while events flow)
            "budget": In(g.count),
            "pinned": In(g.count),
            "alpha": In(S.ALPHA_BITS),
            "rate_mant": In(S.MANT_BITS),
            "rate_shift": In(RATE_SHIFT_BITS),
            "tln_r": In(TLN_BITS),
            "tln_d": In(TLN_BITS),
            "bucket_bits": In(5),
            "write_sample": In(S.SCORE_BITS),
            "read_credit": In(S.SCORE_BITS),
            "decode_lock": In(g.n_queues),
            "cfg_error": Out(1),
            "busy": Out(1),
        }
        for name in COUNTERS:
            ports[name] = Out(COUNTER_BITS)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        NBR = g.n_buckets

        # -- configuration check: the ring must hold every live key
        f_max = Signal(TLN_BITS + 12)
        tln_max = Signal(TLN_BITS)
        m.d.comb += [tln_max.eq(Mux(self.tln_r > self.tln_d, self.tln_r, self.tln_d)),
                     f_max.eq(((tln_max * 4095) >> 16) >> self.bucket_bits)]
        m.d.sync += self.cfg_error.eq(f_max + 2 > NBR)

        # -- on-chip per-queue state and the bucket ring
        qlay, blay, llay = g.qstate_layout(), g.bucket_layout(), g.link_layout()
        m.submodules.qmem = qmem = Memory(shape=qlay, depth=g.n_queues, init=[])
        q_wr = qmem.write_port()
        q_rd = qmem.read_port(transparent_for=(q_wr,))   # an event chained from EMIT reads the state just written
        m.submodules.bmem = bmem = Memory(shape=blay, depth=g.n_queues * NBR, init=[])
        b_wr = bmem.write_port()
        b_rd = bmem.read_port(transparent_for=(b_wr,))   # a bucket read sees a same-cycle write
        m.submodules.exp_rom = exp_rom = Memory(shape=S.SCORE_BITS + 1, depth=1 << S.EXP_INDEX_BITS,
                                                init=S.EXP2_NEG_Q16)
        e_rd = exp_rom.read_port(domain="comb")
        m.submodules.log2_rom = log2_rom = Memory(shape=8, depth=256, init=P.LOG2_FRAC_Q8)
        l_rd = log2_rom.read_port(domain="comb")

        # -- working registers
        ev = Signal(g.event_layout())
        q = Signal(g.qb)
        qs = Signal(qlay)
        s_eff = Signal(S.STEP_BITS)
        kn = Signal(S.STEP_BITS)
        meta_hi = Signal(16)
        ema_old = Signal(S.SCORE_BITS)
        t_old = Signal(S.STEP_BITS)
        yi = Signal(AGE_BITS + S.MANT_BITS - S.Y_FRAC_BITS)
        yf = Signal(S.Y_FRAC_BITS)
        dec = Signal(S.SCORE_BITS)
        ema_new = Signal(S.SCORE_BITS)
        key = Signal(T.KEY_BITS)
        lk = Signal(llay)                     # own link word as read
        bk = Signal(g.bb)                     # bucket being worked on
        bh = Signal(g.ptr)
        bt = Signal(g.ptr)
        nxt_v = Signal(g.ptr)
        victim = Signal(g.ptr)
        from_expired = Signal()
        out = Signal(g.decision_layout())
        vout = Signal(g.vresp_layout())
        clear_q = Signal(g.qb)
        meta_start = Signal()                 # main FSM -> metadata engine
        meta_done = Signal(init=1)            # metadata written back
        key_ready = Signal(init=1)            # the event's key is computed

        pos_ptr = Cat(ev.position, Const(1, 1))
        NULL = Const(0, g.ptr)
        pinned = Signal()
        is_read = Signal()
        m.d.comb += [pinned.eq(ev.position < self.pinned), is_read.eq(~ev.write), q_rd.addr.eq(q),
                     q_wr.addr.eq(q), q_wr.data.eq(qs)]

        def addr_of(ptr_pos):
            return Cat(ptr_pos[:g.pb], q)

        # -- counters
        cnt = {name: getattr(self, name) for name in COUNTERS}

        def bump(name, cond=None):
            if cond is None:
                m.d.sync += cnt[name].eq(cnt[name] + 1)
            else:
                with m.If(cond):
                    m.d.sync += cnt[name].eq(cnt[name] + 1)

        waiting = Signal()
        m.d.comb += waiting.eq((self.meta_req.valid & ~self.meta_req.ready)
                               | (self.link_req.valid & ~self.link_req.ready)
                               | (self.meta_resp.ready & ~self.meta_resp.valid)
                               | (self.link_resp.ready & ~self.link_resp.valid))
        bump("mem_wait_cycles", waiting)

        # -- lowest non-empty bucket at or after the key cursor (find-first-set, rotated)
        kcm = qs.kc[:g.bb]
        above = Signal(NBR)
        m.d.comb += above.eq(qs.bitmap & Cat(*[Const(i, g.bb) >= kcm if i < NBR - 1 else Const(1, 1)
                                             for i in range(NBR)]))
        hi_any, hi_idx = lowest_set(m, above, NBR)
        lo_any, lo_idx = lowest_set(m, qs.bitmap, NBR)
        ffs_any = Signal()
        ffs_off = Signal(g.bb + 1)
        ffs_key = Signal(S.STEP_BITS + 1)
        m.d.comb += [ffs_any.eq(lo_any),
                     ffs_off.eq(Mux(hi_any, hi_idx - kcm, lo_idx + NBR - kcm)),
                     ffs_key.eq(qs.kc + ffs_off)]

        # -- link port helpers
        lreq = self.link_req.payload
        lwd = data.View(llay, lreq.wdata)

        def link_write(node_ptr, mask, prev=None, nxt=None, key_=None, res=None):
            m.d.comb += [self.link_req.valid.eq(1), lreq.addr.eq(addr_of(node_ptr)), lreq.write.eq(1),
                         lreq.wmask.eq(mask)]
            if prev is not None:
                m.d.comb += lwd.prev.eq(prev)
            if nxt is not None:
                m.d.comb += lwd.next.eq(nxt)
            if key_ is not None:
                m.d.comb += lwd.key.eq(key_)
            if res is not None:
                m.d.comb += lwd.resident.eq(res)

        def link_read(node_ptr):
            m.d.comb += [self.link_req.valid.eq(1), lreq.addr.eq(addr_of(node_ptr)), lreq.write.eq(0)]

        lresp = data.View(llay, self.link_resp.payload)

        # -- arithmetic (combinational, registered state by state)
        age_raw = Signal(S.STEP_BITS)
        age = Signal(AGE_BITS)
        y = Signal(AGE_BITS + S.MANT_BITS)
        e_val = Signal(S.SCORE_BITS + 1)
        smp = Signal(S.SCORE_BITS)
        smp_sum = Signal(S.SCORE_BITS + 1)
        alpha_eff = Signal(S.ALPHA_BITS)
        ema_diff = Signal(signed(S.SCORE_BITS + 1))
        ema_step = Signal(signed(S.SCORE_BITS + 1 + S.ALPHA_BITS + 1))
        msb = Signal(4)
        mant8 = Signal(8)
        log2q8 = Signal(12)
        tln = Signal(TLN_BITS)
        f_val = Signal(F_BITS)
        m.d.comb += [
            age_raw.eq(s_eff - t_old),
            age.eq(Mux(age_raw > S.AGE_MAX, S.AGE_MAX, age_raw)),
            y.eq((age * self.rate_mant) >> self.rate_shift),
            e_rd.addr.eq(yf),
            e_val.eq(Mux(yi >= S.EXP_SHIFT_LIMIT, 0, e_rd.data >> yi[:5])),
            smp_sum.eq(ev.sample + self.read_credit),
            smp.eq(Mux(ev.write, self.write_sample, Mux(smp_sum > S.SCORE_MAX, S.SCORE_MAX, smp_sum))),
            alpha_eff.eq(Mux(self.alpha == 0, 1, self.alpha)),
            ema_diff.eq(smp - dec),
            ema_step.eq((ema_diff * alpha_eff + 0x8000) >> 16),
            l_rd.addr.eq(mant8),
            log2q8.eq(Cat(l_rd.data, msb)),
            tln.eq(Mux(qs.dense, self.tln_d, self.tln_r)),
            f_val.eq(Mux(ema_new == 0, 0, (log2q8 * tln) >> 16)),
        ]
        for b in range(S.SCORE_BITS):
            with m.If(ema_new[b]):
                m.d.comb += [msb.eq(b), mant8.eq((ema_new << 8) >> b)]

        # -- queue index of an input
        def queue_of(layer, head):
            return (layer * g.n_kv_heads + head)[:g.qb]

        ein = self.event.payload
        vin = self.victim_req.payload

        m.d.comb += [self.decision.payload.eq(out), self.victim_resp.payload.eq(vout)]

        def accept_event():
            """Take the offered event: latch it, start its queue-state and metadata reads."""
            m.d.comb += self.event.ready.eq(1)
            m.d.sync += [ev.eq(ein), q.eq(queue_of(ein.layer, ein.head)), out.eq(0),
                         out.layer.eq(ein.layer), out.head.eq(ein.head), out.position.eq(ein.position)]
            bump("events")
            with m.If((ein.layer >= g.n_layers) | (ein.head >= g.n_kv_heads)):
                m.d.sync += out.error.eq(1)
                bump("bad_events")
                m.next = "EMIT"
            with m.Else():
                bump("reads", ~ein.write)
                bump("writes", ein.write)
                m.d.comb += [meta_start.eq(1), q_rd.addr.eq(queue_of(ein.layer, ein.head))]
                m.next = "EV_LOAD"

        def goto_insert():
            """Leave for the insert; when the key is known, start its bucket read now."""
            with m.If(key_ready & ~pinned):
                m.d.comb += b_rd.addr.eq(Cat(key[:g.bb], q))
                m.d.sync += bk.eq(key[:g.bb])
                m.next = "INS_W"
            with m.Else():
                m.next = "INSERT"

        with m.FSM(init="CLEAR"):
            with m.State("CLEAR"):            # zero every queue's state after reset
                m.d.comb += [self.busy.eq(1), q_wr.en.eq(1), q_wr.addr.eq(clear_q), q_wr.data.eq(0)]
                m.d.sync += clear_q.eq(clear_q + 1)
                with m.If(clear_q == g.n_queues - 1):
                    m.next = "IDLE"

            with m.State("IDLE"):
                # a victim request goes first: it is short, and events arriving back to back are
                # chained from EMIT, so preferring events here could starve requests
                with m.If(self.victim_req.valid):
                    m.d.comb += self.victim_req.ready.eq(1)
                    m.d.sync += [q.eq(queue_of(vin.layer, vin.head)), vout.eq(0),
                                 vout.layer.eq(vin.layer), vout.head.eq(vin.head)]
                    bump("victim_requests")
                    with m.If((vin.layer >= g.n_layers) | (vin.head >= g.n_kv_heads)):
                        m.d.sync += vout.error.eq(1)
                        bump("victim_none")
                        m.next = "VEMIT"
                    with m.Else():
                        m.d.comb += q_rd.addr.eq(queue_of(vin.layer, vin.head))
                        m.next = "V_LOAD"
                with m.Elif(self.event.valid):
                    accept_event()

            # ---------------- victim request
            with m.State("V_LOAD"):
                m.d.sync += qs.eq(q_rd.data)
                m.next = "V_DECIDE"
            with m.State("V_DECIDE"):
                m.d.comb += b_rd.addr.eq(Cat(ffs_key[:g.bb], q))
                with m.If((self.decode_lock >> q)[0]):
                    m.d.sync += vout.locked.eq(1)
                    bump("victim_none")
                    bump("victim_locked")
                    m.next = "VEMIT"
                with m.Elif(qs.started & qs.ehead[g.pb]):
                    m.d.sync += [vout.valid.eq(1), vout.victim.eq(qs.ehead[:g.pb])]
                    m.next = "VEMIT"
                with m.Elif(qs.started & ffs_any):
                    m.next = "V_BUCKET"
                with m.Else():
                    bump("victim_none")
                    m.next = "VEMIT"
            with m.State("V_BUCKET"):
                bw = data.View(blay, b_rd.data)
                m.d.sync += [vout.valid.eq(1), vout.victim.eq(bw.head[:g.pb])]
                m.next = "VEMIT"
            with m.State("VEMIT"):
                m.d.comb += self.victim_resp.valid.eq(1)
                with m.If(self.victim_resp.ready):
                    m.next = "IDLE"

            # ---------------- event: queue state and step boundary
            with m.State("EV_LOAD"):
                rd = data.View(qlay, q_rd.data)
                s_in = ev.step
                start_new = ~rd.started
                backwards = rd.started & (s_in < rd.cur_step)
                s_use = Mux(backwards, rd.cur_step, s_in)
                new_step = rd.started & (s_use != rd.cur_step)
                reads0 = Mux(new_step | start_new, 0, rd.step_reads)
                sat = (1 << g.step_reads) - 1
                reads1 = Mux(ev.write | (reads0 == sat), reads0, reads0 + 1)
                bump("step_errors", backwards)
                m.d.sync += [
                    s_eff.eq(s_use),
                    kn.eq(s_use >> self.bucket_bits),
                    qs.eq(rd),
                    qs.started.eq(1),
                    qs.cur_step.eq(s_use),
                    qs.step_reads.eq(reads1),
                ]
                with m.If(start_new):
                    m.d.sync += [qs.dense.eq(0), qs.kc.eq(s_in >> self.bucket_bits), qs.ehead.eq(NULL),
                                 qs.etail.eq(NULL), qs.nres.eq(0), qs.bitmap.eq(0)]
                with m.Elif(new_step):
                    m.d.sync += qs.dense.eq((self.tln_d != 0) & (rd.step_reads > self.budget))
                with m.If(start_new | ((s_use >> self.bucket_bits) <= rd.kc)):
                    # the key cursor stays: nothing to splice, so the own link word can be read now
                    link_read(pos_ptr)
                    with m.If(self.link_req.ready):
                        m.next = "LINK_WAIT"
                    with m.Else():
                        m.next = "LINK_RD"
                with m.Else():
                    m.next = "SPLICE_FIND"

            # splice the non-empty buckets with key < kn onto the expired list, in key order
            with m.State("SPLICE_FIND"):
                m.d.comb += b_rd.addr.eq(Cat(ffs_key[:g.bb], q))
                with m.If((kn > qs.kc) & ffs_any & (ffs_key < kn)):
                    m.d.sync += [bk.eq(ffs_key[:g.bb]), qs.kc.eq(ffs_key + 1)]
                    m.next = "SPLICE_RD"
                with m.Else():
                    with m.If(kn > qs.kc):
                        m.d.sync += qs.kc.eq(kn)
                    link_read(pos_ptr)        # the own link word: issued here, or retried in LINK_RD
                    with m.If(self.link_req.ready):
                        m.next = "LINK_WAIT"
                    with m.Else():
                        m.next = "LINK_RD"
            with m.State("SPLICE_RD"):
                bw = data.View(blay, b_rd.data)
                m.d.sync += [bh.eq(bw.head), bt.eq(bw.tail), qs.bitmap.bit_select(bk, 1).eq(0)]
                with m.If(qs.etail[g.pb]):
                    m.next = "SPLICE_W1"
                with m.Else():
                    m.d.sync += [qs.ehead.eq(bw.head), qs.etail.eq(bw.tail)]
                    m.next = "SPLICE_FIND"
            with m.State("SPLICE_W1"):
                link_write(qs.etail, WM_NEXT, nxt=bh)
                with m.If(self.link_req.ready):
                    m.next = "SPLICE_W2"
            with m.State("SPLICE_W2"):
                link_write(bh, WM_PREV, prev=qs.etail)
                with m.If(self.link_req.ready):
                    m.d.sync += qs.etail.eq(bt)
                    m.next = "SPLICE_FIND"

            # ---------------- residency
            with m.State("LINK_RD"):
                link_read(pos_ptr)
                with m.If(self.link_req.ready):
                    m.next = "LINK_WAIT"
            with m.State("LINK_WAIT"):          # decide on the own link word as it arrives
                m.d.comb += [self.link_resp.ready.eq(1),
                             b_rd.addr.eq(Cat(Mux(lresp.resident, lresp.key[:g.bb], ffs_key[:g.bb]), q))]
                with m.If(self.link_resp.valid):
                    m.d.sync += lk.eq(self.link_resp.payload)
                with m.If(~self.link_resp.valid):
                    pass
                with m.Elif(lresp.resident):
                    m.d.sync += [out.hit.eq(1), bk.eq(lresp.key[:g.bb])]
                    bump("read_hits", is_read)
                    with m.If(pinned):
                        m.next = "INSERT"
                    with m.Else():
                        m.next = "UNLINK_BRD"     # the bucket read is under way
                with m.Elif(qs.nres < self.budget):
                    m.d.sync += [qs.nres.eq(qs.nres + 1), out.inserted.eq(1)]
                    goto_insert()
                with m.Elif(qs.ehead[g.pb]):
                    m.d.sync += [victim.eq(qs.ehead), from_expired.eq(1)]
                    link_read(qs.ehead)       # the victim's link word: issued here, or retried in VIC_RD
                    with m.If(self.link_req.ready):
                        m.next = "VIC_WAIT"
                    with m.Else():
                        m.next = "VIC_RD"
                with m.Elif(ffs_any):
                    m.d.sync += [bk.eq(ffs_key[:g.bb]), from_expired.eq(0)]
                    m.next = "VIC_BRD"        # the bucket read is under way
                with m.Else():
                    m.d.sync += out.no_victim.eq(1)
                    bump("no_victim")
                    m.next = "EMIT"

            # unlink a resident entry from the expired list or its bucket
            lk_expired = lk.key < qs.kc
            with m.State("UNLINK_BRD"):
                bw = data.View(blay, b_rd.data)
                m.d.sync += [bh.eq(bw.head), bt.eq(bw.tail)]
                m.next = "UNLINK_A"
            with m.State("UNLINK_A"):
                with m.If(lk.prev[g.pb]):
                    link_write(lk.prev, WM_NEXT, nxt=lk.next)
                    with m.If(self.link_req.ready):
                        m.next = "UNLINK_B"
                with m.Else():
                    with m.If(lk_expired):
                        m.d.sync += qs.ehead.eq(lk.next)
                    with m.Else():
                        m.d.sync += bh.eq(lk.next)
                    m.next = "UNLINK_B"
            with m.State("UNLINK_B"):          # successor's prev, and the list's (head, tail)
                with m.If(lk.next[g.pb]):
                    link_write(lk.next, WM_PREV, prev=lk.prev)
                with m.If(~lk.next[g.pb] | self.link_req.ready):
                    with m.If(lk_expired):
                        with m.If(~lk.next[g.pb]):
                            m.d.sync += qs.etail.eq(lk.prev)
                    with m.Else():
                        m.d.comb += [b_wr.en.eq(1), b_wr.addr.eq(Cat(bk, q)),
                                     b_wr.data.eq(Cat(bh, Mux(lk.next[g.pb], bt, lk.prev)))]
                        with m.If(~bh[g.pb]):
                            m.d.sync += qs.bitmap.bit_select(bk, 1).eq(0)
                    goto_insert()

            # evict: pop the head of the expired list or of bucket bk
            with m.State("VIC_BRD"):
                bw = data.View(blay, b_rd.data)
                m.d.sync += [bh.eq(bw.head), bt.eq(bw.tail), victim.eq(bw.head)]
                link_read(bw.head)            # the victim's link word: issued here, or retried in VIC_RD
                with m.If(self.link_req.ready):
                    m.next = "VIC_WAIT"
                with m.Else():
                    m.next = "VIC_RD"
            with m.State("VIC_RD"):
                link_read(victim)
                with m.If(self.link_req.ready):
                    m.next = "VIC_WAIT"
            with m.State("VIC_WAIT"):
                m.d.comb += self.link_resp.ready.eq(1)
                with m.If(self.link_resp.valid):
                    m.d.sync += nxt_v.eq(lresp.next)
                    m.next = "VIC_POP"
            with m.State("VIC_POP"):            # the successor becomes the list's head
                with m.If(nxt_v[g.pb]):
                    link_write(nxt_v, WM_PREV, prev=NULL)
                with m.If(~nxt_v[g.pb] | self.link_req.ready):
                    with m.If(from_expired):
                        m.d.sync += qs.ehead.eq(nxt_v)
                        with m.If(~nxt_v[g.pb]):
                            m.d.sync += qs.etail.eq(NULL)
                    with m.Else():
                        new_tail = Mux(nxt_v[g.pb], bt, NULL)
                        m.d.comb += [b_wr.en.eq(1), b_wr.addr.eq(Cat(bk, q)), b_wr.data.eq(Cat(nxt_v, new_tail))]
                        with m.If(~nxt_v[g.pb]):
                            m.d.sync += qs.bitmap.bit_select(bk, 1).eq(0)
                    m.next = "VIC_CLR"
            with m.State("VIC_CLR"):
                link_write(victim, WM_RES, res=0)
                with m.If(self.link_req.ready):
                    m.d.sync += [out.victim_valid.eq(1), out.victim.eq(victim[:g.pb]), out.inserted.eq(1)]
                    bump("evictions")
                    goto_insert()

            # insert (or re-insert) p: pinned entries are resident but in no list
            with m.State("INSERT"):
                m.d.comb += b_rd.addr.eq(Cat(key[:g.bb], q))
                m.d.sync += bk.eq(key[:g.bb])
                with m.If(~key_ready):
                    pass                      # the key is not computed yet
                with m.Elif(pinned):
                    link_write(pos_ptr, WM_ALL, prev=NULL, nxt=NULL, key_=key, res=1)
                    with m.If(self.link_req.ready):
                        m.next = "EMIT"
                with m.Else():
                    m.next = "INS_W"
            with m.State("INS_W"):               # the bucket read started in the state before
                bw = data.View(blay, b_rd.data)
                occupied = (qs.bitmap >> bk)[0]
                head_now = Mux(occupied, bw.head, NULL)
                tail_now = Mux(occupied, bw.tail, NULL)
                m.d.comb += b_rd.addr.eq(Cat(bk, q))         # held while the link port stalls
                m.d.sync += [bh.eq(head_now), bt.eq(tail_now)]
                with m.If(qs.dense):
                    link_write(pos_ptr, WM_ALL, prev=NULL, nxt=head_now, key_=key, res=1)
                with m.Else():
                    link_write(pos_ptr, WM_ALL, prev=tail_now, nxt=NULL, key_=key, res=1)
                with m.If(self.link_req.ready):
                    m.next = "INS_N"
            with m.State("INS_N"):
                neighbour = Mux(qs.dense, bh, bt)
                with m.If(neighbour[g.pb]):
                    with m.If(qs.dense):
                        link_write(bh, WM_PREV, prev=pos_ptr)
                    with m.Else():
                        link_write(bt, WM_NEXT, nxt=pos_ptr)
                with m.If(~neighbour[g.pb] | self.link_req.ready):
                    with m.If(qs.dense):
                        m.d.comb += b_wr.data.eq(Cat(pos_ptr, Mux(bh[g.pb], bt, pos_ptr)))
                    with m.Else():
                        m.d.comb += b_wr.data.eq(Cat(Mux(bt[g.pb], bh, pos_ptr), pos_ptr))
                    m.d.comb += [b_wr.en.eq(1), b_wr.addr.eq(Cat(bk, q))]
                    m.d.sync += qs.bitmap.bit_select(bk, 1).eq(1)
                    m.next = "EMIT"

            with m.State("EMIT"):
                m.d.comb += self.decision.valid.eq(meta_done)
                with m.If(self.decision.ready & meta_done):
                    m.d.comb += q_wr.en.eq(~out.error)
                    with m.If(self.event.valid & ~self.victim_req.valid):
                        accept_event()        # back to back: the state read sees this write
                    with m.Else():
                        m.next = "IDLE"
        with m.FSM(init="M_IDLE", name="meta_fsm"):
            with m.State("M_IDLE"):
                with m.If(meta_start):        # the event is being accepted: issue its read now
                    m.d.sync += [meta_done.eq(0), key_ready.eq(0)]
                    m.d.comb += [self.meta_req.valid.eq(1),
                                 self.meta_req.payload.addr.eq(Cat(ein.position, queue_of(ein.layer, ein.head))),
                                 self.meta_req.payload.write.eq(0)]
                    with m.If(self.meta_req.ready):
                        m.next = "M_WAIT"
                    with m.Else():
                        m.next = "M_RD"
            # metadata engine: read, decay, EMA, key, write back; runs beside the list work
            with m.State("M_RD"):
                m.d.comb += [self.meta_req.valid.eq(1), self.meta_req.payload.addr.eq(addr_of(ev.position)),
                             self.meta_req.payload.write.eq(0)]
                with m.If(self.meta_req.ready):
                    m.next = "M_WAIT"
            with m.State("M_WAIT"):
                m.d.comb += self.meta_resp.ready.eq(1)
                mw = data.View(META_LAYOUT, self.meta_resp.payload)
                with m.If(self.meta_resp.valid):
                    m.d.sync += [ema_old.eq(mw.ema), t_old.eq(mw.t_last), meta_hi.eq(mw.reserved)]
                    m.next = "M_DECAY1"
            with m.State("M_DECAY1"):
                m.d.sync += [yi.eq(y >> S.Y_FRAC_BITS), yf.eq(y[:S.Y_FRAC_BITS])]
                m.next = "M_DECAY2"
            with m.State("M_DECAY2"):
                m.d.sync += dec.eq((ema_old * e_val + 0x8000) >> 16)
                m.next = "M_EMA"
            with m.State("M_EMA"):
                m.d.sync += ema_new.eq(dec + ema_step)
                m.next = "M_KEY"
            with m.State("M_KEY"):
                m.d.sync += [key.eq((s_eff + f_val) >> self.bucket_bits), key_ready.eq(1)]
                m.next = "M_WR"
            with m.State("M_WR"):
                mwd = data.View(META_LAYOUT, self.meta_req.payload.wdata)
                m.d.comb += [self.meta_req.valid.eq(1), self.meta_req.payload.addr.eq(addr_of(ev.position)),
                             self.meta_req.payload.write.eq(1), mwd.ema.eq(ema_new), mwd.t_last.eq(s_eff),
                             mwd.reserved.eq(meta_hi)]
                with m.If(self.meta_req.ready):
                    m.d.sync += meta_done.eq(1)
                    m.next = "M_IDLE"

        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks: the test geometry and
    the full Llama-70B one (80 layers x 8 KV heads x 131,072 positions, 128-bucket ring)."""
    return {"tracker": lambda: Tracker(2, 2, 64, 128),
            "tracker_full": lambda: Tracker(80, 8, 131072, 128)}
