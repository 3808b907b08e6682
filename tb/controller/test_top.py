"""cocotb bench ``controller_top``: the controller top in its default structure (tracker on chip, tier
mover with its memory models, prefetch engine, HDM decode; no host data path, no BI-snoop) against its
golden model ``cxlkv.models.controller.ControllerModel``, through the registers and its streams.

Environment: ``tb/controller/topenv.py``. The register bus configures the DUT and the model alike (the
driver's writes go to both); random events with random gaps on ``event`` (entries of a small hot pool,
bursts on one entry, out-of-range layers and heads, steps that sometimes go backwards), and random
accesses and hints on ``access`` and ``hint`` (in and out of the HDM window, beyond the geometry in use,
backward and bad hints), phase by phase; random backpressure on ``decision`` and ``route``. Every
accepted input goes through the model; decisions and routes are compared field for field in order.
After every phase the device is drained and every register word (counters, STATUS, IRQ_STATUS, cold-list
head, HDM step, hints pending, ...) and the cold-list window are compared with the model's; then the
host drains the cold list (COLDLIST_TAIL), as a driver does, and they are compared again.

* test_random: rounds of random configurations (QUEUE_BUDGET 2 to 4, PINS (= the budget in the second
  round and every third after it: no victims once the first positions fill the slots), ALPHA, TAU, TLN_R/TLN_D/
  HW_BUCKET/HW_SAMPLE from ``hw`` policy parameters, CONTROL.decode_lock, the phase detector), the
  prefetch engine off (PREFETCH.window = 0); CONTROL.enable 0 -> 1 between rounds.
* test_random_prefetch: the same with the prefetch engine on in exact mode (PREFETCH.window 1 to 4,
  trigger on misses or every read, decode_only in one round), the mode the model gives.
* test_scoreboards_catch_corruption: one decision prediction and one route prediction corrupted; each
  scoreboard reports exactly its one; the register comparison fails on a model counter one off.

``CXLKV_TOP_EVENTS`` (default 1500): direct events per round's first phase (the second: half as many;
accesses: half as many; test_random_prefetch: two thirds of all that);
``CXLKV_TOP_ROUNDS`` (default 3): configurations per random test.
"""
from dataclasses import replace

import cocotb

from cxlkv.models import hdm as MH
from cxlkv.models import policy as P
from cxlkv.models import scoring as S
from cxlkv.models.controller import buckets_needed, hw_registers
from cxlkv.tb.common import env_int, must_fail, test_rng
from cxlkv.tb.controller.topenv import TopEnv
from cxlkv.tb.hdm.test_hdm import random_traffic

#: ``hw`` policy parameters of the rounds' deadline configurations (each fits the default 128-bucket ring)
HW_SETS = ({}, {"hw_rank_tau": 16, "hw_rank_tau_long": 0, "hw_bucket_bits": 2},
           {"hw_rank_tau": 4, "hw_rank_tau_long": 32, "hw_bucket_bits": 4, "hw_write_sample": 0x4000,
            "hw_read_credit": 0x800},
           {"hw_rank_tau_long": 128, "hw_bucket_bits": 5, "hw_write_sample": 0xFFFF})


def _sub_rng(salt):
    import random
    return random.Random(test_rng().getrandbits(32) ^ salt)


class EventStim:
    """Direct events over the built geometry: a hot pool, random entries, bursts on one entry,
    out-of-range layers and heads (the port's field is wider than the geometry), a global step that
    mostly advances and sometimes goes backwards."""

    def __init__(self, rng, env, step=0):
        self.rng, self.env, self.step = rng, env, step
        self.lb = max(1, (env.n_layers - 1).bit_length())
        self.hb = max(1, (env.n_kv_heads - 1).bit_length())

    def entry(self):
        e = self.env
        return self.rng.randrange(e.n_layers), self.rng.randrange(e.n_kv_heads), self.rng.randrange(e.n_positions)

    def records(self, n):
        rng, e = self.rng, self.env
        pool = [self.entry() for _ in range(12)]
        out = []
        while len(out) < n:
            r = rng.random()
            if r < 0.04:                                    # beyond the geometry: an error decision
                layer = rng.randrange(e.n_layers, 1 << self.lb) if e.n_layers < 1 << self.lb and rng.random() < 0.5 \
                    else rng.randrange(e.n_layers)
                head = rng.randrange(e.n_kv_heads, 1 << self.hb) if e.n_kv_heads < 1 << self.hb and \
                    (layer < e.n_layers or rng.random() < 0.5) else rng.randrange(e.n_kv_heads)
                ent = (layer, head, rng.randrange(e.n_positions))
            elif r < 0.70:
                ent = rng.choice(pool)
            elif r < 0.78:                                  # the first positions (pinned ones)
                ent = (rng.randrange(e.n_layers), rng.randrange(e.n_kv_heads), rng.randrange(4))
            else:
                ent = self.entry()
            k = rng.random()
            if k < 0.15:
                self.step += rng.randrange(1, 4)
            step = self.step
            if k > 0.97:
                step = max(0, self.step - rng.randrange(1, 5))      # backwards: a step error
            burst = rng.randrange(2, 7) if rng.random() < 0.06 else 1
            for _ in range(burst):
                out.append({"layer": ent[0], "head": ent[1], "position": ent[2], "write": int(rng.random() < 0.2),
                            "sample": rng.getrandbits(S.SCORE_BITS) if rng.random() < 0.9 else 0, "step": step})
        return out[:n]


