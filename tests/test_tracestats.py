"""Trace statistics on hand-made traces whose answers are worked out by hand in the comments."""
import math

import numpy as np
import pytest

from cxlkv.models import tracestats as S
from cxlkv.models.trace import Trace

W, R = 1, 0


def _trace(events, n_layers=1, n_kv_heads=2):
    """events: (step, layer, head, pos, op, score)"""
    a = np.array(events, dtype=np.float64).T
    return Trace(step=a[0].astype(np.int32), layer=a[1].astype(np.uint16), head=a[2].astype(np.uint16),
                 pos=a[3].astype(np.uint32), op=a[4].astype(np.uint8), score=a[5].astype(np.float32),
                 n_layers=n_layers, n_kv_heads=n_kv_heads).validate()


def _small():
    ev = [(0, 0, h, p, W, 0) for h in range(2) for p in range(10)]
    ev += [(1, 0, 0, 10, W, 0), (1, 0, 0, 0, R, .5), (1, 0, 0, 5, R, .3), (1, 0, 0, 10, R, .2),
           (1, 0, 1, 10, W, 0), (1, 0, 1, 1, R, 1.0),
           (2, 0, 0, 11, W, 0), (2, 0, 0, 0, R, .5), (2, 0, 0, 11, R, .5)]
    return _trace(ev)


def test_counts_and_rows():
    s = S.trace_stats(_small())
    assert (s["events"], s["reads"], s["writes"], s["n_queues"]) == (29, 6, 23, 2)
    assert (s["steps"], s["first_step"], s["last_step"], s["max_pos"]) == (3, 0, 2, 11)
    assert s["rows"] == 3 and s["decode_steps"] == 2
    assert s["reads_per_row"] == {"mean": 2.0, "min": 1.0, "max": 3.0}
    assert s["row_mass"]["min"] == pytest.approx(1.0) and s["zero_mass_rows"] == 0


def test_concentration_by_hand():
    c = S.trace_stats(_small())["concentration"]
    # rows (.5 .3 .2), (1), (.5 .5): top-1 entry (ceil of 1% and of 10% is 1) holds .5, 1, .5
    assert c["top1pct_share"] == pytest.approx(2 / 3)
    assert c["top10pct_share"] == pytest.approx(2 / 3)
    # Gini: (.2 .3 .5) -> 2(1*.2 + 2*.3 + 3*.5)/3 - 4/3 = 0.2; a single entry 0; equal pair 0
    assert c["gini"] == pytest.approx(0.2 / 3)
    h1 = -(.5 * math.log(.5) + .3 * math.log(.3) + .2 * math.log(.2)) / math.log(3)
    assert c["entropy_norm"] == pytest.approx((h1 + 1.0) / 2)       # the 1-read row is left out
    assert c["small_entries"] == 0.0


def test_sink_local_and_persistence_by_hand():
    s = S.trace_stats(_small(), windows=(5, 16), persist_k=2)
    # mass on positions < 4: .5, 1 (pos 1), .5
    assert s["sink_share"] == pytest.approx(2 / 3)
    # newest positions 10, 10, 11; within 5: {5, 10} -> .5, pos 1 is 9 away -> 0, {11} -> .5
    assert s["local_share"]["5"] == pytest.approx(1 / 3)
    assert s["local_share"]["16"] == pytest.approx(1.0)
    # queue 0: top-2 {0, 5} at step 1, {0, 11} at step 2 -> 1/3; queue 1 has no consecutive pair
    assert s["persistence_jaccard"] == pytest.approx(1 / 3)
    assert s["head_stability"]["per_queue"] == [pytest.approx(1 / 3, abs=1e-4), None]


def test_cold_reads_and_first_touch():
    ev = [(0, 0, 0, p, W, 0) for p in range(4)]
    ev += [(1, 0, 0, 0, R, 1.0), (10, 0, 0, 0, R, .25), (10, 0, 0, 3, R, .25), (10, 0, 0, 9, R, .5)]
    s = S.trace_stats(_trace(ev, n_kv_heads=1), cold_gaps=(5, 10, 11))
    # gaps: pos 0 read at 1 (gap 1), at 10 (gap 9); pos 3 gap 10; pos 9 never accessed before
    assert s["first_touch_reads"] == 1
    assert s["cold_reads"]["5"]["reads"] == pytest.approx(3 / 4)
    assert s["cold_reads"]["10"]["reads"] == pytest.approx(2 / 4)
    assert s["cold_reads"]["11"]["reads"] == pytest.approx(1 / 4)
    # mass shares: row 1 is (1.0), row 10 is (.25, .25, .5); gap >= 10 holds .25 + .5 of 2.0
    assert s["cold_reads"]["10"]["mass"] == pytest.approx(0.75 / 2)


def test_unnormalised_rows_are_normalised_and_zero_rows_counted():
    ev = [(0, 0, 0, 0, W, 0), (0, 0, 0, 1, W, 0),
          (1, 0, 0, 0, R, 2.0), (1, 0, 0, 1, R, 2.0), (2, 0, 0, 0, R, 0.0)]
    s = S.trace_stats(_trace(ev, n_kv_heads=1))
    assert s["zero_mass_rows"] == 1 and s["row_mass"]["max"] == 4.0
    assert s["sink_share"] == pytest.approx(1.0)                   # only the non-zero row counts
    assert s["concentration"]["top1pct_share"] == pytest.approx(0.5)


def test_trace_without_reads_and_table_renders():
    t = _trace([(0, 0, 0, 0, W, 0)], n_kv_heads=1)
    s = S.trace_stats(t)
    assert s["rows"] == 0 and s["reads"] == 0
    assert "events" in S.format_stats(s)
    table = S.format_stats(S.trace_stats(_small()))
    for label in ("sink share", "mass within +-W", "Jaccard", "top 1% / top 10%", "cold reads"):
        assert label in table


def test_newest_position_counts_a_same_step_write_after_the_reads_and_falls_back_to_reads():
    ev = [(0, 0, 0, p, W, 0) for p in range(4)]
    ev += [(1, 0, 0, 0, R, .5), (1, 0, 0, 3, R, .5), (1, 0, 0, 20, W, 0),      # write after its reads
           (1, 0, 1, 7, R, .5), (1, 0, 1, 9, R, .5)]                          # queue 1: never written
    s = S.trace_stats(_trace(ev), windows=(2, 17))
    # queue 0: newest 20 -> pos 3 is 17 away, pos 0 is 20 away; queue 1: newest = its highest read, 9
    assert s["local_share"]["17"] == pytest.approx((0.5 + 1.0) / 2)
    assert s["local_share"]["2"] == pytest.approx((0.0 + 1.0) / 2)
    assert s["first_touch_reads"] == 2
