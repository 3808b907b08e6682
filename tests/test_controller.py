"""The controller top in the Verilator harness against its golden model, through the host driver."""
import asyncio
import dataclasses
import random

import pytest

from cxlkv.models import regmap
from cxlkv.sw.driver import ConfigError, SyncDevice
from cxlkv.sw.transport import BusError, ModelTransport, SimTransport, event_records

R = regmap.BY_NAME
PARAMS = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 10}


@pytest.fixture()
def sim():
    """A fresh harness per test (the build is cached; starting takes a fraction of a second)."""
    t = SimTransport(**PARAMS)
    yield t
    asyncio.run(t.close())


def _access(t, op, addr, value=0):
    """(status, value) of one access; BusError becomes its response code."""
    async def go():
        try:
            if op == "r":
                return 0, await t.read32(addr)
            await t.write32(addr, value)
            return 0, 0
        except BusError as exc:
            return exc.resp, 0
    return asyncio.run(go())


def _random_ops(rng, n):
    addrs = [r.offset + 4 * w for r in regmap.REGISTERS for w in range(r.words)]
    addrs += [regmap.MEMORIES[0].offset + 4 * i for i in range(0, 128, 7)] + [0x018, 0x3FC, 0xFFC]
    for _ in range(n):
        addr = rng.choice(addrs)
        if rng.random() < 0.5:
            yield "r", addr, 0
        elif addr == R["FMT_SEL"].offset:
            yield "w", addr, rng.randrange(10)
        else:
            yield "w", addr, rng.choice((0, 1, 2, 5, 1000, 0xFFFF, 1 << 20, (1 << 20) + 1, rng.getrandbits(32)))


#: STATUS.busy is timing (memory sweep after an enable, the divider after a TAU write): the
#: transaction-level model reads it as 0, so the comparison masks it
BUSY = R["STATUS"].field("busy").mask


@pytest.mark.parametrize("bus_throttle", [False, True], ids=["plain", "bus_throttle"])
def test_sim_equals_model_on_random_register_traffic(sim, bus_throttle):
    """3,000 random register reads and writes give the model's answers; with ``bus_throttle`` the
    harness offers AW, W and AR after random gaps and takes B and R under random backpressure, and
    checks in both that the register block's responses wait for their ready (tests/test_vharness.py)."""
    sim.bus_throttle = bus_throttle
    model = ModelTransport(**PARAMS)
    rng = random.Random(11)
    mismatches = []
    for i, (op, addr, value) in enumerate(_random_ops(rng, 3000)):
        got, exp = _access(sim, op, addr, value), _access(model, op, addr, value)
        if op == "r" and addr == R["STATUS"].offset:
            got = (got[0], got[1] & ~BUSY)
        if got != exp:
            mismatches.append((i, op, hex(addr), value, got, exp))
    assert not mismatches, mismatches[:5]


def test_the_comparison_can_fail(sim):
    """Negative test: a model with another geometry must disagree with the harness."""
    wrong = ModelTransport(n_layers=5, n_kv_heads=2, entries_log2=10)
    assert _access(sim, "r", R["GEOMETRY"].offset) != _access(wrong, "r", R["GEOMETRY"].offset)


def test_driver_same_answers_over_sim_and_model(sim):
    results = []
    for t in (sim, ModelTransport(**PARAMS)):
        dev = SyncDevice.__new__(SyncDevice)
        dev._loop = asyncio.new_event_loop()
        from cxlkv.sw.driver import Device
        dev._dev = dev._loop.run_until_complete(Device.open(t))
        info = dev.info()
        info.pop("transport")
        dev.configure(alpha=0x3000, tau=777, queue_budget=512)
        with pytest.raises(ConfigError):
            dev.configure(queue_budget=0)
        dev.set_format(7, 1)
        results.append((info, dev.config(), dev.status(), dev.get_format(7), dev.counters()))
        dev._loop.close()
    assert results[0] == results[1]
    assert results[0][0]["queues"] == 8


def test_full_geometry_elaborates():
    """The Llama-70B top with the tracker's memories as ports elaborates (its Verilog is generated and
    linted as `controller_llama70b` by tests/test_lint.py); 'auto' leaves the tracker out of a geometry
    whose memories do not fit on chip (the FPGA board tops)."""
    from amaranth.hdl import Fragment

    from cxlkv.hdl.controller import Controller
    top = Controller(n_layers=80, n_kv_heads=8, entries_log2=17, tracker="external", max_budget=256,
                     tiers="external", tier_lines=8, tier_line_bits=512)
    Fragment.get(top, None)
    ports = set(top.signature.members)
    assert {"event", "decision", "access", "hint", "route"} <= ports
    assert {"dram_req", "dram_resp", "flash_req", "flash_resp"} <= ports      # the tier mover's memories
    assert top._memory_ports() and set(top._memory_ports()) <= ports    # the tracker's memory ports, whichever it has
    from cxlkv.models.controller import tracker_placement
    assert tracker_placement("auto", 32 * 8, 1 << 13) == "none"
    assert tracker_placement("auto", 4 * 2, 1 << 10) == "onchip"
    with pytest.raises(ValueError, match="tracker must be"):
        tracker_placement("dram", 8, 1024)


# ------------------------------------------------------------------ the tracker in the top: replay

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from cxlkv.errors import CxlkvError  # noqa: E402
from cxlkv.models import policy as P  # noqa: E402
from cxlkv.models.trace import Trace, load_trace, save_trace  # noqa: E402
from cxlkv.sw.driver import DeviceError  # noqa: E402
from cxlkv.sw.transport import EVENT_DTYPE, FLAG_NO_VICTIM, FLAG_VICTIM, EventPortError, MmioTransport  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "traces" / "tiny_llama_stdlib_thr001.npz"
COUNTS = ("events", "reads", "read_hits", "writes", "fills", "evictions", "no_victim", "hit_rate",
          "attention_recall", "prefetches", "prefetch_hits")


def _device(t):
    dev = SyncDevice.__new__(SyncDevice)
    dev._loop = asyncio.new_event_loop()
    from cxlkv.sw.driver import Device
    dev._dev = dev._loop.run_until_complete(Device.open(t))
    return dev


@pytest.fixture()
def sim_dev(sim):
    dev = _device(sim)
    yield dev
    dev._loop.close()


def _codes(decisions):
    """policy.replay's record_victims codes from decision records."""
    f = decisions["flags"]
    return np.where(f & FLAG_VICTIM, decisions["victim"].astype(np.int64), np.where(f & FLAG_NO_VICTIM, -2, -1))


def _check_replay(dev, trace, entries, via="events", **params):
    got = dev.replay(trace, entries, via=via, **params)
    res = P.replay(trace, "hw", entries, record_victims=True, **params)
    exp = res.summary()
    assert {k: got[k] for k in COUNTS} == {k: exp[k] for k in COUNTS}, (entries, params)
    # and every decision, event for event: the victim the whole top chose is the policy's
    assert np.array_equal(_codes(dev.last_decisions), res.victims), (entries, params)
    return got


def random_trace(rng, n=3000, n_layers=3, n_kv_heads=2, n_pos=200, write_frac=0.1):
    """A conformant trace: steps non-decreasing (mostly repeats, jumps up to 60), hot and cold positions."""
    steps = np.cumsum(np.where(rng.random(n) < 0.1, rng.integers(1, 61, n), 0)).astype(np.int32)
    hot = rng.integers(0, n_pos, 12)
    pos = np.where(rng.random(n) < 0.5, rng.choice(hot, n), rng.integers(0, n_pos, n)).astype(np.uint32)
    op = (rng.random(n) < write_frac).astype(np.uint8)
    score = np.where(op == 0, rng.random(n) ** 3, 0).astype(np.float32)
    return Trace(steps, rng.integers(0, n_layers, n).astype(np.uint16), rng.integers(0, n_kv_heads, n).astype(np.uint16),
                 pos, op, score, n_layers, n_kv_heads).validate()


