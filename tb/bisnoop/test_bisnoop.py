"""cocotb tests of the BI-snoop engine (cxlkv.hdl.bisnoop) against cxlkv.models.bisnoop.

* test_directed_scenarios: every directed scenario (tb/bisnoop/scenarios/*.jsonl, or
  the files in CXLKV_BISNOOP_SCENARIOS) from a clean slate in one simulation: RTL
  output identical to the model's, and error counters, status and irq equal too.
  CXLKV_BISNOOP_OUT names a JSON file that receives the RTL's output lines
  (``cxlkv bisnoop run --rtl`` reads it).
* test_host_random: the MESI host cache (tb/bisnoop/host.py) and a random policy
  against the RTL, with input gaps and output backpressure; scoreboards per output
  channel against the model; the host's own checks (no stale or lost data, filter
  covers the host) every cycle; a final read-back of every line.
  CXLKV_BISNOOP_CYCLES (default 20000).
* test_scoreboard_catches_corruption: negative test of the scoreboards.
* test_error_scenarios_under_backpressure: the error scenarios (err*) with random S2M
  backpressure: each channel's output equal to the model's, counters, status and irq too.
* test_error_checks_catch_corruption: negative test of the error channel's checks: one
  corrupted error prediction is caught by the error scoreboard, one corrupted error in the
  model's scenario output by the direct comparison.
* test_status_clear_and_irq: sticky status, irq, write-one-to-clear.
* test_throughput: bisnoop.msgs_per_cycle under random conflict-free traffic.
"""
import json
import os
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.models import bisnoop as M
from cxlkv.tb.bisnoop.env import BISnoopEnv, scenario_paths
from cxlkv.tb.bisnoop.host import HostCache
from cxlkv.tb.common import drive_ready, env_int, must_fail, report_metric, test_rng


async def _replay_scenarios(dut, env, paths, per_channel=False, damage=None):
    """Replay scenario files; ({path: output lines}, [failure, ...]) against the model's output,
    counters, status and irq. ``per_channel``: compare each channel's sequence only (with output
    backpressure the messages of one event leave in different clocks, so the merged order may
    differ). ``damage(want)``: a negative test's change to the model's output before the comparison."""
    results, failures = {}, []
    assert paths, "no scenarios to run"
    for path in paths:
        items = M.parse_scenario(path.read_text(), env.dw, str(path))
        rtl = await env.replay(items)
        await env.quiet()
        results[str(path)] = M.scenario_lines(rtl, env.dw)
        want, model = M.run_model(items, env.cfg)
        if damage is not None:
            want = damage(want)
        if per_channel:
            rtl, want = _by_channel(rtl), _by_channel(want)
        if rtl != want:
            failures.append(f"{path.name}: RTL output differs from the model\n  rtl:   {rtl}\n  model: {want}")
        got = (env.counters(), int(dut.err_status.value), int(dut.irq.value))
        exp = (model.counters, model.status, int(model.status != 0))
        if got != exp:
            failures.append(f"{path.name}: counters/status/irq {got}, model {exp}")
        dut._log.info("%s: %d outputs", path.name, len(results[str(path)]))
    return results, failures


def _by_channel(outputs):
    return {ch: [msg for c, msg in outputs if c == ch] for ch in M.OUT_CHANNELS}


def _error_scenarios():
    """The directed error scenarios (whatever CXLKV_BISNOOP_SCENARIOS says)."""
    from pathlib import Path
    return sorted((Path(__file__).parent / "scenarios").glob("err*.jsonl"))