def random_config(rng, prefetch, k):
    """Driver settings of one round."""
    regs = hw_registers(P.make_params("hw", **rng.choice(HW_SETS)))
    assert buckets_needed(regs[("TLN_R", "value")], regs[("TLN_D", "value")], regs[("HW_BUCKET", "bits")]) <= 128
    cfg = {"queue_budget": rng.randrange(2, 5), "pin_first": rng.choice((0, 0, 1, 2)),
           "alpha": rng.choice((0x1000, 0x4000, 0x8000, 0xFFFF)), "tau": rng.choice((2, 8, 50, 400)),
           "tln_r": regs[("TLN_R", "value")], "tln_d": regs[("TLN_D", "value")],
           "bucket_bits": regs[("HW_BUCKET", "bits")], "write_sample": regs[("HW_SAMPLE", "write_sample")],
           "read_credit": regs[("HW_SAMPLE", "read_credit")], "decode_lock": int(rng.random() < 0.3),
           "phase_window_log2": rng.choice((4, 6)), "phase_ratio": rng.choice((2, 4)), "phase_hysteresis": 1,
           "coldlist_threshold": rng.choice((8, 32, 63))}
    if k % 3 == 1:                                  # every slot pinned once filled: misses find no victim
        cfg["pin_first"] = cfg["queue_budget"]
    if prefetch:
        cfg.update(prefetch_window=rng.randrange(1, 5), prefetch_trigger=rng.randrange(2), prefetch_exact=1,
                   prefetch_overflow_stall=0, prefetch_rate_issues=0, prefetch_decode_only=int(k == 1))
    else:
        cfg.update(prefetch_window=0)
    return cfg


async def configure(env, cfg, hdm_cfg):
    dev = env.dev
    await dev.configure(enable=0)
    await dev.configure(**cfg)
    await dev.configure_hdm(hdm_cfg)
    await dev.configure(enable=1)
    await dev.clear_counters()
    st = await dev.status()
    assert not st["ring_error"] and not st["hdm_cfg_error"], f"round configuration refused: {st}"


def hdm_configs(geom, rng):
    full = MH.HdmConfig.packed(geom, base=0x2_0000_0000, default_sample=rng.getrandbits(16))
    # two layers in use of a window over the three built: the third layer's accesses are beyond
    fewer = replace(MH.HdmConfig.packed(geom, base=0x1000_0000, entry_bytes=256, n_layers=geom.n_layers - 1),
                    size=MH.HdmConfig.packed(geom, base=0x1000_0000, entry_bytes=256).size)
    return [full, fewer]