def test_replay_shipped_trace_sim_equals_policy_hw(sim_dev):
    """Issue 9's bar: `ctl --transport sim replay` counts = `policy replay --policy hw`, on a shipped trace;
    two budgets on one device (the second replay starts from the cleared state, CONTROL.enable 0 -> 1)."""
    trace = load_trace(SHIPPED)
    for entries in (P.entries_from_budget(trace, 10), 8):
        got = _check_replay(sim_dev, trace, entries)
        assert got["evictions"] > 0 and got["stall_cycles"] == 0 and got["decision_errors"] == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replay_random_traces_sim_equals_policy_hw(sim_dev, seed, monkeypatch):
    if seed == 3:      # many harness messages: the tracker's state carries across them
        monkeypatch.setattr("cxlkv.sw.transport.EVENTS_PER_MESSAGE", 700)
    rng = np.random.default_rng(seed)
    trace = random_trace(rng)
    settings = [(4, {}), (9, {"hw_pinned": 3, "hw_alpha": 0x7000, "hw_tau": 3}), (2, {"hw_pinned": 2, "hw_tau": 5000}),
                # the tracker registers (TLN_R, TLN_D, HW_BUCKET, HW_SAMPLE) away from their defaults
                (6, {"hw_rank_tau": 4, "hw_rank_tau_long": 16, "hw_bucket_bits": 1, "hw_write_sample": 0x4000,
                     "hw_read_credit": 0x0800}),
                (5, {"hw_rank_tau": 30, "hw_rank_tau_long": 0, "hw_bucket_bits": 4, "hw_pinned": 1})]
    for entries, params in settings:
        _check_replay(sim_dev, trace, entries, **params)


def test_replay_with_gaps_and_decision_backpressure(sim, sim_dev):
    """The same equality with the harness throttling: events offered after random gaps (8 cycles
    on average), the decision stream stalled half of the cycles at random; it takes more cycles. (C = 32:
    at C = 5 nearly every event moves an entry and the tier mover, not the harness, sets the pace.)"""
    trace = random_trace(np.random.default_rng(9), n=2000)
    c0 = sim.cycles
    _check_replay(sim_dev, trace, 32, hw_pinned=2)
    c1 = sim.cycles
    sim.throttle = True
    _check_replay(sim_dev, trace, 32, hw_pinned=2)
    assert sim.cycles - c1 > c1 - c0 + len(trace)       # the throttle really stalled the tracker


def test_replay_model_transport_equals_policy_hw():
    dev = _device(ModelTransport(**PARAMS))
    rng = np.random.default_rng(7)
    _check_replay(dev, random_trace(rng, n=2000), 5, hw_pinned=1)
    dev._loop.close()


def test_the_replay_comparison_can_fail(sim_dev):
    """Negative check: the same comparison against the policy at another budget must see a difference."""
    trace = random_trace(np.random.default_rng(4))
    got = sim_dev.replay(trace, 6)
    other = P.replay(trace, "hw", 7, record_victims=True)
    assert {k: got[k] for k in COUNTS} != {k: other.summary()[k] for k in COUNTS}
    assert not np.array_equal(_codes(sim_dev.last_decisions), other.victims)


def test_replay_refusals(sim_dev):
    rng = np.random.default_rng(5)
    base = random_trace(rng, n=50)
    too_big = Trace(base.step, base.layer, base.head, base.pos, base.op, base.score, 5, 2)
    with pytest.raises(DeviceError, match="exceeds the device"):
        sim_dev.replay(too_big, 4)
    far = Trace(base.step, base.layer, base.head, base.pos + 1000, base.op, base.score, 3, 2)
    with pytest.raises(DeviceError, match="positions up to"):
        sim_dev.replay(far, 4)
    neg = Trace(base.step - 10, base.layer, base.head, base.pos, base.op, base.score, 3, 2)
    with pytest.raises(DeviceError, match="negative steps"):
        sim_dev.replay(neg, 4)
    with pytest.raises(ConfigError, match=r"need 356 deadline buckets per queue; the device's ring has 128"):
        sim_dev.replay(base, 4, hw_bucket_bits=1)      # dense mode's τ = 64 at 2-step buckets
    with pytest.raises(ConfigError, match="prefetch window is at most 64"):
        sim_dev.replay(base, 4, window=65)
    with pytest.raises(ConfigError, match="prefetch_trigger_all must be"):
        sim_dev.replay(base, 4, window=2, prefetch_trigger_all=2)
    with pytest.raises(ConfigError, match="pins at most"):
        sim_dev.replay(base, 4, hw_pinned=100)
    with pytest.raises(ConfigError, match="entries"):
        sim_dev.replay(base, 0)


@pytest.mark.parametrize("kind", ["sim", "model"])
def test_ring_error_holds_events(sim, kind):
    """TLN/HW_BUCKET needing more deadline buckets than the ring: STATUS.ring_error, events wait."""
    t = sim if kind == "sim" else ModelTransport(**PARAMS)
    dev = _device(t)
    assert dev.read_fields("HW_RING")["buckets_log2"] == 7
    dev.configure(enable=1)
    assert dev.status()["ring_error"] == 0
    with pytest.raises(ConfigError, match="need 158 deadline buckets per queue; the device's ring has 128"):
        dev.configure(tln_d=20000)             # (4095 * 20000 >> 16 >> 3) + 2 = 158 > 128: the driver refuses
    assert dev.config()["tln_d"] != 20000      # nothing written
    dev.write_fields("TLN_D", value=20000)     # past the driver's check: the device holds its events
    assert dev.status()["ring_error"] == 1 and dev.status()["cfg_error"] == 1
    rec = np.zeros(2, EVENT_DTYPE)
    with pytest.raises(EventPortError, match="stalled after 0 of 2"):
        asyncio.run(t.events(rec))
    dev.configure(bucket_bits=4)               # 79 + 2 buckets: fits
    assert dev.status()["ring_error"] == 0
    assert len(asyncio.run(t.events(rec))) == 2
    dev._loop.close()


def test_bigger_ring_build_takes_longer_time_constants():
    dev = _device(ModelTransport(**PARAMS, n_buckets=512))
    trace = random_trace(np.random.default_rng(12), n=800)
    _check_replay(dev, trace, 5, hw_bucket_bits=1)
    dev._loop.close()
    with pytest.raises(ValueError, match="power of two"):
        ModelTransport(n_buckets=100)


@pytest.mark.parametrize("kind", ["sim", "model"])
def test_event_port_errors_are_the_same_on_sim_and_model(sim, kind):
    t = sim if kind == "sim" else ModelTransport(**PARAMS)
    rec = np.zeros(3, EVENT_DTYPE)
    rec["position"] = [1, 2, 3]
    with pytest.raises(EventPortError, match="stalled after 0 of 3"):      # CONTROL.enable = 0 (reset)
        asyncio.run(t.events(rec))
    bad = rec.copy()
    bad["position"][1] = 1 << 10                                          # beyond entries_log2 = 10
    with pytest.raises(EventPortError, match="record 1 does not fit"):
        asyncio.run(t.events(bad))


def test_events_without_an_event_port(tmp_path):
    f = tmp_path / "bar"
    f.write_bytes(bytes(4096))
    t = MmioTransport(str(f))
    with pytest.raises(CxlkvError, match="cannot inject access events"):
        asyncio.run(t.events(np.zeros(1, EVENT_DTYPE)))
    asyncio.run(t.close())
    none = ModelTransport(n_layers=32, n_kv_heads=8, entries_log2=13)    # 'auto': too large for on-chip RAM
    assert _access(none, "r", R["CAPS"].offset) == (0, 0)
    with pytest.raises(EventPortError, match="no tracker"):
        asyncio.run(none.events(np.zeros(1, EVENT_DTYPE)))


