"""Bad input to the command line tools and transports: each is refused by name with exit status 2 (or a
CxlkvError from the API), never a traceback. The cases a review found reaching users as tracebacks."""
import json

import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.sw import cli, fpga
from cxlkv.sw.driver import SyncDevice
from cxlkv.sw.serial_transport import BridgeEmulator, SerialTransport
from cxlkv.sw.transport import MmioTransport, TransportError


def _err(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("argv, message", [
    (["ctl", "--transport", "serial", "--device", "/dev/null", "--baud", "0", "info"],
     "argument --baud: 0 is not a positive integer"),
    (["ctl", "--transport", "mmio", "--device", "x", "--offset", "-4", "info"], "argument --offset: -4 is negative"),
    (["ctl", "--transport", "mmio", "--device", "x", "--offset", "abc", "info"],
     "argument --offset: 'abc' is not an integer"),
    (["quant", "error", "--seed", "-1"], "argument --seed: -1 is negative"),
    (["quant", "attention", "--seed", "-4"], "argument --seed: -4 is negative"),
])
def test_bad_numbers_are_refused_by_argparse(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and message in _err(capsys)


@pytest.mark.parametrize("argv, message", [
    (["bitstream", "--board", "ulx3s-85f", "--baud", "0"], "argument --baud: 0 is not a positive integer"),
    (["bitstream", "--board", "ulx3s-85f", "--core-mhz", "nan"], "argument --core-mhz: nan is not a positive number"),
])
def test_fpga_bad_numbers_are_refused_by_argparse(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        fpga.main(argv)
    assert exc.value.code == 2 and message in _err(capsys)


def test_fpga_files_that_are_not_text_or_not_files(tmp_path, capsys):
    binary = tmp_path / "top.tim"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    for argv in (["report", str(binary)], ["paths", str(binary), "--period", "8"]):
        assert fpga.main(argv) == 2
        assert "is not text" in _err(capsys)
    assert fpga.main(["report", str(tmp_path)]) == 2
    assert f"{tmp_path}: not a file" in _err(capsys)
    assert fpga.main(["constraints", "--out", str(binary)]) == 2         # a file where a directory goes
    assert "File exists" in _err(capsys)


def test_the_uart_refuses_a_baud_rate_of_zero():
    from cxlkv.hdl.boards.ecp5 import uart_divisor
    with pytest.raises(TransportError, match="baud rate 0"):
        SerialTransport("/dev/null", 0)
    with pytest.raises(TransportError, match="baud rate 0"):
        BridgeEmulator(baud=0)
    with pytest.raises(ValueError, match="positive baud rate"):
        uart_divisor(100.0, 0)


def test_mmio_offsets_within_a_page_and_bad_paths(tmp_path):
    """The register block may start anywhere 4-aligned in the device file (mmap itself takes page offsets)."""
    path = tmp_path / "bar"
    image = bytearray(8192)
    image[0x104:0x108] = (0x43584B56).to_bytes(4, "little")                 # ID at the block's offset 0
    image[0x10C:0x110] = (2 << 16 | 4).to_bytes(4, "little")                # GEOMETRY: 4 layers x 2 KV heads
    image[0x110] = 10                                                       # GEOMETRY2.entries_log2
    image[0x111] = 16                                                       # GEOMETRY2.bitags
    image[0x114] = 1                                                        # CAPS.tracker
    path.write_bytes(bytes(image))
    with SyncDevice(MmioTransport(str(path), offset=0x104)) as dev:
        assert dev.info()["id"] == "0x43584b56" and dev.info()["queues"] == 8
        dev.configure(alpha=0x1234)
    from cxlkv.models import regmap
    off = 0x104 + regmap.BY_NAME["ALPHA"].offset
    assert int.from_bytes(path.read_bytes()[off:off + 4], "little") == 0x1234
    with pytest.raises(TransportError, match="multiple of 4"):
        MmioTransport(str(path), offset=2)
    with pytest.raises(TransportError, match="cannot be opened for mapping"):
        MmioTransport(str(tmp_path))
    with pytest.raises(TransportError, match="is the file or BAR that large"):
        MmioTransport(str(path), offset=8192)
    with pytest.raises(TransportError, match="is the file or BAR that large"):
        MmioTransport(str(path), offset=0x8000000000000000)     # beyond a C long: OverflowError inside


def test_serial_baud_rates_outside_what_a_uart_goes_are_refused():
    # 1 baud would wait 54 minutes to resynchronise; 4e9 overflowed inside pyserial
    for baud in (1, 299, 12_000_001, 4_000_000_000):
        with pytest.raises(TransportError, match=r"an integer in 300 \.\. 12000000"):
            SerialTransport("/dev/null", baud)


def test_a_port_that_goes_away_is_a_clear_error():
    # pyserial's flush raises termios.error when a USB UART is unplugged mid-replay
    import asyncio
    import termios

    class Gone:
        def reset_input_buffer(self):
            raise termios.error(5, "Input/output error")

    t = SerialTransport.__new__(SerialTransport)
    t.port, t.baud, t.ser = "/dev/ttyUSB9", 3_000_000, Gone()
    with pytest.raises(TransportError, match="/dev/ttyUSB9: the port went away"):
        asyncio.run(t._quiet())


@pytest.mark.parametrize("argv", [
    ["ctl", "config", "alpha=0x" + "f" * 4000],
    ["ctl", "--build", "n_layers=0x" + "f" * 4000, "info"],
    ["ctl", "--transport", "mmio", "--device", "x", "--offset", "1" * 5000, "info"],
])
def test_numbers_too_long_to_print_are_refused_as_numbers(capsys, argv):
    try:
        code = cli.main(argv)
    except SystemExit as exc:                                  # argparse's own refusal
        code = exc.code
    assert code == 2
    err = _err(capsys)
    assert "not an integer" in err or "is not a number" in err


def test_running_out_of_memory_is_one_line(monkeypatch, capsys):
    from cxlkv.sw import cli_ctl

    def huge(args):
        raise MemoryError
    monkeypatch.setattr(cli_ctl, "run", huge)
    assert cli.main(["ctl", "info"]) == 2
    assert "cxlkv: error: out of memory" in _err(capsys)


def test_bisnoop_scenario_that_is_not_text(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert cli.main(["bisnoop", "run", str(path)]) == 2
    assert "is not UTF-8 text" in _err(capsys)


def test_fit_mixed_refuses_a_bad_out_before_fitting(tmp_path, capsys):
    from cxlkv import repo_root
    trace = repo_root() / "traces" / "tiny_llama_stdlib_top32.npz"
    assert cli.main(["trace", "fit-mixed", str(trace), "--out", str(tmp_path), "--evals", "1"]) == 2
    err = _err(capsys)
    assert f"--out {tmp_path}: is a directory" in err
    assert "eval" not in err.lower().replace("--evals", "")     # no fit ran


def test_meta_that_is_not_an_object_is_refused_by_every_trace_command(tmp_path, capsys):
    from cxlkv.models.trace import EVENT_KEYS
    arrays = {k: np.zeros(2, dt) for k, dt in EVENT_KEYS.items()}
    arrays["pos"] = np.arange(2, dtype=EVENT_KEYS["pos"])
    path = tmp_path / "t.npz"
    with open(path, "wb") as f:
        np.savez(f, **arrays, n_layers=np.array(1), n_kv_heads=np.array(1), meta=np.array(json.dumps([1, 2])))
    for argv in (["trace", "validate", str(path)], ["trace", "info", str(path), "--json"]):
        assert cli.main(argv) == 2
        assert "key 'meta': must hold a JSON object" in _err(capsys)
    with pytest.raises(CxlkvError):
        from cxlkv.models.trace import load_trace
        load_trace(path)


@pytest.mark.parametrize("values, message", [
    (["70000", "1"], "70000 is beyond FP16's range"),
    ([str(v) for v in range(40)], "a line holds 32 values, got 40"),
    (["one"], "values must be numbers"),
])
def test_quant_line_refuses_what_it_would_change(capsys, values, message):
    """A line is 32 FP16 values: more values, or a value FP16 cannot hold, are refused, not cut or
    turned into inf (the quantizer's contract: nothing silently altered)."""
    assert cli.main(["quant", "line", "--fmt", "int8", *values]) == 2
    assert message in _err(capsys)


def test_a_replay_needing_more_buckets_names_a_build_that_exists():
    """n_buckets is a power of two up to 65536: the advice names one, or says none holds it."""
    from cxlkv.models.tracegen import synth
    from cxlkv.sw.driver import ConfigError
    from cxlkv.sw.transport import ModelTransport
    trace = synth("recent", n_layers=2, n_kv_heads=2, prefill=8, steps=8, seed=1)
    with SyncDevice(ModelTransport(n_layers=2, n_kv_heads=2)) as dev:
        with pytest.raises(ConfigError, match=r"need 12475 deadline buckets .* a build with n_buckets = 16384$"):
            dev.replay(trace, 4, hw_rank_tau=9000)
        with pytest.raises(ConfigError, match=r"no build has that many: n_buckets <= 65536"):
            dev.replay(trace, 4, hw_rank_tau=1048576)


def test_configure_refuses_a_block_the_device_lacks():
    """A setting of an optional block the device does not have (CAPS) is refused with the block's
    name, and nothing of the request is written."""
    from cxlkv.sw.driver import ConfigError
    from cxlkv.sw.transport import ModelTransport
    with SyncDevice(ModelTransport(n_layers=2, n_kv_heads=2, prefetch=False, tiers="none")) as dev:
        caps = dev.read_fields("CAPS")
        assert not (caps["prefetch"] or caps["bisnoop"] or caps["tiermover"]) and caps["phase"]
        before = dev.config()
        with pytest.raises(ConfigError, match=r"no prefetch block \(CAPS.prefetch = 0\), so prefetch_window "
                                              r"\(only its reset value 0 is taken\), prefetch_period \(only its "
                                              r"reset value 64 is taken\) would have no effect; this device has no "
                                              r"bisnoop block \(CAPS.bisnoop = 0\), so bi_timeout .*nothing was written"):
            dev.configure(alpha=0x1234, prefetch_window=4, prefetch_period=9, bi_timeout=5)
        with pytest.raises(ConfigError, match=r"no tiermover block .*, so tier_lat_dram \(only its reset value 2"):
            dev.configure(tier_lat_dram=3)
        assert dev.config() == before
        dev.configure(prefetch_window=0, tier_lat_dram=2)   # their reset values: let through
        dev.configure(alpha=0x1234, phase_ratio=3)   # blocks it has: written
        assert dev.config()["alpha"] == 0x1234 and dev.config()["phase_ratio"] == 3
    with SyncDevice(ModelTransport(n_layers=2, n_kv_heads=2, tracker="none")) as dev:
        with pytest.raises(ConfigError, match=r"no tracker block \(CAPS.tracker = 0\), so queue_budget"):
            dev.configure(queue_budget=8)


@pytest.mark.parametrize("argv, message", [
    (["-t", "model", "--device", "/dev/ttyS0", "--offset", "8", "--baud", "9600"],
     "--device applies to the mmio and serial transports; --offset applies to the mmio transport; "
     "--baud applies to the serial transport, not model"),
    (["-t", "model", "--offset", "0"], "--offset applies to the mmio transport, not model"),
    (["-t", "serial", "--device", "/dev/null", "--offset", "4"], "--offset applies to the mmio transport, not serial"),
    (["-t", "mmio", "--device", "x", "--baud", "9600"], "--baud applies to the serial transport, not mmio"),
    (["-t", "mmio", "--device", "x", "--build", "n_layers=2"], "--build applies to the model and sim transports, not mmio"),
    (["-t", "sim", "--device", "x"], "--device applies to the mmio and serial transports, not sim"),
])
def test_ctl_refuses_a_transport_option_that_does_not_apply(capsys, argv, message):
    """Refused before any transport is opened (sim would build a harness first)."""
    assert cli.main(["ctl", *argv, "info"]) == 2
    assert _err(capsys) == f"cxlkv: error: {message}\n"


def test_ctl_build_names_an_unknown_parameter_and_the_valid_ones(capsys):
    from cxlkv.sw.cli_ctl import BUILD_NAMES
    assert cli.main(["ctl", "-t", "model", "--build", "foo=1", "info"]) == 2
    assert _err(capsys) == (f"cxlkv: error: bad --build 'foo=1': 'foo' is not a build parameter; "
                            f"valid: {', '.join(BUILD_NAMES)}\n")
    assert cli.main(["ctl", "-t", "model", "--build", "n_layers", "info"]) == 2
    assert "bad --build 'n_layers': use NAME=VALUE" in _err(capsys)
    assert cli.main(["ctl", "-t", "model", "--build", "tracker_select=matrix", "--build", "max_budget=16",
                     "--build", "prefetch=0", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queues"] == 8


@pytest.mark.parametrize("argv, message", [
    (["-t", "model", "--build", "n_layers=2", "--build", "n_layers=3", "info"],
     "--build 'n_layers' given twice ('n_layers=2', 'n_layers=3'): give each name once"),
    (["config", "alpha=5", "alpha=6"], "setting 'alpha' given twice ('alpha=5', 'alpha=6'): give each name once"),
    (["replay", "TRACE", "-C", "2", "--param", "hw_tau=3", "--param", "hw_tau=4"],
     "--param 'hw_tau' given twice ('hw_tau=3', 'hw_tau=4'): give each name once"),
])
def test_ctl_refuses_a_name_given_twice(tmp_path, capsys, argv, message):
    """A repeated NAME would silently win over the first: refused, and nothing configured."""
    from cxlkv.models.tracegen import synth
    from cxlkv.models.trace import save_trace
    path = tmp_path / "t.npz"
    save_trace(path, synth("recent", n_layers=2, n_kv_heads=2, prefill=8, steps=8, seed=1))
    assert cli.main(["ctl", *[str(path) if a == "TRACE" else a for a in argv]]) == 2
    assert _err(capsys) == f"cxlkv: error: {message}\n"


def test_ctl_replay_refuses_a_parameter_hw_does_not_take(tmp_path, capsys):
    """ctl replay takes what policy replay --policy hw takes, less the reporting parameters
    (entry_bytes, the step-time model's: the device reports neither bytes moved nor a modelled
    time): another policy's parameter is refused, not ignored; the driver's API too."""
    from cxlkv.models.trace import save_trace
    from cxlkv.models.tracegen import synth
    from cxlkv.sw.driver import ConfigError
    from cxlkv.sw.transport import ModelTransport
    trace = synth("recent", n_layers=2, n_kv_heads=2, prefill=8, steps=8, seed=1)
    path = tmp_path / "t.npz"
    save_trace(path, trace)
    taken = ("hw_alpha, hw_tau, hw_rank_tau, hw_rank_tau_long, hw_bucket_bits, hw_pinned, hw_write_sample, "
             "hw_read_credit, window, prefetch_trigger_all")
    for param in ("ema_alpha=5", "entry_bytes=64", "fast_lat_ns=250", "bogus=1"):
        assert cli.main(["ctl", "replay", str(path), "-C", "2", "--param", param]) == 2
        name = param.split("=")[0]
        assert _err(capsys) == (f"cxlkv: error: {name}: not a parameter of policy 'hw' on the device "
                                f"(its parameters: {taken})\n")
    assert cli.main(["ctl", "replay", str(path), "-C", "2", "--param", "window=1", "--param", "prefetch_trigger_all=0",
                     "--param", "hw_tau=9", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["hw_tau"] == 9 and out["prefetch_trigger_all"] == 0
    # without a window the trigger would change nothing: refused, as policy replay refuses it
    assert cli.main(["ctl", "replay", str(path), "-C", "2", "--param", "prefetch_trigger_all=0"]) == 2
    assert "prefetch_trigger_all: applies only with a prefetch window; the device replay runs with window 0" \
        in _err(capsys)
    with SyncDevice(ModelTransport(n_layers=2, n_kv_heads=2)) as dev:
        with pytest.raises(ConfigError, match="ema_tau: not a parameter of policy 'hw' on the device"):
            dev.replay(trace, 2, ema_tau=5)


def test_ctl_notes_a_build_without_a_tracker(capsys):
    """tracker=auto builds no tracker beyond ONCHIP_MAX_WORDS words: `info` shows empty caps, and a
    note on stderr says why and what builds one; none when there is a tracker or one was asked for."""
    assert cli.main(["ctl", "-t", "model", "--build", "entries_log2=16", "info"]) == 0
    out = capsys.readouterr()
    assert "caps            []" in out.out
    assert "note: tracker=auto builds no tracker" in out.err and "--build tracker=external" in out.err
    for build in (["--build", "entries_log2=13"], ["--build", "entries_log2=16", "--build", "tracker=none"]):
        assert cli.main(["ctl", "-t", "model", *build, "info"]) == 0
        assert capsys.readouterr().err == ""