async def run_round(env, rng, stim, n, hdm_cfg, what):
    """Events, accesses and hints, events again: each phase drained, then every register and the
    cold list compared, then the cold list drained by the host (and compared again)."""
    ev_idle = rng.choice((0.0, 0.3, 0.6))
    step = stim.step
    for phase in ("events", "accesses", "events again"):
        if phase == "accesses":
            acc, hints, step = random_traffic(rng, env.hdm_geom, hdm_cfg, n // 2, stim.step)
            await env.drive_hdm(acc, hints, idle_a=rng.choice((0.0, 0.2)), idle_h=rng.choice((0.3, 0.6)))
        else:
            await env.drive_events(stim.records(n if phase == "events" else n // 2), ev_idle)
        await env.drain(f"{what}, {phase}")
        stim.step = max(stim.step, step)
        await env.check_registers(f"{what}, after the {phase}")
        await env.dev.drain_cold_list()
        await env.check_registers(f"{what}, after the {phase} and the cold list's drain")


async def _random(dut, salt, prefetch):
    rng = _sub_rng(salt)
    env = TopEnv(dut, rng, ready_prob=rng.choice((0.5, 0.7)))
    await env.start()
    n = env_int("CXLKV_TOP_EVENTS", 1500)
    if prefetch:            # exact mode holds every event until its candidates are in: ~5x the clocks
        n = max(2, 2 * n // 3)
    stim = EventStim(rng, env)
    cfgs = hdm_configs(env.hdm_geom, rng)
    totals = {}
    rounds = env_int("CXLKV_TOP_ROUNDS", 3)
    for k in range(rounds):
        cfg = random_config(rng, prefetch, k)
        await configure(env, cfg, cfgs[k % len(cfgs)])
        await run_round(env, rng, stim, n, cfgs[k % len(cfgs)], f"round {k}")
        got = {s: await env.dev.read_reg(s) for s in
               ("READS", "EVICTIONS", "PREFETCHES", "STEP_ERRORS", "BAD_EVENTS", "COLDLIST_DROPS",
                "PHASE_CHANGES", "HDM_EVENTS", "DECODE_ERRORS", "TIER_COMMANDS")}
        dut._log.info("round %d %s: %s", k, cfg, got)
        totals = {s: totals.get(s, 0) + v for s, v in got.items()}
        stim.step = 0                               # the next enable starts the tracker afresh
    env.check_scoreboards()
    c = env.cover
    dut._log.info("%d cycles; accepted %s; compared %s; cover %s", env.cycle, env.accepted,
                  {n: sb.compared for n, sb in env.sb.items()}, c)
    for key in ("hit", "inserted", "victim", "error", "route_error", "event") + (("no_victim",) if rounds > 1 else ()):
        assert c[key] > 0, f"coverage: no {key}"
    for reg in ("STEP_ERRORS", "BAD_EVENTS", "COLDLIST_DROPS", "PHASE_CHANGES", "DECODE_ERRORS") + \
            (("PREFETCHES",) if prefetch else ()):
        assert totals[reg] > 0, f"coverage: {reg} never moved"


@cocotb.test()
async def test_random(dut):
    await _random(dut, 0x70, prefetch=False)


@cocotb.test()
async def test_random_prefetch(dut):
    await _random(dut, 0x71, prefetch=True)


@cocotb.test()
async def test_scoreboards_catch_corruption(dut):
    """Negative test: decision prediction #40 and route prediction #25 corrupted (one bit each); each
    scoreboard reports exactly that one; the register comparison fails on a counter one off."""
    rng = _sub_rng(0x72)
    env = TopEnv(dut, rng, corrupt_decision_at=40, corrupt_route_at=25)
    await env.start()
    stim = EventStim(rng, env)
    cfgs = hdm_configs(env.hdm_geom, rng)
    await configure(env, random_config(rng, True, 0), cfgs[0])
    await env.drive_events(stim.records(300), 0.3)
    acc, hints, _ = random_traffic(rng, env.hdm_geom, cfgs[0], 150, stim.step)
    await env.drain("events")
    await env.drive_hdm(acc, hints, 0.1, 0.4)
    await env.drain("accesses")
    for name, at in (("decision", 40), ("route", 25)):
        sb = env.sb[name]
        assert sb.compared > at, f"{name}: only {sb.compared} compared"
        must_fail(sb.check, f"a corrupted {name} prediction", dut._log, match="mismatch")
        sb.assert_caught_one(at, dut._log)
    await env.check_registers("before the counter corruption")
    env.model.counts["EVICTIONS"] += 1
    env.model._publish()
    diffs = await env.register_diffs()
    assert [(n, w) for n, w, _, _ in diffs] == [("EVICTIONS", 0)], f"register comparison: {diffs}"
    try:
        await env.check_registers("after the counter corruption")
    except AssertionError as exc:
        assert "1 register mismatches" in str(exc) and "EVICTIONS[0]" in str(exc), str(exc)
        dut._log.info("check_registers failed as it must: %s", str(exc).splitlines()[0])
    else:
        raise AssertionError("check_registers() passed despite a model counter one off")
