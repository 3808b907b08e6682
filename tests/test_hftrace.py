"""Real attention traces: the dump path on a tiny random Llama, the training path, the shipped traces.

Tests that need torch/transformers (the optional extra ``traces``) skip with a
reason when it is missing; the numpy helpers and the shipped traces are
checked everywhere.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import hftrace
from cxlkv.models.trace import OP_READ, OP_WRITE, load_trace

TRACES = Path(__file__).resolve().parent.parent / "traces"
SHIPPED = sorted(TRACES.glob("*.npz"))
TEXT = (b"def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
        b"    return a\n\n\nclass Point:\n    def __init__(self, x, y):\n        self.x = x\n") * 2


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch", reason="needs the optional extra 'traces': pip install -e '.[traces]'")
    pytest.importorskip("transformers", reason="needs the optional extra 'traces': pip install -e '.[traces]'")
    from transformers.utils import logging
    logging.disable_progress_bar()
    torch.set_num_threads(2)
    return torch


# --------------------------------------------------------------------------- numpy helpers

def test_group_average_follows_repeat_kv_grouping():
    attn = np.arange(4 * 3, dtype=float).reshape(4, 3)  # 4 query heads, 3 keys
    got = hftrace.group_average(attn, 2)
    np.testing.assert_allclose(got, [(attn[0] + attn[1]) / 2, (attn[2] + attn[3]) / 2])
    np.testing.assert_allclose(hftrace.group_average(attn, 4), attn)  # MHA: no averaging
    with pytest.raises(CxlkvError, match="cannot be grouped"):
        hftrace.group_average(attn, 3)


def test_select_positions_topk_and_threshold():
    w = np.array([0.4, 0.1, 0.2, 0.1, 0.2])
    np.testing.assert_array_equal(hftrace.select_positions(w, topk=2), [0, 2])  # tie 0.2: smaller position
    np.testing.assert_array_equal(hftrace.select_positions(w, topk=3), [0, 2, 4])
    np.testing.assert_array_equal(hftrace.select_positions(w, topk=9), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(hftrace.select_positions(w, threshold=0.2), [0, 2, 4])
    np.testing.assert_array_equal(hftrace.select_positions(w, threshold=0.5), [])
    for kw, msg in (({"topk": 0}, "topk"), ({"threshold": 0.0}, "threshold"), ({"threshold": 1.5}, "threshold"),
                    ({}, "exactly one"), ({"topk": 2, "threshold": 0.1}, "exactly one")):
        with pytest.raises(CxlkvError, match=msg):
            hftrace.select_positions(w, **kw)


def test_trace_builder_layout():
    b = hftrace.TraceBuilder(2, 1)
    b.prefill(2)
    rows = [np.array([[0.5, 0.3, 0.2]]), np.array([[0.1, 0.1, 0.8]])]
    b.decode_step(1, 2, rows, lambda w: hftrace.select_positions(w, topk=2))
    t = b.build({"x": 1}).validate()
    np.testing.assert_array_equal(t.step, [0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(t.layer, [0, 0, 1, 1, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(t.pos, [0, 1, 0, 1, 2, 0, 1, 2, 0, 2])
    np.testing.assert_array_equal(t.op, [1, 1, 1, 1, 1, 0, 0, 1, 0, 0])
    np.testing.assert_allclose(t.score, [0, 0, 0, 0, 0, 0.5, 0.3, 0, 0.1, 0.8], rtol=1e-6)


def test_parse_layers():
    assert hftrace.parse_layers("0,2", 4) == [0, 2]
    assert hftrace.parse_layers("1-3", 4) == [1, 2, 3]
    assert hftrace.parse_layers("all", 3) == [0, 1, 2]
    for bad in ("4", "x", "", "-1"):
        with pytest.raises(CxlkvError, match="--save-kv"):
            hftrace.parse_layers(bad, 4)


def test_heldout_split_is_deterministic_and_disjoint():
    names = [f"pkg/mod{i}.py" for i in range(400)]
    held = [n for n in names if hftrace.is_heldout(n)]
    assert held == [n for n in names if hftrace.is_heldout(n)]
    assert 0 < len(held) < 60  # about 1 in 20


# --------------------------------------------------------------------------- dump on a tiny random Llama

def _dump(tmp_path, **kw):
    kw = {"prefill": 12, "steps": 20, "topk": 4, **kw}
    trace, kv = hftrace.dump_trace(hftrace.TINY, TEXT, text_name="t.py", **kw)
    hftrace.write_dump(tmp_path / "t.npz", trace, kv, tmp_path / "kv.npz" if kv is not None else None)
    return load_trace(tmp_path / "t.npz"), kv


def _reference_rows(torch, n_tokens, seed=0):
    """Group-averaged attention rows of a full (non-incremental) forward, computed by hand."""
    model = hftrace.random_tiny_model(seed)
    model.set_attn_implementation("eager")
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(TEXT[:n_tokens])]), output_attentions=True)
    cfg = model.config
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    per_layer = []
    for a in out.attentions:  # [1, heads, T, T]
        a = a[0].double().numpy()
        per_layer.append(np.stack([a[g * group:(g + 1) * group].mean(axis=0)
                                   for g in range(cfg.num_key_value_heads)]))  # [kv, T, T]
    return per_layer


def test_dump_topk_matches_manual_gqa_average(torch, tmp_path):
    prefill, steps, k = 12, 20, 4
    t, _ = _dump(tmp_path, prefill=prefill, steps=steps, topk=k)
    ref = _reference_rows(torch, prefill + steps)
    assert (t.n_layers, t.n_kv_heads) == (2, 2)
    pre = t.step == 0
    assert pre.sum() == 4 * prefill and (t.op[pre] == OP_WRITE).all()
    checked = 0
    for s in range(1, steps + 1):
        pos_t = prefill + s - 1
        for layer in range(2):
            for head in range(2):
                m = (t.step == s) & (t.layer == layer) & (t.head == head)
                ops, pos, score = t.op[m], t.pos[m], t.score[m]
                assert ops[0] == OP_WRITE and pos[0] == pos_t and score[0] == 0
                assert (ops[1:] == OP_READ).all() and len(pos) == 1 + min(k, pos_t + 1)
                row = ref[layer][head, pos_t, :pos_t + 1]
                want = np.sort(np.argsort(-row, kind="stable")[:k])
                np.testing.assert_array_equal(pos[1:], want)
                np.testing.assert_allclose(score[1:], row[want], rtol=1e-4, atol=1e-6)
                checked += 1
    assert checked == steps * 4


def test_dump_threshold_mode(torch, tmp_path):
    prefill, steps, thr = 8, 10, 0.05
    t, _ = _dump(tmp_path, prefill=prefill, steps=steps, topk=None, threshold=thr)
    ref = _reference_rows(torch, prefill + steps)
    reads = t.op == OP_READ
    assert reads.any() and (t.score[reads] >= thr).all()
    for s in (1, steps):
        pos_t = prefill + s - 1
        for layer in range(2):
            for head in range(2):
                m = (t.step == s) & (t.layer == layer) & (t.head == head) & reads
                row = ref[layer][head, pos_t, :pos_t + 1]
                clear = np.abs(row - thr) > 1e-6  # away from the threshold, rounding cannot flip a pick
                got = np.zeros(len(row), bool)
                got[t.pos[m]] = True
                np.testing.assert_array_equal(got[clear], (row >= thr)[clear])
                assert (t.score[m] >= thr).all()
    assert t.meta["selection"] == {"threshold": thr}


def test_dump_provenance_in_meta(torch, tmp_path):
    t, _ = _dump(tmp_path, seed=3)
    m = t.meta
    cfg = m["model"]["config"]
    assert m["generator"] == "cxlkv.models.hftrace.dump_trace"
    assert m["rope_theta"] == cfg["rope_theta"] == 10000.0
    assert m["num_key_value_heads"] == cfg["num_key_value_heads"] == 2 and cfg["num_attention_heads"] == 4
    assert m["seed"] == 3 and m["model"]["init_seed"] == 3
    assert m["mode"] == "teacher-forced" and m["selection"] == {"topk": 4}
    assert m["source_text"]["name"] == "t.py" and len(m["source_text"]["sha256"]) == 64
    assert {"python", "numpy", "torch", "transformers"} <= set(m["versions"])
    assert m["prefill"] == 12 and m["steps"] == 20 and m["teacher_forced_bits_per_token"] > 0


def test_dump_generate_and_save_kv(torch, tmp_path):
    t, kv = _dump(tmp_path, prefill=10, steps=6, generate=True, save_kv="1")
    assert t.meta["mode"] == "generated (greedy)" and t.step.max() == 6
    with np.load(tmp_path / "kv.npz") as f:
        assert sorted(f.files) == ["k_1", "meta", "v_1"]
        assert f["k_1"].shape == f["v_1"].shape == (2, 16, 8) and f["k_1"].dtype == np.float16
        assert json.loads(str(f["meta"]))["layers"] == [1]


def test_dump_kv_matches_full_forward_cache(torch, tmp_path):
    _, kv = _dump(tmp_path, prefill=6, steps=5, save_kv="0-1")
    model = hftrace.random_tiny_model(0).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([list(TEXT[:11])]), use_cache=True)
    cache = hftrace._out_cache(out)
    for layer in (0, 1):
        k, v = hftrace._cache_kv(cache, layer)
        np.testing.assert_allclose(kv[f"k_{layer}"], k[0].numpy(), rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(kv[f"v_{layer}"], v[0].numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("kw,msg", [
    ({"prefill": 0}, "--prefill"),
    ({"steps": 0}, "--steps"),
    ({"prefill": 200, "steps": 300}, "needs 500"),
    ({"prefill": 10, "steps": 5, "topk": 0}, "--topk"),
    ({"prefill": 10, "steps": 5, "text_offset": 10 ** 6}, "--text-offset"),
])
def test_dump_refuses_bad_arguments(torch, kw, msg):
    kw = {"prefill": 10, "steps": 5, "topk": 4, **kw}
    with pytest.raises(CxlkvError, match=msg):
        hftrace.dump_trace(hftrace.TINY, TEXT, **kw)


def test_dump_refuses_missing_model_dir(torch, tmp_path):
    with pytest.raises(CxlkvError, match="nothing is ever downloaded"):
        hftrace.dump_trace(str(tmp_path / "nope"), TEXT, prefill=4, steps=2, topk=2)


def test_dump_checkpoint_with_its_own_tokenizer(torch, tmp_path):
    """A local checkpoint whose vocabulary is not bytes is read with the tokenizer stored beside it."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    chars = sorted(set(TEXT.decode()))
    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(chars)}}   # one token per character
    tok = Tokenizer(models.BPE(vocab, [], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()                                         # decode joins characters back
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    config = hftrace.llama_config(layers=1, hidden=32, heads=4, kv_heads=2, intermediate=64, max_positions=256,
                                  vocab=len(vocab))
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    trace, _ = hftrace.dump_trace(str(tmp_path), TEXT, prefill=16, steps=8, topk=4)
    src = trace.validate().meta["source_text"]
    assert src["tokenization"].startswith("tokenizer of the checkpoint") and src["tokens_used"] == 24
    assert src["text_used"] == TEXT[:24].decode()
    assert trace.meta["model"]["config"]["vocab_size"] == len(vocab) != hftrace.BYTE_VOCAB


def test_cli_dump_hf(torch, tmp_path, capsys):
    from cxlkv.sw import cli_trace_hf
    (tmp_path / "in.py").write_bytes(TEXT)
    rc = cli_trace_hf.main(["dump-hf", "--model", "tiny", "--text", str(tmp_path / "in.py"), "--prefill", "8",
                            "--steps", "4", "--threshold", "0.1", "--out", str(tmp_path / "o.npz")])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    assert load_trace(tmp_path / "o.npz").meta["selection"] == {"threshold": 0.1}
    rc = cli_trace_hf.main(["dump-hf", "--model", "tiny", "--text", str(tmp_path / "missing"), "--prefill", "8",
                            "--steps", "4", "--out", str(tmp_path / "o2.npz")])
    assert rc == 2 and "cannot read" in capsys.readouterr().err
    rc = cli_trace_hf.main(["dump-hf", "--model", "tiny", "--text", str(tmp_path / "in.py"), "--prefill", "8",
                            "--steps", "4", "--save-kv", "0", "--out", str(tmp_path / "o3.npz")])
    assert rc == 2 and "--kv-out" in capsys.readouterr().err


def test_subcommands_register_run_callables():
    import argparse

    from cxlkv.sw import cli_trace_hf
    p = argparse.ArgumentParser()
    cli_trace_hf.add_subcommands(p.add_subparsers(dest="cmd"))
    a = p.parse_args(["dump-hf", "--model", "tiny", "--text", "x", "--prefill", "1", "--steps", "1", "--out", "o"])
    assert a._run is cli_trace_hf.run_dump and a._trace_run is cli_trace_hf.run_dump
    a = p.parse_args(["train-tiny", "--out-model", "d"])
    assert a._run is cli_trace_hf.run_train and a.minutes == 13.0


def test_train_tiny_then_dump_the_checkpoint(torch, tmp_path):
    """A few steps of the real training path, saved, then loaded as a local byte-level checkpoint."""
    rec = hftrace.train_tiny(tmp_path / "m", minutes=0, max_steps=2, batch=2, seq=64, layers=1, hidden=32,
                             heads=4, kv_heads=2, intermediate=64, log=lambda _: None)
    assert rec["steps"] == 2 and rec["stopped_by"] == "max-steps"
    assert rec["config"]["num_key_value_heads"] == 2 and rec["config"]["rope_theta"] == 10000.0
    assert rec["corpus"]["heldout_files"] > 0 and rec["corpus"]["train_files"] > rec["corpus"]["heldout_files"]
    # A second run stopped at the same step (both inside the warm-up, so the same learning rates)
    # gives the same weights bit for bit: batches and init depend on the seed only (--stop-at-step).
    again = hftrace.train_tiny(tmp_path / "m2", minutes=0, max_steps=3, stop_at_step=2, batch=2, seq=64, layers=1,
                               hidden=32, heads=4, kv_heads=2, intermediate=64, log=lambda _: None)
    assert again["stopped_by"] == "stop-at-step" and again["steps"] == 2
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == (tmp_path / "m2" / "model.safetensors").read_bytes()
    held = (tmp_path / "m" / hftrace.HELDOUT_TEXT).read_bytes()
    trace, _ = hftrace.dump_trace(str(tmp_path / "m"), held, prefill=16, steps=8, topk=4, text_name="heldout.txt")
    m = trace.validate().meta
    assert m["model"]["training"]["steps"] == 2 and m["training_seconds"] == rec["train_seconds"]
    assert len(m["model"]["weights_sha256"]) == 64 and m["source_text"]["tokenization"].startswith("bytes")
    assert (trace.n_layers, trace.n_kv_heads) == (1, 2)


# --------------------------------------------------------------------------- shipped traces

def test_shipped_traces_exist_and_fit_the_budget():
    assert SHIPPED, "traces/ ships at least one real-model trace"
    assert sum(p.stat().st_size for p in TRACES.rglob("*") if p.is_file()) <= 10 * 2 ** 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_trace_loads_with_provenance(path):
    t = load_trace(path)
    m = t.meta
    assert m["generator"] == "cxlkv.models.hftrace.dump_trace"
    cfg = m["model"]["config"]
    assert cfg["rope_theta"] and cfg["num_key_value_heads"] == t.n_kv_heads
    assert cfg["num_hidden_layers"] == t.n_layers
    tr = m["model"]["training"]
    assert tr["seed"] is not None and tr["train_seconds"] > 0 and tr["corpus"]["heldout_sha256"]
    assert m["source_text"]["sha256"] and {"torch", "transformers", "python"} <= set(m["versions"])
    reads = t.op == OP_READ
    assert reads.any() and (t.score[reads] > 0).all() and (t.score[reads] <= 1).all()
    # Every decode step appends exactly one position per queue, the next one.
    writes = ~reads & (t.step > 0)
    assert writes.sum() == m["steps"] * t.n_queues
    assert t.pos[writes].max() == m["prefill"] + m["steps"] - 1


def test_calibrated_mixed_parameters_load_and_match_the_real_trace():
    """The shipped fit loads, and a synth with it reproduces the statistics it records (no stale file)."""
    tracegen = pytest.importorskip("cxlkv.models.tracegen", reason="the synthetic families are not merged yet")
    from cxlkv.models import tracestats
    path = TRACES / "mixed_calibrated.json"
    raw = json.loads(path.read_text())
    params = tracegen.load_params(path)
    assert params["k"] == raw["_fitted_to"]["selection"]["topk"] and params["dense_layers"] == 0
    t = tracegen.synth("mixed", seed=raw["_fit"]["synth_seed"], **raw["_geometry"], **params)
    got = hftrace.fit_features(tracestats.trace_stats(t), t.meta["topk_mass_mean"])
    for k, v in raw["_fitted"].items():
        assert got[k] == pytest.approx(v, abs=1e-4), k
    # The fit is closer to the real trace than mixed's preset is.
    assert raw["_fit"]["loss"] < raw["_fit"]["start_loss"] / 10
    real = load_trace(TRACES / raw["_fitted_to"]["trace"])
    target = hftrace.fit_features(tracestats.trace_stats(real), real.meta["full_rows"]["selected_mass"])
    assert target == pytest.approx(raw["_target"], abs=1e-4)


def test_fit_mixed_improves_and_is_deterministic():
    pytest.importorskip("cxlkv.models.tracegen", reason="the synthetic families are not merged yet")
    real = load_trace(TRACES / "tiny_llama_stdlib_top32.npz")
    p1, r1 = hftrace.fit_mixed(real, evals=4, log=lambda _: None)
    p2, r2 = hftrace.fit_mixed(real, evals=4, log=lambda _: None)
    assert p1 == p2 and r1["loss"] == r2["loss"] <= r1["start_loss"] and r1["evaluations"] == 4
    real.meta["selection"] = {"threshold": 0.01}
    with pytest.raises(CxlkvError, match="top-k"):
        hftrace.fit_mixed(real, evals=2)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_trace_replays_through_every_policy(path):
    policy = pytest.importorskip("cxlkv.models.policy", reason="the policy simulator is not merged yet")
    t = load_trace(path)
    entries = policy.entries_from_budget(t, 12.5)
    reads = int((t.op == OP_READ).sum())
    hits = {}
    for name in policy.POLICIES:
        r = policy.replay(t, name, entries)
        d = r.summary()
        assert d["reads"] == reads and d["fills"] == reads - d["read_hits"]
        assert 0 < d["hit_rate"] < 1 and 0 < d["attention_recall"] <= 1
        hits[name] = d["read_hits"]
    # Belady's MIN is optimal among the policies without prefetch.
    assert hits["min"] >= max(v for k, v in hits.items() if "prefetch" not in k and k != "hw")


def test_shipped_kv_tensors():
    """traces/kv/ holds K and V of a few layers of the same run, for the quantizer's accuracy study."""
    files = sorted((TRACES / "kv").glob("*.npz"))
    assert files
    for path in files:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            assert meta["layers"] and meta["model"]["config"]["num_key_value_heads"]
            cfg = meta["model"]["config"]
            head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            for layer in meta["layers"]:
                for kind in "kv":
                    a = f[f"{kind}_{layer}"]
                    assert a.dtype == np.float16 and np.isfinite(a).all()
                    assert a.shape == (cfg["num_key_value_heads"], meta["positions"], head_dim)
