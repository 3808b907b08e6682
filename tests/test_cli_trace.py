"""`cxlkv trace`: synth -> info -> validate round trip, clean errors (exit 2), the dump-hf extension hook."""
import json
import types

import numpy as np
import pytest

from cxlkv.models import tracegen
from cxlkv.models.trace import Trace, load_trace, save_trace
from cxlkv.sw import cli, cli_trace

SMALL = ["--layers", "2", "--kv-heads", "1", "--prefill", "32", "--steps", "16"]


def test_family_names_match_the_generator():
    assert cli_trace.FAMILY_NAMES == tracegen.FAMILIES


def test_synth_info_validate_round_trip(tmp_path, capsys):
    out = tmp_path / "sub" / "t.npz"
    assert cli.main(["trace", "synth", "--family", "mixed", "--out", str(out), "--seed", "3",
                     "--param", "k=8", *SMALL]) == 0
    assert "wrote" in capsys.readouterr().out
    t = load_trace(out)
    assert t.meta["family"] == "mixed" and t.meta["seed"] == 3 and t.meta["params"]["k"] == 8
    ref = tracegen.synth("mixed", n_layers=2, n_kv_heads=1, prefill=32, steps=16, seed=3, k=8)
    np.testing.assert_array_equal(t.score, ref.score)
    np.testing.assert_array_equal(t.pos, ref.pos)

    assert cli.main(["trace", "validate", str(out)]) == 0
    assert "valid trace" in capsys.readouterr().out
    assert cli.main(["trace", "info", str(out)]) == 0
    table = capsys.readouterr().out
    assert "sink share" in table and "mass within +-W" in table
    assert cli.main(["trace", "info", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["events"] == len(t) and s["n_queues"] == 2 and s["meta"]["family"] == "mixed"
    assert s["reads_per_row"]["mean"] > 8          # layer 0 is dense in 'mixed'


def test_params_file_then_param_override(tmp_path, capsys):
    pf = tmp_path / "p.json"
    pf.write_text(json.dumps({"_source": "fit", "k": 5, "needle_rate": 0.0}))
    out = tmp_path / "t.npz"
    assert cli.main(["trace", "synth", "--family", "heavy", "--out", str(out), "--params", str(pf),
                     "--param", "k=6", *SMALL]) == 0
    t = load_trace(out)
    assert t.meta["params"]["k"] == 6 and t.meta["params_file"] == str(pf)
    assert (t.op == 0).sum() == 6 * 16 * 2


@pytest.mark.parametrize("argv,message", [
    (["synth", "--family", "nope"], "unknown trace family 'nope'; valid families: sinks"),
    (["synth", "--family", "mixed", "--param", "bogus=1"], "unknown synth parameter(s) bogus"),
    (["synth", "--family", "mixed", "--param", "k"], "--param must be KEY=VALUE"),
    (["synth", "--family", "mixed", "--param", "k=abc"], "value must be a number"),
    (["synth", "--family", "mixed", "--param", "k=0"], "'k' must be >= 1"),
    (["synth", "--family", "mixed", "--param", "rho=1.5"], "'rho' must be in [0, 1)"),
    (["synth", "--family", "mixed", "--steps", "0"], "steps must be an integer in 1.."),
    (["synth", "--family", "mixed", "--params", "{tmp}/missing.json"], "no such parameter file"),
    (["synth", "--family", "mixed", "--params", "{tmp}/bad.json"], "not valid JSON"),
    (["synth", "--family", "mixed", "--params", "{tmp}/list.json"], "must hold a JSON object"),
    (["info", "{tmp}/garbage.npz"], "not an .npz archive (no zip header)"),
    (["validate", "{tmp}/missing.npz"], "no such file"),
    (["validate", "{tmp}/badstep.npz"], "key 'step', event 2: step decreases"),
])
def test_errors_exit_2_with_one_message(tmp_path, capsys, argv, message):
    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "garbage.npz").write_bytes(b"not a zip")
    with open(tmp_path / "badstep.npz", "wb") as f:
        np.savez(f, step=np.array([0, 1, 0], np.int32), layer=np.zeros(3, np.uint16),
                 head=np.zeros(3, np.uint16), pos=np.arange(3, dtype=np.uint32), op=np.ones(3, np.uint8),
                 score=np.zeros(3, np.float32), n_layers=np.array(1), n_kv_heads=np.array(1))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if argv[0] == "synth":
        argv = ["synth", *SMALL, "--out", str(tmp_path / "o.npz"), *argv[1:]]
    assert cli.main(["trace", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_unwritable_output_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert cli.main(["trace", "synth", "--family", "recent", "--out", str(tmp_path / "file" / "t.npz"),
                     *SMALL]) == 2
    assert "cannot write the trace" in capsys.readouterr().err


def test_extension_module_adds_actions(monkeypatch, capsys):
    calls = []

    def add_subcommands(sub):
        p = sub.add_parser("dump-hf", help="dump a model's attention")
        p.add_argument("--model")
        p.set_defaults(_trace_run=lambda args: calls.append(args.model) or 0)

    fake = types.ModuleType(cli_trace._HF_MODULE)
    fake.add_subcommands = add_subcommands
    monkeypatch.setitem(__import__("sys").modules, cli_trace._HF_MODULE, fake)
    assert cli.main(["trace", "dump-hf", "--model", "tiny"]) == 0
    assert calls == ["tiny"]


def test_extension_module_import_errors_surface(monkeypatch):
    def broken(name):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(cli_trace.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="torch"):
        cli.build_parser()


def test_validate_an_empty_trace(tmp_path, capsys):
    empty = Trace(*(np.zeros(0, d) for d in (np.int32, np.uint16, np.uint16, np.uint32, np.uint8, np.float32)), 1, 1)
    save_trace(tmp_path / "e.npz", empty)
    assert cli.main(["trace", "validate", str(tmp_path / "e.npz")]) == 0
    assert capsys.readouterr().out.strip().endswith("valid trace, 0 events, 1 layers x 1 KV heads, no steps")


def test_shuffle_reads_moves_only_reads_within_their_step_and_queue(tmp_path, capsys):
    src, out, again, other = (tmp_path / n for n in ("t.npz", "s.npz", "s2.npz", "s3.npz"))
    assert cli.main(["trace", "synth", "--family", "mixed", "--out", str(src), *SMALL]) == 0
    assert cli.main(["trace", "shuffle-reads", str(src), str(out), "--seed", "4"]) == 0
    assert "reads shuffled" in capsys.readouterr().out
    t, s = load_trace(src), load_trace(out)
    assert s.meta["shuffled_reads"] == {**s.meta["shuffled_reads"], "seed": 4, "source": str(src)}
    assert s.meta["family"] == "mixed" and (s.n_layers, s.n_kv_heads) == (t.n_layers, t.n_kv_heads)
    writes = t.op == 1
    # writes and steps in place; every event keeps its step and queue
    np.testing.assert_array_equal(s.op, t.op)
    np.testing.assert_array_equal(s.step, t.step)
    np.testing.assert_array_equal(s.queue, t.queue)
    for k in ("pos", "score"):
        np.testing.assert_array_equal(getattr(s, k)[writes], getattr(t, k)[writes])
    # within each (step, queue): the same reads (position with its score), in another order somewhere
    moved = False
    for key in set(zip(t.step[~writes].tolist(), t.queue[~writes].tolist())):
        a = (t.step == key[0]) & (t.queue == key[1]) & ~writes
        b = (s.step == key[0]) & (s.queue == key[1]) & ~writes
        assert sorted(zip(t.pos[a], t.score[a])) == sorted(zip(s.pos[b], s.score[b]))
        moved |= not np.array_equal(t.pos[a], s.pos[b])
    assert moved
    # deterministic per seed, another seed another order
    assert cli.main(["trace", "shuffle-reads", str(src), str(again), "--seed", "4"]) == 0
    assert cli.main(["trace", "shuffle-reads", str(src), str(other), "--seed", "5"]) == 0
    np.testing.assert_array_equal(load_trace(again).pos, s.pos)
    assert not np.array_equal(load_trace(other).pos, s.pos)


def test_shuffle_reads_refusals(tmp_path, capsys):
    src = tmp_path / "t.npz"
    assert cli.main(["trace", "synth", "--family", "recent", "--out", str(src), *SMALL]) == 0
    capsys.readouterr()
    assert cli.main(["trace", "shuffle-reads", str(src), str(src)]) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert cli.main(["trace", "shuffle-reads", str(tmp_path / "missing.npz"), str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and "no such file" in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()