@cocotb.test()
async def test_directed_scenarios(dut):
    env = BISnoopEnv(dut, test_rng())
    await env.start()
    results, failures = await _replay_scenarios(dut, env, scenario_paths())
    out = os.environ.get("CXLKV_BISNOOP_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f)
    assert not failures, "\n".join(failures)
    env.check_scoreboards()


async def _host_run(dut, env, cycles, policy_rate=0.08, ready_prob=0.75, max_delay=12):
    # the host writes back partly written lines with MemWrPtl (random byte enables, random bytes in
    # the lanes left off): the RTL's lane merge meets the model's under random traffic and backpressure
    """The host cache against the RTL. S2M messages reach the host after a random delay
    (per channel, in order), so a BISnp can overtake a Cmp sent before it: both orders
    of the conflict flow happen."""
    rng = env.rng
    host = HostCache(env.cfg["lines"], env.dw, rng, partial_writes=True)
    errors = []
    inbox = {ch: deque() for ch in ("s2m_ndr", "s2m_drs", "s2m_bisnp")}

    def check(fn, *args):
        try:
            fn(*args)
        except AssertionError as exc:
            errors.append(str(exc))

    def on_output(ch, msg):
        if ch == "policy_rsp":
            check(host.released, msg)
        elif ch == "error":
            errors.append(f"device reported {msg} to a correct host")
        else:
            inbox[ch].append((env.cycle + rng.randrange(max_delay + 1), msg))
        check(host.check_filter, read_filter(dut, env.cfg["lines"]))

    def deliver(ch, msg):
        for ich, imsg in host.receive(ch, msg):
            env.queues[ich].append(imsg)

    async def postman():
        while True:
            await RisingEdge(dut.clk)
            for ch, q in inbox.items():
                while q and q[0][0] <= env.cycle:
                    check(deliver, ch, q.popleft()[1])

    cocotb.start_soon(postman())

    env.listeners.append(on_output)
    for ch in M.OUT_CHANNELS:
        cocotb.start_soon(drive_ready(dut.clk, env.ports[ch], rng, ready_prob=ready_prob, burst=3))
    for ch in M.IN_CHANNELS:
        env.idle_prob[ch] = 0.2
    for _ in range(cycles):
        await RisingEdge(dut.clk)
        if rng.random() < 0.4:
            for ich, imsg in host.issue():
                env.queues[ich].append(imsg)
        if rng.random() < policy_rate:
            env.queues["policy"].append({"op": rng.choice((M.P_EVICT, M.P_EVICT, M.P_DOWNGRADE, M.P_PROBE)),
                                         "addr": rng.randrange(env.cfg["lines"])})
        assert not errors, errors[0]
    await settle(env, inbox)
    for ich, imsg in host.flush():
        env.queues[ich].append(imsg)
    await settle(env, inbox)
    for line in range(env.cfg["lines"]):          # read everything back: memory = newest write
        for ich, imsg in host.read_back(line):
            env.queues[ich].append(imsg)
    await settle(env, inbox)
    assert not errors, errors[0]
    assert not host.pending and not host.snoops, f"host left waiting: {host.pending} {host.snoops}"
    return host


async def settle(env, inbox):
    """Until the device is quiet and every message has reached the host."""
    for _ in range(1000):
        await env.quiet(limit=50_000)
        if not any(inbox.values()) and not any(env.queues.values()):
            return
    raise AssertionError("the host run never settled")


def read_filter(dut, lines):
    word = int(dut.state.value)
    return [(word >> (2 * i)) & 3 for i in range(lines)]


@cocotb.test()
async def test_host_random(dut):
    env = BISnoopEnv(dut, test_rng())
    await env.start()
    await env.clean_slate()
    host = await _host_run(dut, env, env_int("CXLKV_BISNOOP_CYCLES", 20000))
    env.check_scoreboards()
    dut._log.info("host run: %s; %d inputs accepted in %d cycles", host.stats, env.accepted, env.cycle)
    assert host.stats["snoops"] > 10 and host.stats["released"] > 5 and host.stats["writebacks"] > 10
    assert host.stats["partial_writes"] > 10, "the lane merge was hardly exercised"
    assert host.stats["conflict_ack_first"] and host.stats["conflict_cmp_first"], "a conflict order never happened"


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one corrupted model prediction (the 40th) must be reported, and only it."""
    env = BISnoopEnv(dut, test_rng(), corrupt_at=40)
    await env.start()
    await env.clean_slate()
    env.predicted = 0
    await _host_run(dut, env, 400, ready_prob=1.0)
    errors = sum(sb.errors for sb in env.sb.values())
    assert errors == 1, f"expected exactly one mismatch, the scoreboards saw {errors}"
    must_fail(env.check_scoreboards, "a corrupted prediction", dut._log)


@cocotb.test()
async def test_each_channels_scoreboard_catches_corruption(dut):
    """Negative test per output channel: each channel's first prediction from the 40th on is
    corrupted; every channel that carried one reports exactly its own, and the channels a host run
    exercises (DRS, NDR, BISnp) are among them."""
    env = BISnoopEnv(dut, test_rng(), corrupt_each_from=40)
    await env.start()
    await env.clean_slate()
    env.predicted = 0
    env.per_channel = dict.fromkeys(env.per_channel, 0)
    await _host_run(dut, env, 400, ready_prob=1.0)
    assert {"s2m_drs", "s2m_ndr", "s2m_bisnp"} <= set(env.corrupted), env.corrupted
    for ch, index in env.corrupted.items():
        env.sb[ch].assert_caught_one(index=index, log=dut._log)
    dut._log.info("corrupted and caught per channel: %s", env.corrupted)


async def _backpressure(dut, env):
    for ch in M.OUT_CHANNELS:
        cocotb.start_soon(drive_ready(dut.clk, env.ports[ch], env.rng, ready_prob=0.5, burst=3))


@cocotb.test()
async def test_error_scenarios_under_backpressure(dut):
    """The error scenarios with every S2M channel (and the error stream) randomly not ready."""
    env = BISnoopEnv(dut, test_rng())
    await env.start()
    await _backpressure(dut, env)
    _, failures = await _replay_scenarios(dut, env, _error_scenarios(), per_channel=True)
    assert not failures, "\n".join(failures)
    assert env.sb["error"].compared > 10, "the error channel was hardly compared"
    env.check_scoreboards()


@cocotb.test()
async def test_error_checks_catch_corruption(dut):
    """Negative test of the error channel (under backpressure too): the error scoreboard must catch
    one corrupted error prediction (the 4th), and only it; the direct comparison of the scenario
    output must catch one corrupted error message in the model's output (the 6th), in its scenario."""
    env = BISnoopEnv(dut, test_rng(), corrupt_on=("error", 3))
    await env.start()
    await _backpressure(dut, env)
    seen, hit = [0], []

    def damage(want):
        out = []
        for ch, msg in want:
            if ch == "error":
                if seen[0] == 5:
                    msg = dict(msg, tag=msg["tag"] ^ 1)
                    hit.append(True)
                seen[0] += 1
            out.append((ch, msg))
        return out
    paths = _error_scenarios()
    _, failures = await _replay_scenarios(dut, env, paths, per_channel=True, damage=damage)
    assert hit, "fewer than six errors in the error scenarios"
    assert len(failures) == 1 and "RTL output differs" in failures[0], failures
    dut._log.info("the direct comparison failed as it must: %s", failures[0].splitlines()[0])
    env.sb["error"].assert_caught_one(index=3, log=dut._log)
    for ch, sb in env.sb.items():
        if ch != "error" and (sb.compared or sb.expected or sb.unexpected):
            sb.check()


@cocotb.test()
async def test_status_clear_and_irq(dut):
    env = BISnoopEnv(dut, test_rng())
    await env.start()
    await env.clean_slate()
    assert int(dut.irq.value) == 0 and int(dut.err_status.value) == 0
    env.queues["m2s_birsp"].append({"opcode": M.BIRSP_I, "bi_id": 0, "bitag": 3, "low_addr": 0})
    env.queues["m2s_rwd"].append({"opcode": M.BI_CONFLICT, "snp_type": 0, "meta_field": M.MF_NOOP,
                                  "meta_value": 0, "tag": 9, "addr": 2, "be": 0, "data": 0})
    await env.quiet()
    status = (1 << (M.E_UNKNOWN_TAG - 1)) | (1 << (M.E_CONFLICT_NONE - 1))
    assert int(dut.err_status.value) == status and int(dut.irq.value) == 1
    assert env.counters()[M.E_UNKNOWN_TAG - 1] == 1 and env.counters()[M.E_CONFLICT_NONE - 1] == 1
    dut.clear_status.value = 1 << (M.E_UNKNOWN_TAG - 1)      # clear one bit: irq stays
    await RisingEdge(dut.clk)
    dut.clear_status.value = 0
    await ReadOnly()
    assert int(dut.err_status.value) == 1 << (M.E_CONFLICT_NONE - 1) and int(dut.irq.value) == 1
    await RisingEdge(dut.clk)
    dut.clear_status.value = status
    await RisingEdge(dut.clk)
    dut.clear_status.value = 0
    await ReadOnly()
    assert int(dut.err_status.value) == 0 and int(dut.irq.value) == 0
    assert env.counters()[M.E_UNKNOWN_TAG - 1] == 1, "clearing the status must not clear the counters"
    await RisingEdge(dut.clk)
    env.check_scoreboards()


@cocotb.test()
async def test_throughput(dut):
    """Reads and writes to random lines, no snoops, inputs always offered, outputs always ready."""
    env = BISnoopEnv(dut, test_rng())
    rng = env.rng
    n = env_int("CXLKV_THROUGHPUT_MSGS", 4000)
    await env.start()
    await env.clean_slate()
    env.first_accept = None
    start = env.accepted
    lines, dw = env.cfg["lines"], env.dw
    for i in range(n):
        line, tag = rng.randrange(lines), i & 0xFFFF
        if rng.random() < 0.5:
            env.queues["m2s_req"].append({"opcode": M.MEM_RD, "snp_type": 0, "meta_field": M.MF_META0,
                                          "meta_value": rng.choice((M.MV_I, M.MV_S, M.MV_A)), "tag": tag,
                                          "addr": line})
        else:
            env.queues["m2s_rwd"].append({"opcode": M.MEM_WR, "snp_type": 0, "meta_field": M.MF_META0,
                                          "meta_value": rng.choice((M.MV_I, M.MV_S, M.MV_A)), "tag": tag,
                                          "addr": line, "be": (1 << dw // 8) - 1, "data": rng.getrandbits(dw)})
    await env.quiet(limit=10 * n)
    env.check_scoreboards()
    span = env.last_accept - env.first_accept + 1
    rate = (env.accepted - start) / span
    dut._log.info("throughput: %d messages in %d cycles = %.4f messages/cycle", n, span, rate)
    report_metric("bisnoop.msgs_per_cycle", round(rate, 6), "msgs/cycle",
                  {"messages": n, **env.cfg, "traffic": "MemRd/MemWr, random lines, no snoops",
                   "output_ready": "always"})
    assert rate > 0.9, "the engine lost its one-event-per-clock shape"
