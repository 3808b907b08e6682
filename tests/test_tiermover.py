"""The tier mover's golden model (cxlkv.models.tiermover) and its RTL's parameter checks.

The RTL is checked against the model by the cocotb bench (tests/test_cocotb.py -k tiermover).
Here: the per-command semantics, the addresses, bad commands, counters, and a reference check of
the model's data against a plain "what the host last wrote" memory on random streams.
"""
import random

import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import tiermover as M

CFG = M.TierMoverConfig(n_queues=2, n_positions=16, frames_per_queue=2, lines_per_entry=3, line_bits=16)
C = M.Command


def fresh(cfg=CFG):
    flash = {a: 0x1000 + a for a in range(cfg.flash_lines)}
    return M.TierMoverModel(cfg, flash=flash)


@pytest.mark.parametrize("kw", [dict(n_positions=12), dict(n_positions=1), dict(n_queues=0),
                                dict(lines_per_entry=0), dict(line_bits=-1), dict(frames_per_queue=32),
                                dict(n_queues=2.5), dict(n_queues=True)])
def test_bad_geometry_is_a_clear_error(kw):
    with pytest.raises(CxlkvError, match="tier mover"):
        M.TierMoverConfig(**{**dict(n_queues=2, n_positions=16, frames_per_queue=2), **kw})


def test_rtl_parameter_errors():
    from cxlkv.hdl.tiermover import TierMover
    with pytest.raises(CxlkvError, match="depth"):
        TierMover(depth=6)
    with pytest.raises(CxlkvError, match="buf_lines"):
        TierMover(buf_lines=0)
    with pytest.raises(CxlkvError, match="n_positions"):
        TierMover(n_positions=100)
    with pytest.raises(CxlkvError, match="host_rsp_depth"):
        TierMover(host_ops=True, host_rsp_depth=3)


def test_rtl_host_ports_only_with_host_ops():
    """host_ops=False: the interface of before; True: host/line appended to cmd, host_wdata, host_rsp and the
    host counters; max_reads grows by the response buffer."""
    from cxlkv.hdl.tiermover import TierMover
    plain = TierMover(n_queues=3, n_positions=32, frames_per_queue=3, lines_per_entry=3, line_bits=16)
    host = TierMover(n_queues=3, n_positions=32, frames_per_queue=3, lines_per_entry=3, line_bits=16, host_ops=True,
                     host_rsp_depth=8)
    plain._MustUse__silence = host._MustUse__silence = True     # inspected, never built
    extra = set(host.signature.members) - set(plain.signature.members)
    assert extra == {"host_wdata", "host_rsp", *M.COUNTERS_HOST}
    assert list(plain.lay.command.members) == ["queue", "position", "slot", "hit", "inserted", "victim_valid",
                                               "victim", "write"]
    assert list(host.lay.command.members) == list(plain.lay.command.members) + ["host", "line"]
    assert [(n, f.width) for n, f in host.lay.command][-2:] == [("host", 1), ("line", 2)]
    assert [(n, f.offset, f.width) for n, f in host.lay.host_rsp] == [("data", 0, 16), ("write", 16, 1),
                                                                      ("resident", 17, 1), ("bad", 18, 1)]
    assert plain.max_reads == plain.buf_lines == 3 and host.max_reads == 3 + 8


def test_addresses():
    cfg = M.TierMoverConfig(n_queues=3, n_positions=8, frames_per_queue=3, lines_per_entry=4, line_bits=8)
    assert cfg.dram_addr(2, 1, 3) == (2 * 3 + 1) * 4 + 3
    assert cfg.flash_addr(2, 5, 1) == (2 * 8 + 5) * 4 + 1
    assert cfg.dram_lines == 36 and cfg.flash_lines == 96
    assert cfg.dram_addr_bits == 6 and cfg.flash_addr_bits == 7
    assert (cfg.queue_bits, cfg.pos_bits, cfg.slot_bits) == (2, 3, 2)