def test_counters_clear_and_caps(sim_dev):
    trace = random_trace(np.random.default_rng(6), n=300)
    sim_dev.replay(trace, 4)
    assert sim_dev.counters()["reads"] > 0
    assert "tracker" in sim_dev.info()["caps"]
    sim_dev.clear_counters()
    assert not any(sim_dev.counters().values())


def test_cli_ctl_replay_prints_policy_replay_counts(tmp_path, capsys):
    from cxlkv.sw.cli import main
    path = tmp_path / "t.npz"
    save_trace(path, random_trace(np.random.default_rng(8), n=1500))
    outs = []
    for argv in (["ctl", "--transport", "sim", "replay", str(path), "--entries", "10%", "--json"],
                 ["ctl", "--transport", "model", "replay", str(path), "--entries", "10%", "--json"],
                 ["ctl", "--transport", "sim", "replay", str(path), "--entries", "10%", "--via", "hdm", "--json"],
                 ["policy", "replay", str(path), "--policy", "hw", "--entries", "10%", "--json"]):
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    outs = outs[:2] + outs[3:] + outs[2:3]          # policy's at index 2, the HDM replay last
    assert outs[3]["via"] == "hdm"
    for o in outs[:2] + outs[3:]:
        assert {k: o[k] for k in ("entries", *COUNTS)} == {k: outs[2][k] for k in ("entries", *COUNTS)}
    # the tracker's parameters are registers now: non-default ones replay equal too
    params = ["--param", "hw_rank_tau=6", "--param", "hw_bucket_bits=4", "--param", "hw_read_credit=512",
              "--param", "hw_write_sample=30000"]
    outs = []
    for argv in (["ctl", "--transport", "sim", "replay", str(path), "--entries", "7", "--json", *params],
                 ["policy", "replay", str(path), "--policy", "hw", "--entries", "7", "--json", *params]):
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert {k: outs[0][k] for k in COUNTS} == {k: outs[1][k] for k in COUNTS}
    assert outs[0]["params"] == outs[1]["params"]
    assert main(["ctl", "--transport", "model", "replay", str(path), "--entries", "4", "--param", "hw_rank_tau=9000"]) == 2
    assert "deadline buckets per queue" in capsys.readouterr().err
    # another build of the device: positions up to 199 do not fit 2^7
    assert main(["ctl", "--transport", "model", "--build", "entries_log2=7", "replay", str(path), "--entries", "4"]) == 2
    assert "exceeds the device's (4 x 2, 128 positions)" in capsys.readouterr().err
    assert main(["ctl", "--transport", "model", "--build", "colour=3", "info"]) == 2
    assert "bad --build 'colour=3': 'colour' is not a build parameter; valid: n_layers, " in capsys.readouterr().err
    assert main(["ctl", "--transport", "model", "--build", "host_data=2", "info"]) == 2
    assert "host_data is 0 or 1" in capsys.readouterr().err
    assert main(["ctl", "--transport", "model", "--build", "bisnoop=1", "info"]) == 2
    assert "bisnoop needs the host data path" in capsys.readouterr().err


