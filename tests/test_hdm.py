"""HDM decode and hint path: the golden model's rules, trace replay through it, and the RTL's ports.

The RTL is checked against the model by the cocotb bench (tb/hdm/, run by tests/test_cocotb.py).
"""
import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import hdm as M
from cxlkv.models import tracker as T
from cxlkv.models.trace import Trace, load_trace
from cxlkv.models.tracegen import synth

TRACES = __import__("pathlib").Path(__file__).resolve().parent.parent / "traces"
G = M.HdmGeometry(n_layers=4, n_kv_heads=2, n_positions=512, hint_depth=4)


def small_cfg(**kw):
    return M.HdmConfig.packed(G, base=0x10_0000_0000, **kw)


# ---- layout ----------------------------------------------------------------------------------------

def test_llama70b_window_is_40_gib_and_decodes_its_corners():
    g = M.HdmGeometry(n_layers=80, n_kv_heads=8, n_positions=131072)
    cfg = M.HdmConfig.packed(g, base=0x20_0000_0000)
    assert cfg.size == 80 * 8 * 131072 * 512 == 40 << 30
    assert (cfg.entry_shift, cfg.pos_shift, cfg.head_shift) == (9, 17, 3)
    assert cfg.problems(g) == []
    last = cfg.base + cfg.size - 64
    assert cfg.address(79, 7, 131071, 7) == last
    assert M.decode(g, cfg, last) == (M.OK, 79, 7, 131071, 7)
    # the worked example of docs/hdm.md: layer 2, head 5, position 1000, line 3
    addr = cfg.address(2, 5, 1000, 3)
    assert addr == 0x20_0000_0000 + ((((2 * 8 + 5) * 131072 + 1000) * 512) + 3 * 64) == 0x20_5407_D0C0
    assert M.decode(g, cfg, addr) == (M.OK, 2, 5, 1000, 3)
    assert M.decode(g, cfg, cfg.base - 64)[0] == M.OUTSIDE
    assert M.decode(g, cfg, cfg.base + cfg.size)[0] == M.OUTSIDE


def test_decode_round_trip_and_low_bits_ignored():
    rng = np.random.default_rng(1)
    for cfg in (small_cfg(), small_cfg(entry_bytes=256), small_cfg(entry_bytes=4096)):
        for _ in range(500):
            l, h, p = int(rng.integers(4)), int(rng.integers(2)), int(rng.integers(512))
            ln = int(rng.integers(cfg.lines_per_entry))
            a = cfg.address(l, h, p, ln)
            assert M.decode(G, cfg, a) == (M.OK, l, h, p, ln)
            assert M.decode(G, cfg, a + int(rng.integers(64))) == (M.OK, l, h, p, ln)


def test_beyond_geometry_inside_a_sparse_window():
    cfg = M.HdmConfig(base=1 << 32, size=5 << 21, entry_shift=9, pos_shift=10, head_shift=2, n_layers=3,
                      n_kv_heads=2, n_positions=400)
    assert cfg.problems(G) == []
    assert M.decode(G, cfg, cfg.address(2, 1, 399))[0] == M.OK
    for lhp in ((3, 0, 0), (4, 1, 5), (0, 2, 0), (0, 3, 10), (1, 1, 400), (0, 0, 1023)):
        assert M.decode(G, cfg, cfg.address(*lhp))[0] == M.BEYOND, lhp
    assert M.decode(G, cfg, cfg.address(5, 0, 0))[0] == M.OUTSIDE        # past size


@pytest.mark.parametrize("change, words", [
    ({"base": 0x1020}, "multiples of 64"), ({"size": 100}, "multiples of 64"),
    ({"entry_shift": 5}, "entry_shift"), ({"entry_shift": 13}, "entry_shift"),
    ({"n_layers": 0}, "n_layers"), ({"n_layers": 5}, "n_layers"), ({"n_kv_heads": 3}, "n_kv_heads"),
    ({"n_positions": 1024}, "n_positions"), ({"pos_shift": 8}, "position stride"),
    ({"head_shift": 0}, "head stride"), ({"default_sample": 1 << 16}, "default_sample"),
])
def test_refused_configurations(change, words):
    cfg = M.HdmConfig(**{**small_cfg().__dict__, **change})
    probs = cfg.problems(G)
    assert probs and any(words in p for p in probs), probs
    m = M.HdmModel(G, cfg)
    route, ev = m.access(M.Access(small_cfg().address(0, 0, 0)))
    assert route.status == M.OUTSIDE and ev is None and m.counters["decode_errors"] == 1
    m.hint(M.Hint(5, 1, 0, 0, 0, 7))
    assert m.counters["bad_hints"] == 1 and m.step == 0


# ---- the line-0 rule and hints ---------------------------------------------------------------