def test_fill_into_free_frame_then_hits():
    m = fresh()
    r = m.command(C(1, 5, 0, inserted=1))
    L = CFG.lines_per_entry
    assert r.done["fill"] == 1 and not r.evict and not r.dram_reads and not r.flash_writes
    assert r.flash_reads == [CFG.flash_addr(1, 5, i) for i in range(L)]
    assert r.dram_writes == [(CFG.dram_addr(1, 0, i), 0x1000 + CFG.flash_addr(1, 5, i)) for i in range(L)]
    h = m.command(C(1, 5, 0, hit=1))
    assert h.done["hit"] == 1 and not (h.dram_reads or h.dram_writes or h.flash_reads or h.flash_writes)
    assert not m.frames[CFG.frame(1, 0)].dirty
    m.command(C(1, 5, 0, hit=1, write=1))
    assert m.frames[CFG.frame(1, 0)].dirty


def test_clean_victim_dropped_dirty_victim_written_back_before_the_fill():
    m = fresh()
    L = CFG.lines_per_entry
    m.command(C(0, 3, 1, inserted=1))
    r = m.command(C(0, 4, 1, inserted=1, victim_valid=1, victim=3))
    assert r.evict and r.done["clean_drop"] == 1 and r.done["writeback"] == 0 and not r.flash_writes
    assert r.done["fill"] == 1
    m.host_write(0, 1, {0: 0xAAAA, 2: 0xBBBB})
    m.command(C(0, 4, 1, hit=1, write=1))
    r = m.command(C(0, 7, 1, inserted=1, victim_valid=1, victim=4))
    assert r.done["writeback"] == 1 and r.done["fill"] == 1
    assert r.dram_reads == [CFG.dram_addr(0, 1, i) for i in range(L)]
    assert [a for a, _ in r.flash_writes] == [CFG.flash_addr(0, 4, i) for i in range(L)]
    assert r.flash_writes[0][1] == 0xAAAA and r.flash_writes[2][1] == 0xBBBB
    assert r.flash_writes[1][1] == 0x1000 + CFG.flash_addr(0, 4, 1)        # the filled line, unchanged
    assert [v for _, v in r.dram_writes] == [0x1000 + CFG.flash_addr(0, 7, i) for i in range(L)]
    assert m.flash[CFG.flash_addr(0, 4, 0)] == 0xAAAA


def test_write_miss_allocates_without_fill_and_is_dirty():
    m = fresh()
    r = m.command(C(0, 3, 0, inserted=1, write=1))
    assert r.done["fill"] == 0 and not r.flash_reads and not r.dram_writes
    assert m.frames[CFG.frame(0, 0)].dirty
    m.host_write(0, 0, {i: 0x5000 + i for i in range(CFG.lines_per_entry)})
    r = m.command(C(0, 6, 0, inserted=1, victim_valid=1, victim=3, write=1))
    assert r.done["writeback"] == 1 and r.done["fill"] == 0
    assert [v for _, v in r.flash_writes] == [0x5000 + i for i in range(CFG.lines_per_entry)]


def test_grant_dirty_from_host_makes_the_victim_dirty():
    m = fresh()
    m.command(C(1, 2, 1, inserted=1))
    r = m.command(C(1, 9, 1, inserted=1, victim_valid=1, victim=2), grant_dirty=True, grant_lines={1: 0x7777})
    assert r.done["writeback"] == 1
    assert r.flash_writes[1] == (CFG.flash_addr(1, 2, 1), 0x7777)


