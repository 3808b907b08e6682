"""``make bench``'s driver (tb/bench.py): merging into bench.json, the table, a bad file refused."""
import json

from cxlkv.tb import bench


def test_earlier_figures_are_kept_and_shown(tmp_path, capsys):
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"x.rate": {"value": 1.5, "unit": "events/cycle", "config": {"n": 4}}}))
    assert bench.main(["--out", str(out), "--only", "no-such-block"]) == 0      # runs nothing
    assert json.loads(out.read_text())["x.rate"]["value"] == 1.5
    table = capsys.readouterr().out
    assert "x.rate" in table and "earlier" in table and "1.5 events/cycle  (n=4)" in table


def test_a_bench_file_that_is_not_an_object_is_refused_before_anything_runs(tmp_path, capsys):
    for text in ("[1, 2]", "{not json"):
        out = tmp_path / "bench.json"
        out.write_text(text)
        assert bench.main(["--out", str(out), "--only", "no-such-block"]) == 2
        assert out.read_text() == text                         # left as it was
        assert "move it aside or delete it (nothing was run)" in capsys.readouterr().err