def test_line0_rule_one_event_per_entry_access():
    cfg = small_cfg(default_sample=9)
    m = M.HdmModel(G, cfg)
    evs = [m.access(M.Access(cfg.address(1, 1, 7, ln)))[1] for ln in (3, 0, 1, 2, 4, 5, 6, 7, 0)]
    assert [e is not None for e in evs] == [False, True] + [False] * 6 + [True]
    assert evs[1] == M.Event(1, 1, 7, 0, 9, 0)
    assert m.counters["events"] == 2 and m.counters["accesses"] == 9 and m.counters["default_samples"] == 2


def test_hint_rules():
    cfg = small_cfg(default_sample=5)
    m = M.HdmModel(G, cfg)
    rd = lambda l, h, p: m.access(M.Access(cfg.address(l, h, p)))[1]   # noqa: E731
    m.hint(M.Hint(3, 1, 0, 1, 10, 100))
    m.hint(M.Hint(3, 1, 0, 1, 10, 200))              # a second read of the same entry
    assert m.step == 3
    # a write never consumes a hint and carries sample 0
    assert m.access(M.Access(cfg.address(0, 1, 10), write=1))[1] == M.Event(0, 1, 10, 1, 0, 3)
    assert rd(0, 1, 10).sample == 100                 # the oldest first
    assert rd(0, 1, 11).sample == 5                   # no hint: the default
    assert rd(0, 1, 10).sample == 200
    assert rd(0, 1, 10).sample == 5
    assert m.counters["hints_used"] == 2 and m.counters["default_samples"] == 2
    # overflow: hint_depth (4) pending, the fifth is dropped
    for p in range(5):
        m.hint(M.Hint(3, 1, 2, 0, p, p + 1))
    assert len(m.pending) == 4 and m.counters["hint_drops"] == 1
    assert rd(2, 0, 4).sample == 5
    # a backward step is counted and does not move the step; its sample is still kept
    m.hint(M.Hint(2, 1, 3, 1, 1, 77))
    assert m.counters["step_errors"] == 1 and m.step == 3 and m.counters["hint_drops"] == 2
    # a step advance orphans the pending hints
    m.hint(M.Hint(4))
    assert m.counters["hint_orphans"] == 4 and m.pending == []
    assert rd(2, 0, 0).step == 4 and rd(2, 0, 0).sample == 5
    # a hint beyond the geometry is refused, the step untouched
    m.hint(M.Hint(9, 1, 0, 0, 512 - 1, 1))
    m.hint(M.Hint(9, 1, 3, 1, 0, 1))
    small = M.HdmConfig(**{**cfg.__dict__, "n_positions": 256})
    m.configure(small)
    m.hint(M.Hint(10, 1, 0, 0, 300, 1))
    assert m.counters["bad_hints"] == 1 and m.step == 9
    assert m.counters["hints"] == 2 + 5 + 1 + 1 + 3


# ---- trace replay ----------------------------------------------------------------------------

def _check_replay(trace, geom, cfg, **kw):
    events, routes, model = M.replay(trace, geom, cfg, **kw)
    want = M.trace_events(trace)
    assert events == want
    # the same events as the tracker's own view of the trace (queue = layer × n_kv_heads + head)
    tq = T.events_from_trace(trace)
    assert [(e.layer * trace.n_kv_heads + e.head, e.position, e.write, e.sample, e.step) for e in events] == \
        [(q.queue, q.position, q.write, q.sample, q.step) for q in tq]
    c = model.counters
    assert c["events"] == len(trace) and c["decode_errors"] == 0 and c["step_errors"] == 0
    assert c["hint_drops"] == c["hint_orphans"] == c["bad_hints"] == 0
    return model, routes


@pytest.mark.parametrize("name", ["tiny_llama_stdlib_thr001.npz", "tiny_llama_stdlib_top32.npz"])
def test_shipped_trace_replays_exactly(name):
    t = load_trace(TRACES / name)
    cfg = M.HdmConfig.packed(G, base=0x7_0000_0000, n_layers=t.n_layers, n_kv_heads=t.n_kv_heads)
    model, routes = _check_replay(t, G, cfg, lines="first")
    assert model.counters["hints_used"] == int((t.op == 0).sum())
    assert [(r.queue, r.position) for r in routes] == [(int(q), int(p)) for q, p in zip(t.queue, t.pos)]


@pytest.mark.parametrize("family, seed", [("mixed", 1), ("heads", 2), ("needle", 3), ("dense_early", 4)])
@pytest.mark.parametrize("variant", [
    {"lines": "all"}, {"lines": "first", "hint_every_read": True}, {"lines": [5, 0, 2]},
    {"lines": "all", "default": 0}, {"lines": "first", "default": 300}])
def test_synthetic_traces_replay_exactly(family, seed, variant):
    t = synth(family, n_layers=3, n_kv_heads=2, prefill=64, steps=24, seed=seed)
    kw = dict(variant)
    cfg = M.HdmConfig.packed(G, base=0x40, n_layers=3, n_kv_heads=2, default_sample=kw.pop("default", 1000))
    assert cfg.problems(G) == []
    _check_replay(t, G, cfg, **kw)


