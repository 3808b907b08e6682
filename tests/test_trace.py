"""Trace files: the contract's format, and clean refusal of every kind of malformed file."""
import json

import numpy as np
import pytest

from cxlkv.errors import CxlkvError, TraceFormatError
from cxlkv.models.trace import EVENT_KEYS, Trace, load_trace, save_trace


def _arrays(n=6):
    return {
        "step": np.array([0, 0, 1, 1, 2, 2], np.int32)[:n],
        "layer": np.array([0, 1, 0, 1, 0, 1], np.uint16)[:n],
        "head": np.array([0, 1, 1, 0, 0, 1], np.uint16)[:n],
        "pos": np.array([0, 1, 2, 3, 4, 5], np.uint32)[:n],
        "op": np.array([1, 1, 0, 0, 0, 1], np.uint8)[:n],
        "score": np.array([0, 0, 0.5, 0.25, 1.0, 0], np.float32)[:n],
        "n_layers": np.array(2), "n_kv_heads": np.array(2),
    }


def _write(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def test_round_trip(tmp_path):
    a = _arrays()
    t = Trace(**{k: a[k] for k in EVENT_KEYS}, n_layers=2, n_kv_heads=2, meta={"generator": "test"})
    save_trace(tmp_path / "t.npz", t)
    back = load_trace(tmp_path / "t.npz")
    for k in EVENT_KEYS:
        np.testing.assert_array_equal(getattr(back, k), a[k])
        assert getattr(back, k).dtype == EVENT_KEYS[k]
    assert back.meta == {"generator": "test"} and back.n_queues == 4
    np.testing.assert_array_equal(back.queue, [0, 3, 1, 2, 0, 3])


@pytest.mark.parametrize("mutate,key,index", [
    (lambda a: a.pop("score"), "score", None),
    (lambda a: a.pop("n_kv_heads"), "n_kv_heads", None),
    (lambda a: a.__setitem__("step", np.array([0, 0, 1, 0, 2, 2], np.int32)), "step", 3),
    (lambda a: a.__setitem__("layer", np.array([0, 1, 0, 2, 0, 1], np.uint16)), "layer", 3),
    (lambda a: a.__setitem__("head", np.array([0, 1, 1, 0, 0, 7], np.uint16)), "head", 5),
    (lambda a: a.__setitem__("score", np.array([0, 0, 0.5, np.nan, 1, 0], np.float32)), "score", 3),
    (lambda a: a.__setitem__("score", np.array([0, 0, np.inf, 0, 1, 0], np.float32)), "score", 2),
    (lambda a: a.__setitem__("score", np.array([0, 0, -0.5, 0, 1, 0], np.float32)), "score", 2),
    (lambda a: a.__setitem__("op", np.array([1, 1, 0, 2, 0, 1], np.uint8)), "op", 3),
    (lambda a: a.__setitem__("score", np.array([0, 0, 0.5, 0, 1, 0.25], np.float32)), "score", 5),   # a write's
    (lambda a: a.__setitem__("pos", np.arange(5, dtype=np.uint32)), "pos", 5),
    (lambda a: a.__setitem__("pos", np.array([0, 1, -2, 3, 4, 5], np.int64)), "pos", 2),
    (lambda a: a.__setitem__("layer", np.zeros(6, np.float32)), "layer", None),
    (lambda a: a.__setitem__("n_layers", np.array(0)), "n_layers", None),
    (lambda a: a.__setitem__("n_layers", np.array([2, 2])), "n_layers", None),
    (lambda a: a.__setitem__("meta", np.array("{not json")), "meta", None),
])
def test_malformed_trace_is_refused_naming_key_and_event(tmp_path, mutate, key, index):
    a = _arrays()
    mutate(a)
    path = _write(tmp_path / "bad.npz", a)
    with pytest.raises(TraceFormatError) as exc:
        load_trace(path)
    assert exc.value.key == key
    assert exc.value.index == index
    assert f"key '{key}'" in str(exc.value)
    if index is not None:
        assert f"event {index}" in str(exc.value)


def test_the_earliest_bad_event_is_named_whichever_rule_it_breaks(tmp_path):
    # a NaN score at event 2 and a layer out of range at event 4: event 2 is named (the key order
    # of the checks used to name the layer first); the value is shown as a number, not a numpy repr
    a = _arrays()
    a["score"] = np.array([0, 0, np.nan, 0.25, 1.0, 0], np.float32)
    a["layer"] = np.array([0, 1, 0, 1, 5, 1], np.uint16)
    with pytest.raises(TraceFormatError) as exc:
        load_trace(_write(tmp_path / "two.npz", a))
    assert (exc.value.key, exc.value.index) == ("score", 2)
    assert "score is not finite (NaN or Inf): nan" in str(exc.value) and "np." not in str(exc.value)
    a["step"] = np.array([0, 1, 0, 1, 2, 2], np.int32)       # now a decreasing step at event 2 ties:
    with pytest.raises(TraceFormatError) as exc:              # the rules' order decides (score first)
        load_trace(_write(tmp_path / "three.npz", a))
    assert (exc.value.key, exc.value.index) == ("score", 2)
    a["score"] = np.array([0, 0, 0.5, 0.25, 1.0, 0], np.float32)
    with pytest.raises(TraceFormatError) as exc:
        load_trace(_write(tmp_path / "four.npz", a))
    assert (exc.value.key, exc.value.index) == ("step", 2)


@pytest.mark.parametrize("content", [b"", b"hello, not a zip", b"PK\x03\x04garbage"])
def test_not_an_npz_is_refused(tmp_path, content):
    """Named as what it is, not with numpy's advice to load a pickle unsafely."""
    path = tmp_path / "x.npz"
    path.write_bytes(content)
    with pytest.raises(CxlkvError, match=r"not an? (readable )?\.npz (trace|archive)") as exc:
        load_trace(path)
    assert "pickle" not in str(exc.value)


def test_bare_npy_is_refused(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(3))
    with pytest.raises(CxlkvError, match="not an .npz"):
        load_trace(path)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(CxlkvError, match="no such file"):
        load_trace(tmp_path / "nope.npz")


def test_unknown_keys_are_ignored_and_meta_is_optional(tmp_path):
    a = _arrays()
    a["extra"] = np.arange(3)
    t = load_trace(_write(tmp_path / "t.npz", a))
    assert t.meta == {} and len(t) == 6


def test_save_refuses_an_invalid_trace(tmp_path):
    a = _arrays()
    a["layer"] = np.array([0, 1, 0, 9, 0, 1], np.uint16)
    t = Trace(**{k: a[k] for k in EVENT_KEYS}, n_layers=2, n_kv_heads=2)
    with pytest.raises(TraceFormatError):
        save_trace(tmp_path / "t.npz", t)
    assert not (tmp_path / "t.npz").exists()


def test_meta_round_trips_as_json(tmp_path):
    a = _arrays()
    a["meta"] = np.array(json.dumps({"seed": 3}))
    assert load_trace(_write(tmp_path / "t.npz", a)).meta == {"seed": 3}


@pytest.mark.parametrize("meta", [[1, 2], "text", 3, None])
def test_meta_must_be_a_json_object(tmp_path, meta):
    a = _arrays()
    a["meta"] = np.array(json.dumps(meta))
    with pytest.raises(TraceFormatError, match="key 'meta': must hold a JSON object"):
        load_trace(_write(tmp_path / "t.npz", a))
    t = Trace(**{k: _arrays()[k] for k in EVENT_KEYS}, n_layers=2, n_kv_heads=2, meta=meta)
    with pytest.raises(TraceFormatError, match="key 'meta': must be a dict"):
        save_trace(tmp_path / "s.npz", t)


def test_a_geometry_too_large_to_simulate_is_refused_by_the_simulators(tmp_path):
    """The format allows 65536 x 65536 queues; the simulators, which keep counters per queue, refuse
    it by name instead of asking numpy for hundreds of gigabytes."""
    from cxlkv.models.policy import replay
    from cxlkv.models.tracestats import trace_stats
    a = _arrays()
    a["n_layers"], a["n_kv_heads"] = np.array(65536), np.array(65536)
    t = load_trace(_write(tmp_path / "t.npz", a))
    for run in (lambda: replay(t, "lru", 4), lambda: trace_stats(t)):
        with pytest.raises(CxlkvError, match="4,294,967,296 queues .* holds at most 4,194,304"):
            run()


def test_a_wide_float_score_beyond_float32_is_refused_not_cast_to_inf(tmp_path):
    a = _arrays()
    a["score"] = np.array([0, 0, 1e300, 0.25, 1.0, 0], np.float64)
    with pytest.raises(TraceFormatError, match=r"key 'score', event 2: value 1e\+300 does not fit float32"):
        load_trace(_write(tmp_path / "t.npz", a))


def test_meta_as_a_byte_string_array_is_read_as_utf8_json(tmp_path):
    """The contract's "0-d string array" includes numpy's byte strings (dtype S)."""
    a = _arrays()
    a["meta"] = np.array(b'{"seed": 3}')
    assert load_trace(_write(tmp_path / "t.npz", a)).meta == {"seed": 3}
    a["meta"] = np.array(b"\xff{}")
    with pytest.raises(TraceFormatError, match="key 'meta': a byte string that is not UTF-8"):
        load_trace(_write(tmp_path / "u.npz", a))