@pytest.mark.parametrize("cmd,why", [
    (C(2, 0, 0, hit=1), "queue"),
    (C(0, 0, 3, inserted=1), "slot"),
    (C(0, 1, 0, hit=1), "does not hold"),
    (C(0, 5, 0, hit=1, inserted=1), "hit with"),
    (C(0, 5, 0, victim_valid=1), "without inserted"),
    (C(0, 5, 0, inserted=1), "occupied"),
    (C(0, 6, 0, inserted=1, victim_valid=1, victim=4), "is not in frame"),
    (C(0, 5, 0, inserted=1, victim_valid=1, victim=5), "equals"),
    (C(0, 5, 1, inserted=1, victim_valid=1, victim=0), "is not in frame"),     # free frame
])
def test_bad_commands_change_nothing(cmd, why):
    m = fresh()
    m.command(C(0, 5, 0, inserted=1, write=1))
    frames = [(f.valid, f.dirty, f.position) for f in m.frames]
    fr = m.frames[CFG.frame(cmd.queue, cmd.slot)] if cmd.queue < 2 and cmd.slot < 2 else None
    assert why in M.check_command(CFG, fr, cmd)
    r = m.command(cmd)
    assert r.done["bad"] == 1 and not r.evict
    assert not (r.dram_reads or r.dram_writes or r.flash_reads or r.flash_writes)
    assert [(f.valid, f.dirty, f.position) for f in m.frames] == frames
    assert m.counters["bad_commands"] == 1


def test_bypass_and_counters():
    m = fresh()
    L = CFG.lines_per_entry
    m.command(C(0, 1, 0, inserted=1))                                  # fill
    m.command(C(0, 2, 1, inserted=1, write=1))                         # write miss
    m.command(C(0, 1, 0, hit=1))                                       # hit
    m.command(C(0, 3, 0))                                              # bypass (no_victim)
    m.command(C(0, 3, 1, inserted=1, victim_valid=1, victim=2))        # writeback + fill
    m.command(C(0, 4, 0, inserted=1, victim_valid=1, victim=1))        # clean drop + fill
    m.command(C(1, 0, 2, hit=1))                                       # bad
    assert m.counters == {"commands": 7, "hits": 1, "fills": 3, "writebacks": 1, "clean_drops": 1, "bypasses": 1,
                          "bad_commands": 1, "lines_to_flash": L, "lines_to_dram": 3 * L}


def test_host_write_out_of_range_is_a_clear_error():
    with pytest.raises(CxlkvError, match="line 3"):
        fresh().host_write(0, 0, {3: 1})


@pytest.mark.parametrize("seed", range(6))
def test_model_data_equals_what_the_host_last_wrote(seed):
    """Reference check on random tracker-like streams: a position's newest data (flash initially, then
    the host's writes) is in its frame while resident and in flash otherwise."""
    rng = random.Random(seed)
    cfg = M.TierMoverConfig(n_queues=2, n_positions=8, frames_per_queue=3, lines_per_entry=2, line_bits=16)
    m = fresh(cfg)
    L = cfg.lines_per_entry
    logical = {(q, p): [m.flash[cfg.flash_addr(q, p, i)] for i in range(L)]
               for q in range(cfg.n_queues) for p in range(cfg.n_positions)}
    where = {}                                      # (q, p) -> slot
    for _ in range(2000):
        q = rng.randrange(cfg.n_queues)
        slots = {s: p for (qq, p), s in where.items() if qq == q}
        write = rng.random() < 0.4
        if slots and rng.random() < 0.4:
            s = rng.choice(sorted(slots))
            cmd = C(q, slots[s], s, hit=1, write=int(write))
        else:
            p = rng.choice([x for x in range(cfg.n_positions) if (q, x) not in where])
            free = [s for s in range(cfg.frames_per_queue) if s not in slots]
            if free:
                cmd = C(q, p, free[0], inserted=1, write=int(write))
            else:
                s = rng.randrange(cfg.frames_per_queue)
                cmd = C(q, p, s, inserted=1, victim_valid=1, victim=slots[s], write=int(write))
                del where[(q, slots[s])]
        gd = cmd.victim_valid and rng.random() < 0.2
        glines = {i: rng.getrandbits(16) for i in range(L) if rng.random() < 0.5} if gd else None
        if gd:
            for i, v in glines.items():
                logical[(q, cmd.victim)][i] = v
        r = m.command(cmd, gd, glines)
        assert not r.done["bad"]
        where[(q, cmd.position)] = cmd.slot
        if write:
            lines = {i: rng.getrandbits(16) for i in range(L) if cmd.hit == 0 or rng.random() < 0.5}
            m.host_write(q, cmd.slot, lines)
            for i, v in lines.items():
                logical[(q, cmd.position)][i] = v
        for (qq, p), vals in logical.items():
            if (qq, p) in where:
                got = [m.dram.get(cfg.dram_addr(qq, where[(qq, p)], i), 0) for i in range(L)]
            else:
                got = [m.flash.get(cfg.flash_addr(qq, p, i), 0) for i in range(L)]
            assert got == vals, (qq, p)
    assert m.counters["writebacks"] > 0 and m.counters["clean_drops"] > 0