def test_ctl_build_refuses_a_geometry_its_registers_cannot_report(capsys):
    """A geometry GEOMETRY/GEOMETRY2 cannot hold is refused by name and range, not wrapped into another
    (n_layers = 70000 would read back as 4464); the model and the RTL share the check."""
    from cxlkv.hdl.controller import Controller
    from cxlkv.sw.cli import main
    # a geometry its registers cannot report is refused, not wrapped (GEOMETRY's 16-bit fields)
    for build, msg in (("n_layers=70000", "n_layers must be an integer in 1 .. 65535, got 70000"),
                       ("entries_log2=100", "entries_log2 must be an integer in 1 .. 32, got 100"),
                       ("entries_log2=-1", "entries_log2 must be an integer in 1 .. 32, got -1"),
                       ("bitags=0", "bitags must be an integer in 1 .. 255, got 0")):
        assert main(["ctl", "--transport", "model", "--build", build, "info"]) == 2
        assert msg in capsys.readouterr().err
    # the board's build as the FPGA flow's --param writes it
    assert main(["ctl", "--transport", "model", "--build", "tracker_select=matrix", "--build", "max_budget=16",
                 "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queues"] == 8
    with pytest.raises(ValueError, match="n_kv_heads must be an integer in 1 .. 65535"):
        Controller(n_kv_heads=0)


# ------------------------------------------------------------------ the phase detector in the top

def _phase_state(dev):
    return (dev.status()["phase"], dev.read_reg("PHASE_CHANGES"), dev.read_fields("IRQ_STATUS")["phase_change"])


@pytest.mark.parametrize("kind", ["sim", "model"])
def test_phase_detector_sees_the_accepted_events(sim, kind):
    """Prefill (writes) then decode (reads): STATUS.phase, PHASE_CHANGES and IRQ_STATUS.phase_change
    follow models.phase on the accepted events; the override forces the phase and counts too."""
    from cxlkv.models import phase as PH
    t = sim if kind == "sim" else ModelTransport(**PARAMS)
    dev = _device(t)
    assert "phase" in dev.info()["caps"]
    cfg = PH.PhaseConfig(ratio=3, window_log2=4, hysteresis=2)
    dev.configure(phase_ratio=cfg.ratio, phase_window_log2=cfg.window_log2, phase_hysteresis=cfg.hysteresis,
                  enable=1, queue_budget=8)
    dev.write_fields("IRQ_ENABLE", phase_change=1)
    rng = np.random.default_rng(3)
    ops = np.concatenate([rng.random(100) < 0.9, rng.random(200) < 0.05, rng.random(60) < 0.9]).astype(np.uint8)
    rec = np.zeros(len(ops), EVENT_DTYPE)
    rec["position"] = rng.integers(0, 64, len(ops))
    rec["layer"], rec["head"], rec["write"] = rng.integers(0, 4, len(ops)), rng.integers(0, 2, len(ops)), ops
    expected = PH.run(ops, cfg)
    changes = int(np.count_nonzero(np.diff([0, *expected])))
    seen = []
    for lo in range(0, len(ops), 40):           # the state after each batch
        asyncio.run(t.events(rec[lo:lo + 40]))
        seen.append(dev.status()["phase"])
    assert seen == [expected[min(lo + 40, len(ops)) - 1] for lo in range(0, len(ops), 40)]
    # negative: the same check against a detector configured otherwise (hysteresis 100) must fail
    other = PH.run(ops, PH.PhaseConfig(ratio=3, window_log2=4, hysteresis=100))
    assert seen != [other[min(lo + 40, len(ops)) - 1] for lo in range(0, len(ops), 40)]
    assert changes >= 2 and _phase_state(dev) == (expected[-1], changes, 1)
    dev.write_fields("IRQ_STATUS", phase_change=1)
    dev.configure(phase_override=2 - expected[-1])     # force the other phase
    assert _phase_state(dev) == (1 - expected[-1], changes + 1, 1)
    dev.clear_counters()
    assert dev.read_reg("PHASE_CHANGES") == 0
    dev._loop.close()



# ------------------------------------------------------------------ the cold list

@pytest.mark.parametrize("kind", ["sim", "model"])
def test_cold_list_holds_every_eviction(sim, kind):
    """Each eviction's victim, in order, in the CHMU entry format; threshold IRQ; a full ring drops
    (counted, overflow IRQ, a gap in the counts); drain hands the entries back."""
    from cxlkv.models.controller import decode_coldlist_entry
    t = sim if kind == "sim" else ModelTransport(**PARAMS)
    dev = _device(t)
    trace = random_trace(np.random.default_rng(21), n=400)
    dev.configure(coldlist_threshold=10)
    dev.write_fields("IRQ_ENABLE", coldlist_fill=1, coldlist_overflow=1)
    dev.replay(trace, 40)
    dec = dev.last_decisions
    victims = [(int(trace.queue[i]), int(dec["victim"][i])) for i in np.flatnonzero(dec["flags"] & FLAG_VICTIM)]
    assert 10 <= len(victims) < 63
    assert dev.cold_list()["pending"] == len(victims)
    irq = dev.read_fields("IRQ_STATUS")
    assert irq["coldlist_fill"] == 1 and irq["coldlist_overflow"] == 0
    got = dev.drain_cold_list()
    assert [(e["queue"], e["position"]) for e in got] == victims
    assert [e["count"] for e in got] == list(range(len(victims)))
    assert got[0] == {**decode_coldlist_entry(got[0]["entry"], 10, 2), "entry": got[0]["entry"]}
    assert dev.cold_list()["pending"] == 0 and dev.drain_cold_list() == []
    # negative: the same entries against the victims shifted by one must differ
    assert [(e["queue"], e["position"]) for e in got] != victims[1:] + victims[:1]

    # overflow: many evictions without draining
    big = random_trace(np.random.default_rng(22), n=3000)
    dev.replay(big, 3)
    n = int(((dev.last_decisions["flags"] & FLAG_VICTIM) != 0).sum())
    assert n > 63
    state = dev.cold_list()
    assert state["pending"] == 63 and dev.read_reg("COLDLIST_DROPS") == n - 63
    assert dev.read_fields("IRQ_STATUS")["coldlist_overflow"] == 1
    got2 = dev.drain_cold_list()
    assert [e["count"] for e in got2] == [(len(victims) + i) % 65536 for i in range(63)]
    dev._loop.close()


@pytest.mark.parametrize("extra", [0, 1])
def test_cold_list_fill_irq_at_its_threshold(sim, extra):
    """IRQ_STATUS.coldlist_fill rises with the entry that makes COLDLIST_THRESHOLD entries pending,
    not one entry earlier or later: a trace leaving k pending raises it at threshold k, not k + 1."""
    trace = random_trace(np.random.default_rng(21), n=400)
    ref = _device(ModelTransport(**PARAMS))
    ref.replay(trace, 40)
    k = ref.cold_list()["pending"]
    ref._loop.close()
    assert 10 <= k < 62
    fill = []
    for t in (sim, ModelTransport(**PARAMS)):
        dev = _device(t)
        dev.configure(coldlist_threshold=k + extra)
        dev.write_fields("IRQ_ENABLE", coldlist_fill=1)
        dev.replay(trace, 40)
        assert dev.cold_list()["pending"] == k
        fill.append(dev.read_fields("IRQ_STATUS")["coldlist_fill"])
        dev._loop.close()
    assert fill == [int(extra == 0)] * 2


def test_cold_list_equal_on_sim_and_model(sim):
    outs = []
    for t in (sim, ModelTransport(**PARAMS)):
        dev = _device(t)
        dev.configure(coldlist_threshold=5)
        dev.replay(random_trace(np.random.default_rng(23), n=1500), 6, hw_pinned=2)
        outs.append((dev.cold_list(), dev.read_fields("IRQ_STATUS"), dev.read_reg("COLDLIST_DROPS"),
                     dev.drain_cold_list()))
        dev._loop.close()
    assert outs[0] == outs[1] and outs[0][3]


def test_cli_stats_and_coldlist(capsys):
    from cxlkv.sw.cli import main
    assert main(["ctl", "--transport", "model", "stats", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["coldlist.pending"] == 0 and out["coldlist.depth"] == 64 and "coldlist_drops" in out
    assert main(["ctl", "--transport", "model", "coldlist"]) == 0
    assert "(empty)" in capsys.readouterr().out


# ------------------------------------------------------------------ the HDM decode in front of the tracker

HDM_COUNTER_REGS = ("HDM_ACCESSES", "HDM_EVENTS", "DECODE_ERRORS", "BEYOND_GEOMETRY", "HINTS", "BAD_HINTS",
                    "HINTS_USED", "DEFAULT_SAMPLES", "HINT_DROPS", "HINT_ORPHANS", "HDM_STEP_ERRORS")


def test_replay_via_hdm_shipped_trace_sim_equals_policy_hw(sim_dev):
    """The host's way in: line accesses and hints through the HDM decode; counts and every victim
    equal `policy replay --policy hw`."""
    trace = load_trace(SHIPPED)
    got = _check_replay(sim_dev, trace, P.entries_from_budget(trace, 10), via="hdm")
    assert got["via"] == "hdm" and got["decision_errors"] == 0
    assert sim_dev.read_reg("HDM_EVENTS") == len(trace) and sim_dev.read_reg("DECODE_ERRORS") == 0


@pytest.mark.parametrize("throttle", [False, True])
def test_hdm_path_sim_equals_model(sim, throttle):
    """Accesses over every line, hints before every read, some outside the window or beyond the
    geometry in use, bad hints: decisions, routes, HDM counters and status equal on sim and model."""
    from cxlkv.models import hdm as MH
    from cxlkv.sw.transport import access_records
    sim.throttle = throttle
    trace = random_trace(np.random.default_rng(31), n=600)
    geom = MH.HdmGeometry(4, 2, 1024)
    full = MH.HdmConfig.packed(geom, base=0x1_0000_0000)
    cfg = MH.HdmConfig.packed(geom, base=full.base, n_layers=3)           # 3 layers in use ...
    cfg = dataclasses.replace(cfg, size=full.size)                        # ... in a 4-layer window: layer 3 is beyond
    items = MH.stimulus_from_trace(trace, geom, cfg, lines=[0, 3, 7], hint_every_read=True)
    rng = np.random.default_rng(32)
    for i in sorted(rng.choice(len(items), 40, replace=False), reverse=True):
        items.insert(i, ("access", MH.Access(int(rng.integers(0, 1 << 40)) & ~63, 0)))           # outside
        items.insert(i, ("access", MH.Access(cfg.address(3, 1, 5), 1)))                           # beyond
        items.insert(i, ("hint", MH.Hint(0, 1, 3, 0, 9, 100)))                                   # bad hint
    rec = access_records(items)
    outs = []
    for t in (sim, ModelTransport(**PARAMS)):
        dev = _device(t)
        dev.configure(enable=1, queue_budget=6, pin_first=1)
        dev.configure_hdm(cfg)
        dec, routes = asyncio.run(t.accesses(rec))
        counters = dev.counters()
        outs.append((dec.tobytes(), routes.tobytes(), {r: dev.read_reg(r) for r in HDM_COUNTER_REGS},
                     counters, dev.status(), dev.read_fields("HDM_STEP"), dev.read_fields("HINTS_PENDING")))
        dev._loop.close()
    assert outs[0][2] == outs[1][2], (outs[0][2], outs[1][2])
    for a, b in zip(outs[0], outs[1]):
        assert a == b
    counts = outs[0][2]
    assert counts["HDM_EVENTS"] == len(trace) and counts["BEYOND_GEOMETRY"] == 40 and counts["BAD_HINTS"] == 40
    assert counts["DECODE_ERRORS"] == 80 and counts["HINTS_USED"] > 0
    # negative: the decisions are not those of the direct port at another budget
    other = ModelTransport(**PARAMS)
    dev = _device(other)
    dev.configure(enable=1, queue_budget=7, pin_first=1)
    dev.configure_hdm(cfg)
    assert asyncio.run(other.accesses(rec))[0].tobytes() != outs[0][0]
    dev._loop.close()


def test_hdm_refused_configuration_and_errors(sim):
    from cxlkv.models import hdm as MH
    for t in (sim, ModelTransport(**PARAMS)):
        dev = _device(t)
        assert "hdm" in dev.info()["caps"]
        with pytest.raises(ConfigError, match="refuses the HDM configuration"):
            dev.configure_hdm(MH.HdmConfig(size=1 << 20, n_layers=9))           # beyond the built 4 layers
        assert dev.status()["hdm_cfg_error"] == 1
        dev.write_fields("HDM_GEOMETRY", n_layers=0)                             # 0: the built geometry
        assert dev.status()["hdm_cfg_error"] == 0
        from cxlkv.sw.transport import access_records
        rec = access_records([("hint", MH.Hint(1, 1, 9, 0, 0, 5))])            # layer 9 does not fit 2 bits
        with pytest.raises(EventPortError, match="record 0 does not fit"):
            asyncio.run(t.accesses(rec))
        with pytest.raises(EventPortError, match="stalled"):                    # CONTROL.enable = 0
            asyncio.run(t.accesses(access_records([("access", MH.Access(0))])))
        dev._loop.close()


def test_budget_beyond_the_slots_is_flagged_and_refused():
    """A build with fewer tracker slots than positions: a larger QUEUE_BUDGET sets ring_error and
    holds events (model; the RTL is the same check), and the driver refuses it first."""
    t = ModelTransport(**PARAMS, max_budget=16)
    dev = _device(t)
    assert dev.read_fields("HW_RING") == {"buckets_log2": 7, "slots_log2": 4}
    with pytest.raises(ConfigError, match="queue_budget = 17: the device's tracker runs at most 16 entries"):
        dev.configure(enable=1, queue_budget=17)
    dev.configure(enable=1)
    dev.write_fields("QUEUE_BUDGET", entries=17)            # past the driver's check
    assert dev.status()["ring_error"] == 1
    with pytest.raises(EventPortError, match="stalled"):
        asyncio.run(t.events(np.zeros(1, EVENT_DTYPE)))
    dev.configure(queue_budget=16)
    assert dev.status()["ring_error"] == 0
    with pytest.raises(ConfigError, match="at most 16 entries per queue"):
        dev.replay(random_trace(np.random.default_rng(3), n=50), 17)
    _check_replay(dev, random_trace(np.random.default_rng(3), n=500), 16)
    dev._loop.close()


@pytest.mark.parametrize("kind", ["sim", "model"])
def test_hints_pushed_through_registers(sim, kind):
    """HINT_STEP/HINT_ENTRY/HINT_PUSH instead of the hint port: the same events as the port
    (every read's sample from its pushed hint); drops counted and reported."""
    from cxlkv.models import hdm as MH
    from cxlkv.sw.driver import DeviceError
    from cxlkv.sw.transport import access_records
    t = sim if kind == "sim" else ModelTransport(**PARAMS)
    dev = _device(t)
    with pytest.raises(DeviceError, match="dropped the hint"):          # CONTROL.enable = 0
        dev.send_hint(1)
    trace = random_trace(np.random.default_rng(41), n=120)
    geom = MH.HdmGeometry(4, 2, 1024)
    cfg = MH.HdmConfig.packed(geom)
    items = MH.stimulus_from_trace(trace, geom, cfg, lines="first", hint_every_read=True)
    dev.configure(enable=1, queue_budget=5)
    dev.configure_hdm(cfg)
    dec = []
    for kind_, x in items:
        if kind_ == "hint":
            if x.has_sample:
                dev.send_hint(x.step, x.layer, x.head, x.position, x.sample)
            else:
                dev.send_hint(x.step)
        else:
            dec.append(asyncio.run(t.accesses(access_records([(kind_, x)])))[0])
    got = np.concatenate(dec)
    assert dev.read_reg("HINTS_USED") == int((trace.op == 0).sum()) and dev.read_reg("DEFAULT_SAMPLES") == 0
    res = P.replay(trace, "hw", 5, record_victims=True, hw_pinned=dev.read_fields("PINS")["first_n"])
    assert np.array_equal(_codes(got), res.victims)
    assert dev.status()["hint_busy"] == 0 and dev.read_reg("HINT_PUSH_DROPS") == 1
    with pytest.raises(DeviceError, match="dropped the hint"):          # layer 300 is wider than 2 bits
        dev.send_hint(5, 300 % 256, 0, 0, 7)
    assert dev.read_reg("HINT_PUSH_DROPS") == 2
    dev._loop.close()


# ------------------------------------------------------------------ the tier mover behind the tracker

from cxlkv.models import tiermover as TM  # noqa: E402
from cxlkv.sw.driver import TIER_REPLAY_KEYS  # noqa: E402
from cxlkv.sw.transport import FLAG_ERROR, FLAG_HIT, FLAG_INSERTED  # noqa: E402

TIER_MODEL_KEYS = ("commands", "hits", "fills", "writebacks", "clean_drops", "bypasses", "bad_commands",
                   "lines_to_flash", "lines_to_dram")


def _tier_expected(trace, decisions, n_kv_heads=2, n_positions=1 << 10, frames=1 << 10, lines=2, writes=None):
    """models/tiermover.py on the device's own decision stream: each decision as the tier mover's command,
    with the slot the tracker's rule gives (docs/tracker.md: a free slot is the resident count, a victim's
    slot is reused, slots are never freed), derived here from the decisions alone."""
    tm = TM.TierMoverModel(TM.TierMoverConfig(PARAMS["n_layers"] * n_kv_heads, n_positions, frames, lines, 32))
    slots, nres = {}, {}
    writes = trace.op != 0 if writes is None else writes
    for i, (flags, victim) in enumerate(zip(decisions["flags"].tolist(), decisions["victim"].tolist())):
        q = int(trace.layer[i]) * n_kv_heads + int(trace.head[i])
        p = int(trace.pos[i])
        hit, ins, vv = bool(flags & FLAG_HIT), bool(flags & FLAG_INSERTED), bool(flags & FLAG_VICTIM)
        if flags & FLAG_ERROR or not (hit or ins):
            tm.command(TM.Command(queue=0, position=p, slot=0, write=int(writes[i])))
            continue
        if hit:
            slot = slots[(q, p)]
        elif vv:
            slot = slots.pop((q, victim))
        else:
            slot = nres.get(q, 0)
            nres[q] = slot + 1
        if ins:
            slots[(q, p)] = slot
        tm.command(TM.Command(queue=q, position=p, slot=slot, hit=int(hit), inserted=int(ins), victim_valid=int(vv),
                              victim=victim if vv else 0, write=int(writes[i])))
    return {f"tier_{k}": tm.counters[k] for k in TIER_MODEL_KEYS}


def test_tier_mover_counters_equal_the_tier_model(sim_dev):
    """Each decision of a replay over `sim` became a tier-mover command: its counters (fills, writebacks,
    clean drops, lines, ...) equal models/tiermover.py on the same decision stream, none refused; the model
    transport gives the same; the policy's counts are untouched. Negative: the same stream with every event
    taken as a read gives other counters (no write misses, hence no writebacks)."""
    trace = load_trace(SHIPPED)
    with SyncDevice(ModelTransport(**PARAMS)) as model:
        for entries in (P.entries_from_budget(trace, 10), 8):
            got = _check_replay(sim_dev, trace, entries)
            exp = _tier_expected(trace, sim_dev.last_decisions)
            assert {k: got[k] for k in exp} == exp, entries
            assert got["tier_commands"] == len(trace) and got["tier_bad_commands"] == 0
            assert got["tier_proto_errors"] == 0
            assert got["tier_writebacks"] > 0 and got["tier_clean_drops"] > 0 and got["tier_fills"] == got["fills"]
            assert got["tier_writebacks"] + got["tier_clean_drops"] == got["evictions"]
            m = model.replay(trace, entries)
            assert {k: m[k] for k in TIER_REPLAY_KEYS} == {k: got[k] for k in TIER_REPLAY_KEYS}, entries
            wrong = _tier_expected(trace, sim_dev.last_decisions, writes=np.zeros(len(trace), bool))
            assert wrong != exp


def test_tier_mover_on_random_traces(sim_dev):
    """Random traces with 30 % writes, pins: sim = models/tiermover.py on its decisions = the model transport."""
    rng = np.random.default_rng(21)
    trace = random_trace(rng, n=3000, n_layers=4, write_frac=0.3)
    with SyncDevice(ModelTransport(**PARAMS)) as model:
        for entries, params in ((4, {}), (9, {"hw_pinned": 3})):
            got = _check_replay(sim_dev, trace, entries, **params)
            exp = _tier_expected(trace, sim_dev.last_decisions)
            assert {k: got[k] for k in exp} == exp
            m = model.replay(trace, entries, **params)
            assert {k: m[k] for k in TIER_REPLAY_KEYS} == {k: got[k] for k in TIER_REPLAY_KEYS}


def test_error_decisions_are_tier_bypasses():
    """A layer beyond the geometry (a 3-layer build: layer 3 fits the event port) makes an error decision:
    the tier mover counts a bypass, not a refused command; sim and model give the same counters."""
    geo = {"n_layers": 3, "n_kv_heads": 2, "entries_log2": 10}
    rec = np.zeros(40, EVENT_DTYPE)
    rec["layer"] = np.where(np.arange(40) % 4 == 0, 3, 1)
    rec["position"] = np.arange(40) % 9
    rec["step"] = 1
    out = []
    for t in (SimTransport(**geo), ModelTransport(**geo)):
        dev = _device(t)
        try:
            dev.configure(queue_budget=4, enable=1)
            dec = dev._loop.run_until_complete(t.events(rec))
            dev.settle()
            out.append(dev.counters())
        finally:
            dev._loop.run_until_complete(t.close())
            dev._loop.close()
        assert ((dec["flags"] & FLAG_ERROR) != 0).sum() == 10
    c = out[0]
    assert c == out[1]                                                              # sim = model
    assert c["bad_events"] == 10
    assert c["tier_bypasses"] == 10 + c["no_victim"] and c["tier_bad_commands"] == 0 and c["tier_commands"] == 40
    assert c["tier_fills"] > 0 and c["tier_hits"] == c["read_hits"] > 0          # every event a read:
    assert c["tier_fills"] + c["tier_hits"] + c["tier_bypasses"] == 40              # fill, hit or bypass


def test_tier_latency_changes_timing_not_results(sim, sim_dev):
    """TIER_LAT: DRAM and flash latencies 0/0 and 40/250 give the same counters and decisions, and the
    slower memories take more cycles."""
    trace = random_trace(np.random.default_rng(4), n=1500, write_frac=0.3)
    outs, cycles = [], []
    for dram, flash in ((0, 0), (40, 250)):
        sim_dev.configure(tier_lat_dram=dram, tier_lat_flash=flash)
        assert sim_dev.read_fields("TIER_LAT") == {"dram": dram, "flash": flash}
        c0 = sim.step(0)
        got = _check_replay(sim_dev, trace, 3)
        cycles.append(sim.step(0) - c0)
        got.pop("transport")
        outs.append((got, _codes(sim_dev.last_decisions).tolist()))
    assert outs[0] == outs[1]
    assert outs[0][0]["tier_fills"] > 100
    assert cycles[1] > 2 * cycles[0], cycles


def test_tier_parameters():
    from cxlkv.hdl.controller import Controller
    from cxlkv.models.controller import ControllerModel
    with pytest.raises(ValueError, match="tiers must be"):
        Controller(tiers="flash")
    with pytest.raises(ValueError, match="tier_depth"):
        ControllerModel(tier_depth=3)
    mask = R["CAPS"].field("tiermover").mask
    assert ControllerModel(tiers="none").read32(R["CAPS"].offset)[0] & mask == 0
    assert ControllerModel().read32(R["CAPS"].offset)[0] & mask
    # no tracker, no tier mover (its commands are the tracker's decisions)
    assert ControllerModel(n_layers=32, n_kv_heads=8, entries_log2=13).read32(R["CAPS"].offset)[0] & mask == 0
    # the tier mover's memory ports are ports of the top with tiers = 'external', wherever the tracker's
    # metadata lives (on chip here), and the top elaborates
    from amaranth.back import rtlil
    from cxlkv.hdl.controller import TIER_MEMORY_PORTS
    top = Controller(n_layers=2, n_kv_heads=2, entries_log2=5, tracker="onchip", tiers="external")
    assert set(TIER_MEMORY_PORTS) <= set(top.signature.members)
    assert "meta_rd" not in top.signature.members
    rtlil.convert(top)


def test_host_data_and_bisnoop_parameters():
    """The data path needs the tier mover, BI-snoop the data path and a filter it can build; CAPS says
    which are in; the ports follow (host_wdata/host_rsp, or the CXL.mem channels instead)."""
    from cxlkv.hdl.controller import BI_HOST_CHANNELS, Controller
    from cxlkv.models.controller import BI_MAX_LINES, ControllerModel
    for cls in (Controller, ControllerModel):
        with pytest.raises(ValueError, match="host_data needs the tier mover"):
            cls(tiers="none", host_data=True)
        with pytest.raises(ValueError, match="bisnoop needs the host data path"):
            cls(bisnoop=True)
        with pytest.raises(ValueError, match=f"built up to {BI_MAX_LINES} lines; this geometry's window has 65536"):
            cls(host_data=True, bisnoop=True)                     # the default 4 x 2 x 1024 window
        with pytest.raises(ValueError, match="tier_line_bits must be 547"):
            cls(host_data=True, tier_line_bits=512)
        with pytest.raises(ValueError, match="host_data must be True or False"):
            cls(host_data="yes")
    small = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4}
    caps = R["CAPS"]
    quant, bi = caps.field("quant").mask, caps.field("bisnoop").mask
    assert ControllerModel(**small).read32(caps.offset)[0] & (quant | bi) == 0
    assert ControllerModel(**small, host_data=True).read32(caps.offset)[0] & (quant | bi) == quant
    assert ControllerModel(**small, host_data=True, bisnoop=True).read32(caps.offset)[0] & (quant | bi) == quant | bi
    tops = [Controller(**small, host_data=True), Controller(**small, host_data=True, bisnoop=True)]
    for top in tops:
        top._MustUse__silence = True               # built for its ports only, never elaborated
    hd, bs = (set(top.signature.members) for top in tops)
    assert {"access", "host_wdata", "host_rsp"} <= hd and not set(BI_HOST_CHANNELS) & hd
    assert set(BI_HOST_CHANNELS) <= bs and not {"access", "host_wdata", "host_rsp"} & bs


# ------------------------------------------------------------------ the prefetch engine in the top

from cxlkv.models import prefetch as PF  # noqa: E402

PF_KEYS = (*COUNTS, "tier_commands", "tier_hits", "tier_fills", "tier_writebacks", "tier_clean_drops",
           "tier_bypasses", "tier_bad_commands", "tier_lines_to_flash", "tier_lines_to_dram", "tier_proto_errors",
           "prefetch_drops", "bad_events", "step_errors")


def _check_pf_replay(dev, trace, entries, window, trigger_all, via="events", **params):
    """Exact mode: counts (prefetches and prefetch_hits included) and every demand victim equal
    `policy replay --policy hw --param window=W` with the same trigger."""
    got = dev.replay(trace, entries, via=via, window=window, prefetch_trigger_all=trigger_all, **params)
    res = P.replay(trace, "hw", entries, record_victims=True, window=window,
                   prefetch_trigger=PF.TRIGGER_READ if trigger_all else PF.TRIGGER_MISS, **params)
    exp = res.summary()
    assert {k: got[k] for k in COUNTS} == {k: exp[k] for k in COUNTS}, (entries, window, trigger_all, params)
    assert np.array_equal(_codes(dev.last_decisions), res.victims), (entries, window, trigger_all, params)
    assert got["prefetch_drops"] == 0 and got["tier_bad_commands"] == 0 and got["tier_proto_errors"] == 0
    assert got["tier_writebacks"] + got["tier_clean_drops"] == got["evictions"]
    return got


def test_prefetch_replay_shipped_trace_sim_equals_policy_hw(sim, sim_dev):
    """Issue 9 with the prefetch engine: the shipped trace at C = 10 % with W = 2 on demand misses and W = 1
    on every read: every count (prefetches and prefetch_hits included) and every demand victim equal the
    policy's `hw` with that window; the tier counters (prefetch fills included) equal the model transport's
    (models/tiermover.py on the same commands); window 0 afterwards is the plain `hw` again."""
    trace = load_trace(SHIPPED)
    entries = P.entries_from_budget(trace, 10)
    with SyncDevice(ModelTransport(**PARAMS)) as model:
        for window, trigger_all in ((2, 0), (1, 1)):
            c0 = sim.step(0)
            got = _check_pf_replay(sim_dev, trace, entries, window, trigger_all)
            assert got["prefetches"] > 1000 and got["prefetch_hits"] > 100 and got["decision_errors"] == 0
            assert got["tier_commands"] > len(trace)          # the inserting prefetches are commands too
            assert sim.step(0) - c0 > 2 * len(trace)          # exact mode holds events: slower than one per clock
            m = model.replay(trace, entries, window=window, prefetch_trigger_all=trigger_all)
            assert {k: m[k] for k in PF_KEYS} == {k: got[k] for k in PF_KEYS}, window
    got = _check_replay(sim_dev, trace, entries)
    assert got["prefetches"] == 0 and got["tier_commands"] == len(trace)


def test_prefetch_replay_random_traces_sim_equals_policy_hw(sim_dev):
    """Random traces, both triggers, windows 1 .. 5, pins, other time constants; direct port and HDM decode."""
    rng = np.random.default_rng(31)
    trace = random_trace(rng, n=2500, write_frac=0.2)
    for entries, window, trigger_all, params in ((4, 3, 0, {}), (9, 1, 1, {"hw_pinned": 3, "hw_tau": 3}),
                                                 (6, 5, 1, {"hw_rank_tau": 4, "hw_bucket_bits": 1,
                                                            "hw_rank_tau_long": 16, "hw_write_sample": 0x4000})):
        got = _check_pf_replay(sim_dev, trace, entries, window, trigger_all, **params)
        assert got["prefetches"] > 0
    got = _check_pf_replay(sim_dev, trace, 5, 2, 0, via="hdm")
    assert got["via"] == "hdm" and got["prefetches"] > 0


def test_prefetch_replay_model_transport_equals_policy_hw():
    with SyncDevice(ModelTransport(**PARAMS)) as dev:
        trace = random_trace(np.random.default_rng(32), n=2000)
        for window, trigger_all in ((2, 0), (4, 1)):
            _check_pf_replay(dev, trace, 5, window, trigger_all, hw_pinned=1)


def test_the_prefetch_comparison_can_fail(sim_dev):
    """Negative check: the same comparison against the policy at W + 1 must see a difference."""
    trace = random_trace(np.random.default_rng(33), n=2000)
    got = sim_dev.replay(trace, 5, window=2, prefetch_trigger_all=1)
    other = P.replay(trace, "hw", 5, record_victims=True, window=3)
    assert {k: got[k] for k in COUNTS} != {k: other.summary()[k] for k in COUNTS}
    assert not np.array_equal(_codes(sim_dev.last_decisions), other.victims)


def _pf_run(dev, t, trace, entries, **prefetch):
    """The trace's events through the direct port with PREFETCH set as given (not the driver's exact mode)."""
    from cxlkv.sw.transport import FLAG_HIT
    dev.configure(enable=0)
    dev.configure(alpha=16384, tau=8, queue_budget=entries, pin_first=0)
    dev.write_fields("PREFETCH", **prefetch)
    dev.configure(enable=1)
    dev.clear_counters()
    rec = event_records(trace)
    c0 = t.step(0)
    dec = dev._loop.run_until_complete(t.events(rec))
    cycles = t.step(0) - c0
    dev.settle()
    # the candidates the engine was asked for: the rule on the device's own demand decisions
    newest, cands = {}, 0
    for i, f in enumerate(dec["flags"].tolist()):
        q = int(trace.queue[i])
        p = int(trace.pos[i])
        newest[q] = max(newest.get(q, 0), p)
        if PF.triggers(trace.op[i] == 0, f & FLAG_HIT, prefetch["trigger"], prefetch["window"]):
            cands += len(PF.candidates(p, prefetch["window"], newest[q]))
    return dev.counters(), dec, cands, cycles


def test_prefetch_not_exact_runs_and_drains(sim, sim_dev):
    """PREFETCH.exact = 0: no hold, the engine's queue, drops and rate limit apply (not the simulator's
    answer). Every event still gets its decision, the device drains (STATUS.busy = 0), every candidate is
    either inserted, deduplicated or dropped (PREFETCHES + PREFETCH_DROPS <= candidates; drop mode with a
    rate limit drops, stall mode drops none), the tier mover refuses nothing; a later exact replay is the
    policy's again."""
    trace = random_trace(np.random.default_rng(34), n=2000, write_frac=0.2)
    base = {"window": 4, "trigger": 1, "exact": 0, "rate_issues": 1}
    dev = sim_dev
    dev.write_fields("PREFETCH_PERIOD", cycles=16)
    for mode in (0, 1):
        c, dec, cands, cycles = _pf_run(dev, sim, trace, 6, **base, overflow_stall=mode)
        assert len(dec) == len(trace) and c["reads"] + c["writes"] == len(trace), mode
        assert c["bad_events"] == 0 and c["tier_bad_commands"] == 0 and c["tier_proto_errors"] == 0
        assert c["tier_writebacks"] + c["tier_clean_drops"] == c["evictions"]
        assert 0 < c["prefetches"] and c["prefetches"] + c["prefetch_drops"] <= cands, (mode, c, cands)
        assert dev.status()["busy"] == 0
        if mode == 0:
            assert c["prefetch_drops"] > 0
        else:
            assert c["prefetch_drops"] == 0
    dev.write_fields("PREFETCH_PERIOD", cycles=64)
    _check_pf_replay(dev, trace, 6, 2, 0)


def test_prefetch_window_zero_is_one_event_per_clock(sim, sim_dev):
    """PREFETCH.window = 0: no hold and no prefetch, whatever PREFETCH.exact (the cycles of a window-0 replay
    are the top's without the engine: docs/controller.md, figures); exact mode with W = 2 holds each event."""
    trace = random_trace(np.random.default_rng(35), n=3000)
    c0, _, _, cyc0 = _pf_run(sim_dev, sim, trace, 200, window=0, trigger=1, exact=1, overflow_stall=0, rate_issues=0)
    c2, _, _, cyc2 = _pf_run(sim_dev, sim, trace, 200, window=2, trigger=1, exact=1, overflow_stall=0, rate_issues=0)
    assert c0["prefetches"] == 0 and c2["prefetches"] > 0
    assert cyc2 > cyc0 + len(trace), (cyc0, cyc2)


def test_prefetch_refusals_and_caps():
    from cxlkv.hdl.controller import Controller
    from cxlkv.models.controller import ControllerModel
    mask = R["CAPS"].field("prefetch").mask
    assert ControllerModel().read32(R["CAPS"].offset)[0] & mask
    assert ControllerModel(prefetch=False).read32(R["CAPS"].offset)[0] & mask == 0
    with pytest.raises(ValueError, match="prefetch must be"):
        Controller(prefetch=2)
    trace = random_trace(np.random.default_rng(36), n=100)
    with SyncDevice(ModelTransport(**PARAMS, prefetch=False)) as dev:
        with pytest.raises(ConfigError, match=r"no prefetch engine \(CAPS.prefetch = 0\)"):
            dev.replay(trace, 4, window=1)
        assert dev.replay(trace, 4)["prefetches"] == 0


def test_cli_ctl_replay_with_a_window(tmp_path, capsys):
    """`ctl replay --param window=W` (every read triggers, as `policy replay`'s default) prints the counts of
    `policy replay --policy hw --param window=W`, on sim and model; a window the device lacks is exit code 2."""
    from cxlkv.sw.cli import main
    path = tmp_path / "t.npz"
    save_trace(path, random_trace(np.random.default_rng(37), n=1500))
    outs = []
    for argv in (["ctl", "--transport", "sim", "replay", str(path), "--entries", "10%", "--param", "window=2", "--json"],
                 ["ctl", "--transport", "model", "replay", str(path), "--entries", "10%", "--param", "window=2",
                  "--json"],
                 ["policy", "replay", str(path), "--policy", "hw", "--entries", "10%", "--param", "window=2", "--json"]):
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[2]["prefetches"] > 0
    for o in outs[:2]:
        assert {k: o[k] for k in ("entries", *COUNTS)} == {k: outs[2][k] for k in ("entries", *COUNTS)}
    assert main(["ctl", "--transport", "model", "--build", "prefetch=0", "replay", str(path), "--entries", "4",
                 "--param", "window=1"]) == 2
    assert "CAPS.prefetch = 0" in capsys.readouterr().err


def test_prefetch_decode_only_follows_the_phase(sim):
    """PREFETCH.decode_only = 1: the engine starts windows only while the phase detector says decode.
    Forced prefill: no prefetch; forced decode: the ungated counts (the policy's); automatic, on a trace
    that goes prefill -> decode -> prefill -> decode: fewer prefetches than ungated, and the device's
    counts equal the model's (which gates each demand read by the phase after that event)."""
    from cxlkv.models import phase as PH
    rng = np.random.default_rng(41)
    # write-heavy and read-heavy stretches (phases flip with a 16-event window, hysteresis 1)
    parts = [random_trace(rng, n=n, n_layers=3, write_frac=w) for n, w in ((300, 0.9), (600, 0.05),
                                                                             (300, 0.9), (600, 0.05))]
    trace = _concat_traces(parts)
    results = {}
    for kind in ("sim", "model"):
        t = sim if kind == "sim" else ModelTransport(**PARAMS)
        dev = _device(t)
        dev.configure(phase_ratio=3, phase_window_log2=4, phase_hysteresis=1)
        pf = {"window": 2, "trigger": 1, "exact": 1, "overflow_stall": 0, "rate_issues": 0}
        got = {}
        for name, override, gate in (("ungated", 0, 0), ("prefill", PH.OVERRIDE_PREFILL, 1),
                                     ("decode", PH.OVERRIDE_DECODE, 1), ("auto", 0, 1)):
            dev.configure(phase_override=override)
            dev.configure(enable=0)
            dev.configure(alpha=16384, tau=8, queue_budget=12, pin_first=0)
            dev.write_fields("PREFETCH", **pf, decode_only=gate)
            dev.configure(enable=1)
            dev.clear_counters()
            dec = dev._loop.run_until_complete(t.events(event_records(trace)))
            dev.settle()
            got[name] = (dev.counters(), dec["victim"].tolist(), dec["flags"].tolist())
        results[kind] = got
        dev._loop.close()
    for kind, got in results.items():
        ungated, forced_prefill, forced_decode, auto = (got[k][0] for k in ("ungated", "prefill", "decode", "auto"))
        assert forced_prefill["prefetches"] == 0 and ungated["prefetches"] > 0, kind
        assert forced_decode["prefetches"] == ungated["prefetches"], kind
        assert got["decode"][1:] == got["ungated"][1:], kind
        assert 0 < auto["prefetches"] < ungated["prefetches"], (kind, auto["prefetches"], ungated["prefetches"])
    for name in ("ungated", "prefill", "decode", "auto"):
        s, m = results["sim"][name], results["model"][name]
        keys = ("reads", "read_hits", "evictions", "prefetches", "prefetch_hits", "no_victim", "tier_fills",
                "tier_writebacks")
        assert {k: s[0][k] for k in keys} == {k: m[0][k] for k in keys}, name
        assert s[1:] == m[1:], name


def _concat_traces(parts):
    """One trace of ``parts`` one after the other, each part's steps shifted past the previous part's."""
    from cxlkv.models.trace import Trace
    cols, base = {k: [] for k in ("step", "layer", "head", "pos", "op", "score")}, 0
    for p in parts:
        cols["step"].append(p.step + base)
        base = int(cols["step"][-1].max()) + 1
        for k in ("layer", "head", "pos", "op", "score"):
            cols[k].append(getattr(p, k))
    a = {k: np.concatenate(v) for k, v in cols.items()}
    return Trace(a["step"].astype(np.int32), a["layer"], a["head"], a["pos"], a["op"], a["score"],
                 parts[0].n_layers, parts[0].n_kv_heads).validate()


# ------------------------------------------------------------------ the board top's structure

def test_replay_in_the_board_structure_equals_policy_hw():
    """The ECP5 board top builds the controller with ``hold_domain`` (the blocks CONTROL.enable = 0
    holds cleared run in a domain whose only reset is that hold; hdl/boards/ecp5.py): that structure,
    with the board's parameters (matrix selection, 16 slots), in the Verilator harness. Every
    decision of replays at several budgets and settings equals `policy replay --policy hw`; each
    replay starts from the cleared state (CONTROL.enable 0 -> 1). A hold_domain that is not a
    domain of its own is refused."""
    from cxlkv.hdl.boards.ulx3s import CONTROLLER
    from cxlkv.hdl.controller import Controller, HoldDomainController
    for bad in ("sync", "comb", 1):
        with pytest.raises(ValueError, match="hold_domain must be None or the name of a domain"):
            Controller(hold_domain=bad)
    t = SimTransport(top=HoldDomainController(**CONTROLLER), top_name="controller_hold")
    dev = _device(t)
    try:
        trace = random_trace(np.random.default_rng(11), n=3000)
        for entries, params in [(4, {}), (16, {"hw_pinned": 3, "hw_alpha": 0x7000, "hw_tau": 3}),
                                (6, {"hw_rank_tau": 4, "hw_rank_tau_long": 16, "hw_bucket_bits": 1}),
                                (2, {"hw_pinned": 2, "hw_tau": 5000})]:
            _check_replay(dev, trace, entries, **params)
    finally:
        dev._loop.run_until_complete(t.close())
        dev._loop.close()


def test_harness_optimisation_comes_from_the_environment(monkeypatch):
    """The test suite builds the harness at -O1 (tests/conftest.py); CXLKV_HARNESS_OPT is checked."""
    from cxlkv.tb.vharness import HARNESS_OPT, harness_flags
    assert harness_flags()[-2:] == ("-CFLAGS", "-O1")
    monkeypatch.delenv("CXLKV_HARNESS_OPT")
    assert harness_flags()[-1] == HARNESS_OPT == "-O2"
    monkeypatch.setenv("CXLKV_HARNESS_OPT", "-O9")
    with pytest.raises(ValueError, match="CXLKV_HARNESS_OPT='-O9'"):
        harness_flags()
