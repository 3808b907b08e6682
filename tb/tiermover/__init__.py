"""cocotb bench of the tier mover (cxlkv.hdl.tiermover) against cxlkv.models.tiermover."""
from cxlkv.tb.runner import CocotbBench


def _make_dut(n_queues, n_positions, frames_per_queue, lines_per_entry, line_bits, depth, buf_lines,
              host_ops=False, host_rsp_depth=4):
    from cxlkv.hdl.tiermover import TierMover
    return TierMover(n_queues=n_queues, n_positions=n_positions, frames_per_queue=frames_per_queue,
                     lines_per_entry=lines_per_entry, line_bits=line_bits, depth=depth, buf_lines=buf_lines,
                     host_ops=host_ops, host_rsp_depth=host_rsp_depth)


#: Small geometry: 3 queues (a 2-bit queue field, so queue 3 is out of range), 32 positions, 3 frames
#: per queue (slot 3 is out of range), 4 lines of 32 bits per entry, 8 jobs in flight, 4-line buffers.
PARAMS = {"n_queues": 3, "n_positions": 32, "frames_per_queue": 3, "lines_per_entry": 4, "line_bits": 32,
          "depth": 8, "buf_lines": 4}

#: Minimal: a ring of 2 jobs and 1-line buffers (every stage waits on the next), 3 lines of 16 bits
#: per entry (not a power of two), powers of two elsewhere (no out-of-range queue or slot encodable).
PARAMS_MIN = {"n_queues": 2, "n_positions": 16, "frames_per_queue": 2, "lines_per_entry": 3, "line_bits": 16,
              "depth": 2, "buf_lines": 1}

#: Host line operations (``host_ops``) in both geometries; the minimal one with a 2-slot response
#: buffer (3 lines per entry: line 3 is encodable and out of range, a bad command).
PARAMS_HOST = {**PARAMS, "host_ops": True}
PARAMS_MIN_HOST = {**PARAMS_MIN, "host_ops": True, "host_rsp_depth": 2}

BENCHES = [CocotbBench("tiermover", _make_dut, "cxlkv.tb.tiermover.test_tiermover", PARAMS),
           CocotbBench("tiermover", _make_dut, "cxlkv.tb.tiermover.test_tiermover", PARAMS_MIN),
           CocotbBench("tiermover", _make_dut, "cxlkv.tb.tiermover.test_tiermover", PARAMS_HOST),
           CocotbBench("tiermover", _make_dut, "cxlkv.tb.tiermover.test_tiermover", PARAMS_MIN_HOST)]