# ---- host line operations (host_ops)

def fresh_host(cfg=CFG):
    flash = {a: 0x1000 + a for a in range(cfg.flash_lines)}
    return M.TierMoverModel(cfg, flash=flash, host_ops=True)


def test_host_counters_only_with_host_ops():
    assert set(fresh().counters) == set(M.COUNTERS)
    assert set(fresh_host().counters) == set(M.COUNTERS + M.COUNTERS_HOST)


def test_host_read_after_the_fill_of_the_same_command():
    """Hazard (a) at model level: the host op comes after the command's fill, so it reads the filled line."""
    m = fresh_host()
    r = m.command(C(1, 5, 0, inserted=1, host=1, line=2))
    assert r.done["fill"] == 1
    assert r.host_rsp == dict(data=0x1000 + CFG.flash_addr(1, 5, 2), write=0, resident=1, bad=0)
    assert r.host_access == ("dram", 0, CFG.dram_addr(1, 0, 2), 0)
    assert not m.frames[CFG.frame(1, 0)].dirty
    assert m.counters["host_reads"] == 1 and m.counters["host_bypasses"] == 0


def test_host_write_hit_makes_the_frame_dirty_and_is_written_back():
    """Hazard (b) at model level: a later eviction of the frame reads the host's data."""
    m = fresh_host()
    m.command(C(0, 3, 1, inserted=1))
    r = m.command(C(0, 3, 1, hit=1, write=1, host=1, line=1), wdata=0xBEEF)
    assert r.host_rsp == dict(data=0, write=1, resident=1, bad=0)
    assert r.host_access == ("dram", 1, CFG.dram_addr(0, 1, 1), 0xBEEF)
    assert m.frames[CFG.frame(0, 1)].dirty
    r = m.command(C(0, 3, 1, hit=1), host=1, line=1)                     # keyword form of the host op
    assert r.host_rsp["data"] == 0xBEEF
    r = m.command(C(0, 4, 1, inserted=1, victim_valid=1, victim=3, host=1, line=1))
    assert r.done["writeback"] == 1 and r.flash_writes[1] == (CFG.flash_addr(0, 3, 1), 0xBEEF)
    assert r.host_rsp["data"] == 0x1000 + CFG.flash_addr(0, 4, 1)       # after the fill: the new entry
    assert m.counters["host_writes"] == 1 and m.counters["host_reads"] == 2


def test_host_write_on_a_read_insert_makes_the_frame_dirty():
    m = fresh_host()
    m.command(C(0, 3, 0, inserted=1, host=1, line=0, write=0))
    assert not m.frames[CFG.frame(0, 0)].dirty
    m2 = fresh_host()
    r = m2.command(C(0, 3, 0, inserted=1, write=1, host=1, line=0), wdata=7)
    assert r.host_access == ("dram", 1, CFG.dram_addr(0, 0, 0), 7)
    assert m2.frames[CFG.frame(0, 0)].dirty


