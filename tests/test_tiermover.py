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
                                dict(n_queues=2.5)])
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
