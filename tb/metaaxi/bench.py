"""``metaaxi.tracker_events_per_cycle``: the tracker behind its AXI4 metadata master on
cocotbext-axi's AxiRam without pauses (test_full_rate_over_axi), events accepted per clock."""


def measure():
    from cxlkv.tb.metaaxi import BENCHES
    from cxlkv.tb.runner import run
    res = run(BENCHES[1], testcase="test_full_rate_over_axi")
    if not res.passed:
        raise RuntimeError(f"AXI throughput test failed; see {res.build_dir}")
    return list(res.metrics.values())


if __name__ == "__main__":
    import json
    for rec in measure():
        print(json.dumps(rec))