def test_host_write_miss_fills_the_entry_first():
    """A write miss carrying a host op fills the frame from flash, then writes its one line: the entry's
    other lines read back as the entry's (not the previous occupant's); without a host op the write-miss
    rule stays (no fill)."""
    m = fresh_host()
    m.command(C(0, 3, 0, inserted=1, host=1, line=0))                      # 3 into frame 0 (filled)
    r = m.command(C(0, 4, 0, inserted=1, victim_valid=1, victim=3, write=1, host=1, line=0), wdata=7)
    assert r.done["fill"] == 1 and r.flash_reads == [CFG.flash_addr(0, 4, i) for i in range(CFG.lines_per_entry)]
    assert r.host_access == ("dram", 1, CFG.dram_addr(0, 0, 0), 7)
    r = m.command(C(0, 4, 0, hit=1, host=1, line=1))
    assert r.host_rsp["data"] == m.flash[CFG.flash_addr(0, 4, 1)]          # the entry's own line 1
    plain = fresh_host()
    assert plain.command(C(0, 4, 0, inserted=1, write=1)).done["fill"] == 0


def test_bypass_ops_go_to_flash_in_order_with_moves():
    """Hazards (c) and (d) at model level: a bypass read of p after p's writeback reads the written-back
    data; a bypass write of p before p's fill is what the fill brings into the frame."""
    m = fresh_host()
    m.command(C(0, 2, 0, inserted=1, write=1, host=1, line=0), wdata=0x1111)
    m.command(C(0, 9, 0, inserted=1, victim_valid=1, victim=2))            # 2 written back
    r = m.command(C(0, 2, 1, host=1, line=0))                              # bypass read of 2
    assert r.done["bypass"] == 1
    assert r.host_rsp == dict(data=0x1111, write=0, resident=0, bad=0)
    assert r.host_access == ("flash", 0, CFG.flash_addr(0, 2, 0), 0)
    r = m.command(C(0, 2, 1, write=1, host=1, line=2), wdata=0x2222)       # bypass write of 2
    assert r.host_access == ("flash", 1, CFG.flash_addr(0, 2, 2), 0x2222) and r.host_rsp["resident"] == 0
    assert not m.frames[CFG.frame(0, 1)].valid                             # a bypass changes no frame
    r = m.command(C(0, 2, 1, inserted=1))                                  # fill of 2
    # line 1: the write miss filled the entry first, so its own line 1 went back to flash with 2
    assert [v for _, v in r.dram_writes] == [0x1111, 0x1000 + CFG.flash_addr(0, 2, 1), 0x2222]
    assert m.counters["host_bypasses"] == 2 and m.counters["host_writes"] == 2 and m.counters["host_reads"] == 1


def test_bad_command_host_op_has_no_access_and_drops_the_data():
    m = fresh_host()
    m.command(C(0, 5, 0, inserted=1))
    before = (dict(m.dram), dict(m.flash), [(f.valid, f.dirty, f.position) for f in m.frames])
    r = m.command(C(0, 6, 0, hit=1, write=1, host=1, line=0), wdata=0x3333)
    assert r.done["bad"] == 1 and r.host_access is None
    assert r.host_rsp == dict(data=0, write=1, resident=0, bad=1)
    r = m.command(C(0, 5, 0, hit=1, host=1, line=3))                       # line 3 of 3: bad
    assert r.done["bad"] == 1 and r.host_rsp == dict(data=0, write=0, resident=0, bad=1)
    assert "host line 3" in M.check_command(CFG, m.frames[0], C(0, 5, 0, hit=1, host=1, line=3))
    assert M.check_command(CFG, m.frames[0], C(0, 5, 0, hit=1, line=3)) is None       # no host op: line unused
    assert (dict(m.dram), dict(m.flash), [(f.valid, f.dirty, f.position) for f in m.frames]) == before
    assert m.counters["host_wdata_dropped"] == 1 and m.counters["bad_commands"] == 2
    assert m.counters["host_reads"] == m.counters["host_writes"] == 0