def test_replay_equality_can_fail():
    """Negative test: a stimulus with one hint removed does not reproduce the trace."""
    t = load_trace(TRACES / "tiny_llama_stdlib_thr001.npz")
    cfg = M.HdmConfig.packed(G, n_layers=t.n_layers, n_kv_heads=t.n_kv_heads)
    items = M.stimulus_from_trace(t, G, cfg, lines="first")
    k = next(i for i, (kind, x) in enumerate(items) if kind == "hint" and x.has_sample and i > 5000)
    _, events = M.HdmModel(G, cfg).run(items[:k] + items[k + 1:])
    want = M.trace_events(t)
    diff = [i for i, (a, b) in enumerate(zip(events, want)) if a != b]
    assert len(events) == len(want) and len(diff) == 1 and events[diff[0]].sample == cfg.default_sample


def test_trace_refusals():
    t = synth("mixed", n_layers=3, n_kv_heads=2, prefill=16, steps=4, seed=1)
    cfg = M.HdmConfig.packed(G, n_layers=2)
    with pytest.raises(M.HdmError, match="'layer', event .*beyond the configured geometry"):
        M.stimulus_from_trace(t, G, cfg)
    cfg = M.HdmConfig.packed(G, n_layers=3)
    bad = Trace(t.step.copy(), t.layer, t.head, t.pos, t.op, t.score.copy(), 3, 2)
    bad.score[int(np.flatnonzero(t.op == 1)[0])] = 0.5
    with pytest.raises(M.HdmError, match="'score', event .*write with a nonzero score"):
        M.stimulus_from_trace(bad, G, cfg)
    neg = Trace(t.step.copy() - 1, t.layer, t.head, t.pos, t.op, t.score, 3, 2)
    with pytest.raises(CxlkvError, match="negative step"):
        M.stimulus_from_trace(neg, G, cfg)
    with pytest.raises(M.HdmError, match="configuration refused"):
        M.stimulus_from_trace(t, G, M.HdmConfig(**{**cfg.__dict__, "entry_shift": 4}))
    with pytest.raises(M.HdmError, match="lines must include 0"):
        M.stimulus_from_trace(t, G, cfg, lines=[1, 2])
    with pytest.raises(M.HdmError, match="power of two"):
        M.HdmConfig.packed(G, entry_bytes=500)
    with pytest.raises(M.HdmError, match="n_positions must be a power of two"):
        M.HdmGeometry(n_positions=500)


# ---- the RTL's ports ---------------------------------------------------------------------------

def test_event_port_is_the_trackers():
    from cxlkv.hdl.hdm import Hdm
    from cxlkv.hdl.tracker import Tracker
    for geom in ((4, 2, 512), (80, 8, 131072), (3, 5, 64)):
        hdm, trk = Hdm(*geom), Tracker(*geom)
        hdm._MustUse__silence = trk._MustUse__silence = True      # ports only, never elaborated
        assert hdm.event.payload.shape() == trk.event.payload.shape()
    h = Hdm(4, 2, 512)
    h._MustUse__silence = True
    assert {n for n, _ in h.route_layout} >= {"line", "queue", "position", "status", "addr", "tag"}


def test_every_hint_is_accounted_for():
    """used + dropped + orphaned + bad + pending = sample hints + bad step-only hints, on random traffic."""
    rng = np.random.default_rng(7)
    cfg = small_cfg(default_sample=3)
    m = M.HdmModel(G, cfg)
    step, n_sample, n_bad_step = 0, 0, 0
    for _ in range(20000):
        r = rng.random()
        if r < 0.05:
            step = max(0, step + int(rng.integers(-2, 4)))
            m.hint(M.Hint(step))
        elif r < 0.5:
            n_sample += 1
            m.hint(M.Hint(step, 1, int(rng.integers(4)), int(rng.integers(2)), int(rng.integers(20)), 1))
        else:
            m.access(M.Access(cfg.address(int(rng.integers(4)), int(rng.integers(2)), int(rng.integers(20)),
                                          int(rng.integers(2))), int(rng.random() < 0.2)))
    c = m.counters
    assert c["hint_drops"] and c["hint_orphans"] and c["hints_used"] and c["step_errors"]
    assert c["hints_used"] + c["hint_drops"] + c["hint_orphans"] + c["bad_hints"] + len(m.pending) == \
        n_sample + n_bad_step


def test_trace_samples_are_policy_score_to_uq16():
    from cxlkv.models.policy import score_to_uq16
    t = load_trace(TRACES / "tiny_llama_stdlib_thr001.npz")
    edge = np.array([0.0, 1e-9, 0.5 / 65536, 1.5 / 65536, 0.25, 0.9999999, 1.0, 3.0], dtype=np.float32)
    scores = np.concatenate([t.score, edge])
    odd = Trace(np.zeros(len(scores), np.int32), np.zeros(len(scores), np.uint16), np.zeros(len(scores), np.uint16),
                np.zeros(len(scores), np.uint32), np.zeros(len(scores), np.uint8), scores, 1, 1)
    assert M.trace_samples(odd).tolist() == [score_to_uq16(x) for x in scores]