def test_commands_without_host_op_are_unchanged_with_host_ops():
    a, b = fresh(), fresh_host()
    for c in (C(0, 1, 0, inserted=1), C(0, 2, 1, inserted=1, write=1), C(0, 1, 0, hit=1, write=1),
              C(0, 3, 0, inserted=1, victim_valid=1, victim=1), C(0, 4, 1, inserted=1, victim_valid=1, victim=2),
              C(0, 7, 0)):
        ra, rb = a.command(c), b.command(c)
        assert ra == rb and rb.host_rsp is None
    assert {k: b.counters[k] for k in M.COUNTERS} == a.counters


@pytest.mark.parametrize("call,match", [
    (lambda m: m.command(C(0, 1, 0, inserted=1, host=1)), "host_ops=True"),
    (lambda m: m.command(C(0, 1, 0, inserted=1), host=1), "host_ops=True"),
])
def test_host_op_without_host_ops_is_a_clear_error(call, match):
    with pytest.raises(CxlkvError, match=match):
        call(fresh())


@pytest.mark.parametrize("kw,match", [
    (dict(write=1), "needs wdata"),
    (dict(write=1, wdata=1 << 16), "does not fit"),
    (dict(write=1, wdata=-1), "does not fit"),
    (dict(write=0, wdata=5), "host read"),
])
def test_host_op_argument_errors(kw, match):
    m = fresh_host()
    wdata = kw.pop("wdata", None)
    with pytest.raises(CxlkvError, match=match):
        m.command(C(0, 1, 0, inserted=1, host=1, **kw), wdata=wdata)
    assert m.counters["commands"] == 0                     # refused before anything changed


@pytest.mark.parametrize("seed", range(4))
def test_host_ops_read_what_was_last_written(seed):
    """Reference check with host ops on every command: each read answers the position's newest line (the
    initial flash content, then the last host write, through every writeback, fill and bypass), and each
    response says resident exactly when the position is resident after the command."""
    rng = random.Random(100 + seed)
    cfg = M.TierMoverConfig(n_queues=2, n_positions=8, frames_per_queue=3, lines_per_entry=2, line_bits=16)
    m = fresh_host(cfg)
    L = cfg.lines_per_entry
    logical = {(q, p): [m.flash[cfg.flash_addr(q, p, i)] for i in range(L)]
               for q in range(cfg.n_queues) for p in range(cfg.n_positions)}
    where = {}
    kinds = set()
    for _ in range(3000):
        q = rng.randrange(cfg.n_queues)
        slots = {s: p for (qq, p), s in where.items() if qq == q}
        write = int(rng.random() < 0.4)
        line = rng.randrange(L)
        x = rng.random()
        if x < 0.15:
            p = rng.randrange(cfg.n_positions)
            if (q, p) in where:
                continue
            cmd = C(q, p, 0, write=write, host=1, line=line)
        elif slots and x < 0.55:
            s = rng.choice(sorted(slots))
            cmd = C(q, slots[s], s, hit=1, write=write, host=1, line=line)
        else:
            p = rng.choice([y for y in range(cfg.n_positions) if (q, y) not in where])
            free = [s for s in range(cfg.frames_per_queue) if s not in slots]
            if free:
                cmd = C(q, p, free[0], inserted=1, write=write, host=1, line=line)
            else:
                s = rng.randrange(cfg.frames_per_queue)
                cmd = C(q, p, s, inserted=1, victim_valid=1, victim=slots[s], write=write, host=1, line=line)
                del where[(q, slots[s])]
            where[(q, p)] = cmd.slot
        wdata = rng.getrandbits(16) if write else None
        r = m.command(cmd, wdata=wdata)                  # a write miss fills first: the other lines stay the entry's
        assert not r.done["bad"]
        assert r.host_rsp["resident"] == int((q, cmd.position) in where)
        kinds.add((r.done["bypass"], r.done["hit"], r.done["writeback"], write))
        if write:
            logical[(q, cmd.position)][line] = wdata
            assert r.host_rsp["data"] == 0
        else:
            assert r.host_rsp["data"] == logical[(q, cmd.position)][line]
    assert m.counters["host_bypasses"] > 0 and m.counters["writebacks"] > 0 and len(kinds) >= 8
