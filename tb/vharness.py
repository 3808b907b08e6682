"""A Verilator harness that runs a design at full C++ speed, driven over a Unix socket.

cocotb steps Python every clock (~30 k cycles/s here); the harness keeps the
clock loop in C++ and only crosses into Python per request. It is generated
for a given Amaranth top: the register bus (``s_axil``, an AXI4-Lite slave) is
mastered from C++, so one 32-bit register access is one socket round trip.

Protocol (little endian), one request at a time:
  request  = u8 op, u32 a, u32 b            (9 bytes)
  response = u8 status, u32 value, u64 cycle (13 bytes)
ops: 1 READ a -> value, status = AXI resp; 2 WRITE a <- b, status = AXI resp;
     3 STEP b cycles; 4 CYCLES (the cycle count); 5 QUIT;
     6 EVENTS (tops with an ``event``/``decision`` stream pair): a = N events, b = flags
       (bit 0: answer the decisions; bit 1: throttle: random gaps before events are offered
       and random decision backpressure, from a fixed pseudo-random sequence). N records of EVENT_RECORD (16 bytes) follow the
       request. The harness checks that every record fits the port's fields (else status
       0xFC, value = index of the first bad record, nothing is sent), then streams them
       into ``event`` at full speed, honouring ``ready``, while draining ``decision``
       (always ready), and answers when N decisions have arrived: value = N. With flag
       bit 0 the answer is followed by N DECISION_RECORDs (8 bytes; zero where none came).
     7 ACCESSES (tops with ``access``/``hint``/``route`` streams too: the HDM decode): a = N
       items, b = flags (bit 1 throttle, as EVENTS). N records of ACCESS_RECORD (24 bytes:
       kind 0 access / 1 hint, flag = write / has_sample, layer, head, sample, position, step,
       addr; an access's tag is its item index mod 2^16) follow. Checked like EVENTS (status
       0xFC, value = first bad item), then offered in order, one at a time, each on its stream
       (a hint before the access after it), while ``route`` and ``decision`` are drained every
       cycle; done when every item is taken, every access's route has come, and as many
       decisions as the routes flagged ``event``: value = D decisions. The answer is followed by
       D DECISION_RECORDs and one ROUTE_RECORD (8 bytes) per access.
     8 LINES (tops with the host data path too: ``host_wdata`` in, ``host_rsp`` out): a = N items,
       b = flags (bit 1 throttle). N records follow, each an ACCESS_RECORD and then 64 bytes of line
       data (FP16 lane i in bytes 2i, 2i+1; ignored for hints and reads). Checked like ACCESSES
       (0xFC, value = first bad item) and offered the same way; the data of every write access
       (errors included) is offered on ``host_wdata`` in order, a stream of its own that may run
       ahead of the accesses; ``route``, ``decision`` and ``host_rsp`` are drained every cycle.
       Throttle adds random gaps before items and write data and random backpressure on the three
       outputs. Done when every item and every write's data is taken, and every access's route and
       response and as many decisions as the routes flagged ``event`` have come: value = D. The
       answer is followed by D DECISION_RECORDs, one ROUTE_RECORD per access and one LINE_RSP_RECORD
       per access (68 bytes: tag, flags = write | status << 1 | resident << 3 | bad << 4, then the
       64-byte FP16 line, zero for writes and errors), in access order.
     9 BUS_THROTTLE b: bit 0 set: from now on every READ and WRITE offers AW, W and AR after random
       gaps (each valid, once high, held until taken) and drives BREADY and RREADY at random (a fixed
       pseudo-random sequence); clear: each offered at once and the response taken at once (the
       default).
status 0xFF: the bus did not answer within the timeout (a hung design); 0xFD: no event or
decision moved for STALL_TIMEOUT cycles (value = decisions received; e.g. CONTROL.enable = 0);
0xFB: the register slave broke the AXI4-Lite handshake rules during a READ or WRITE (in any mode;
only a throttled bus can see a response that does not wait), value = the code of PROTO_CHECKS: a B
before both AW and W were taken in an earlier cycle, a B that was not taken dropped or changed, an R
before AR was taken, an R that was not taken dropped or changed, an R during a write or a B during a
read. The access ends there.

Builds are cached like the cocotb builds (build/harness/<name>-<hash>/).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

from cxlkv import build_dir
from cxlkv.tb.runner import _locked, compiler_make_flags, generate_verilog, verilator_env

OP_READ, OP_WRITE, OP_STEP, OP_CYCLES, OP_QUIT, OP_EVENTS = 1, 2, 3, 4, 5, 6
OP_BUS_THROTTLE = 9
STATUS_TIMEOUT = 0xFF
STATUS_PROTOCOL = 0xFB
#: the harness's handshake checks: name -> (PROTO code, the value of a STATUS_PROTOCOL answer; what the
#: register slave did)
PROTO_CHECKS = {
    "B_EARLY": (1, "BVALID without a write whose AW and W were both taken in an earlier cycle"),
    "B_UNSTABLE": (2, "BVALID dropped or BRESP changed before BREADY"),
    "R_EARLY": (3, "RVALID without a read whose AR was taken in an earlier cycle"),
    "R_UNSTABLE": (4, "RVALID dropped or RDATA/RRESP changed before RREADY"),
    "STRAY": (5, "a response of the other kind (RVALID during a write, BVALID during a read)"),
}
#: PROTO code -> what the register slave did
PROTO_VIOLATIONS = dict(PROTO_CHECKS.values())
STATUS_STALLED = 0xFD
STATUS_BAD_RECORD = 0xFC
BUS_TIMEOUT_CYCLES = 10_000
#: host -> harness, one per event: layer, head, position, step, sample (UQ0.16), write, 0
EVENT_RECORD = struct.Struct("<HHIIHBx")
#: harness -> host, one per decision: victim, flags (DECISION_FLAGS bits), 0
DECISION_RECORD = struct.Struct("<IB3x")
DECISION_FLAGS = ("hit", "inserted", "victim_valid", "no_victim", "error")
OP_ACCESSES = 7
#: host -> harness, one per HDM item: kind (0 access, 1 hint), write / has_sample, layer, head,
#: sample, position, step, addr
ACCESS_RECORD = struct.Struct("<BBHHHIIQ")
#: harness -> host, one per access: position, queue, status | event << 2 | hinted << 3 | write << 4, line
ROUTE_RECORD = struct.Struct("<IHBB")
EVENT_FIELDS = ("layer", "head", "position", "step", "sample", "write")
OP_LINES = 8
#: harness -> host, one per access of a LINES batch: tag, flags (write | status << 1 | resident << 3 |
#: bad << 4), 0; followed by LINE_BYTES of FP16 data
LINE_RSP_RECORD = struct.Struct("<HBx")
LINE_BYTES = 64

_CPP = r"""
// Generated by cxlkv.tb.vharness for top '@TOP@'. Do not edit.
#include "V@TOP@.h"
#include "verilated.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static V@TOP@ *top;
static uint64_t cycles = 0;

static inline void tick() {
    top->clk = 0; top->eval();
    top->clk = 1; top->eval();
    cycles++;
}

// Bus throttle (op BUS_THROTTLE): random gaps before AW, W and AR are offered (each valid, once
// high, stays high until taken) and random BREADY/RREADY, from a fixed pseudo-random sequence. The
// slave's side is checked in every mode: no B before both AW and W were taken in an earlier cycle,
// no R before AR was, no R during a write nor B during a read, and a B or R that waits (valid,
// ready low) keeps valid and its payload until taken. A violation ends the access with STATUS_PROTOCOL, value = the PROTO_* code.
static bool bus_throttle = false;
static uint32_t bus_lcg = 0x1F123BB5u;
static inline bool bus_roll(uint32_t den) {
    bus_lcg = bus_lcg * 1103515245u + 12345u; return ((bus_lcg >> 16) % den) == 0;
}
static inline bool bus_offer() { return !bus_throttle || !bus_roll(3); }
static inline bool bus_take() { return !bus_throttle || !bus_roll(2); }

static int axil_write(uint32_t addr, uint32_t data, uint32_t *code) {
    top->@P@awaddr = addr; top->@P@wdata = data; top->@P@wstrb = 0xF;
    top->@P@awvalid = 0; top->@P@wvalid = 0; top->@P@bready = 0;
    bool aw = false, w = false, b_wait = false;
    int b_resp = 0;
    for (int i = 0; i < @TIMEOUT@; i++) {
        if (!aw && !top->@P@awvalid && bus_offer()) top->@P@awvalid = 1;
        if (!w && !top->@P@wvalid && bus_offer()) top->@P@wvalid = 1;
        top->@P@bready = bus_take();
        top->clk = 0; top->eval();
        bool aw_hs = top->@P@awvalid && top->@P@awready, w_hs = top->@P@wvalid && top->@P@wready;
        bool b_valid = top->@P@bvalid, b_hs = b_valid && top->@P@bready;
        int resp = top->@P@bresp;
        *code = 0;
        if (top->@P@rvalid) *code = @PROTO_STRAY@;
        else if (b_valid && !(aw && w)) *code = @PROTO_B_EARLY@;
        else if (b_wait && (!b_valid || resp != b_resp)) *code = @PROTO_B_UNSTABLE@;
        top->clk = 1; top->eval(); cycles++;
        if (*code) break;
        b_wait = b_valid && !b_hs; b_resp = resp;
        if (aw_hs) { aw = true; top->@P@awvalid = 0; }
        if (w_hs) { w = true; top->@P@wvalid = 0; }
        if (b_hs) { top->@P@bready = 0; return resp; }
    }
    top->@P@awvalid = 0; top->@P@wvalid = 0; top->@P@bready = 0;
    return *code ? @PROTO_STATUS@ : @TIMEOUT_STATUS@;
}

static int axil_read(uint32_t addr, uint32_t *data, uint32_t *code) {
    top->@P@araddr = addr; top->@P@arvalid = 0; top->@P@rready = 0;
    bool ar = false, r_wait = false;
    uint32_t r_data = 0; int r_resp = 0;
    for (int i = 0; i < @TIMEOUT@; i++) {
        if (!ar && !top->@P@arvalid && bus_offer()) top->@P@arvalid = 1;
        top->@P@rready = bus_take();
        top->clk = 0; top->eval();
        bool ar_hs = top->@P@arvalid && top->@P@arready;
        bool r_valid = top->@P@rvalid, r_hs = r_valid && top->@P@rready;
        uint32_t rd = top->@P@rdata; int resp = top->@P@rresp;
        *code = 0;
        if (top->@P@bvalid) *code = @PROTO_STRAY@;
        else if (r_valid && !ar) *code = @PROTO_R_EARLY@;
        else if (r_wait && (!r_valid || rd != r_data || resp != r_resp)) *code = @PROTO_R_UNSTABLE@;
        top->clk = 1; top->eval(); cycles++;
        if (*code) break;
        r_wait = r_valid && !r_hs; r_data = rd; r_resp = resp;
        if (ar_hs) { ar = true; top->@P@arvalid = 0; }
        if (r_hs) { top->@P@rready = 0; *data = rd; return resp; }
    }
    top->@P@arvalid = 0; top->@P@rready = 0;
    return *code ? @PROTO_STATUS@ : @TIMEOUT_STATUS@;
}

@EVENTS_FUNCS@
static bool read_all(int fd, void *buf, size_t n) {
    uint8_t *p = (uint8_t *)buf;
    while (n) { ssize_t k = read(fd, p, n); if (k <= 0) return false; p += k; n -= k; }
    return true;
}

static bool write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = (const uint8_t *)buf;
    while (n) { ssize_t k = write(fd, p, n); if (k <= 0) return false; p += k; n -= k; }
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]); return 2; }
    Verilated::commandArgs(argc, argv);
    top = new V@TOP@;
    top->rst = 1;
    for (int i = 0; i < 4; i++) tick();
    top->rst = 0;
    tick();

    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa; memset(&sa, 0, sizeof sa); sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path, argv[1], sizeof sa.sun_path - 1);
    unlink(argv[1]);
    if (bind(srv, (struct sockaddr *)&sa, sizeof sa) || listen(srv, 1)) { perror("socket"); return 1; }
    printf("ready\n"); fflush(stdout);
    int fd = accept(srv, nullptr, nullptr);
    if (fd < 0) { perror("accept"); return 1; }
    for (;;) {
        uint8_t req[9];
        if (!read_all(fd, req, 9)) break;
        uint32_t a, b; memcpy(&a, req + 1, 4); memcpy(&b, req + 5, 4);
        uint8_t status = 0; uint32_t value = 0, proto = 0;
        switch (req[0]) {
            case @OP_READ@: status = axil_read(a, &value, &proto); if (proto) value = proto; break;
            case @OP_WRITE@: status = axil_write(a, b, &proto); if (proto) value = proto; break;
            case @OP_BUS_THROTTLE@: bus_throttle = b & 1; break;
            case @OP_STEP@: for (uint32_t i = 0; i < b; i++) tick(); break;
            case @OP_CYCLES@: break;
            case @OP_QUIT@: status = 0; break;
@EVENTS_CASE@
            default: status = 0xFE;
        }
        uint8_t resp[13]; resp[0] = status; memcpy(resp + 1, &value, 4); memcpy(resp + 5, &cycles, 8);
        if (!write_all(fd, resp, 13)) break;
@EVENTS_TAIL@
        if (req[0] == @OP_QUIT@) break;
    }
    close(fd); close(srv); unlink(argv[1]);
    top->final();
    delete top;
    return 0;
}
"""


def _mangle(name: str) -> str:
    """Verilator's C++ member name for a Verilog port (it escapes '__')."""
    return name.replace("__", "___05F")


_EVENTS_FUNCS = r"""
// ---- batch events (op @OP_EVENTS@): records in, decisions out
static std::vector<uint8_t> ev_in, ev_out;
static bool lost = false;

static inline void put_bits(uint32_t *w, int off, int width, uint64_t v) {
    for (int i = 0; i < width; i++) if ((v >> i) & 1) w[(off + i) / 32] |= 1u << ((off + i) % 32);
}
static inline uint64_t get_bits(const uint32_t *w, int off, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v |= (uint64_t)((w[(off + i) / 32] >> ((off + i) % 32)) & 1) << i;
    return v;
}

struct Record { uint16_t layer, head, sample; uint32_t position, step; uint8_t write; };

static inline Record record(uint32_t i) {
    const uint8_t *p = &ev_in[(size_t)i * 16];
    Record r;
    memcpy(&r.layer, p, 2); memcpy(&r.head, p + 2, 2); memcpy(&r.position, p + 4, 4);
    memcpy(&r.step, p + 8, 4); memcpy(&r.sample, p + 12, 2); r.write = p[14];
    return r;
}

static inline bool fits(uint64_t v, int width) { return width >= 64 || (v >> width) == 0; }

static void load_event(uint32_t i) {
    Record r = record(i);
    uint32_t w[@EV_WORDS@] = {0};
@EV_PUT@
@EV_ASSIGN@
}

static void store_decision(uint32_t i) {
    uint32_t w[@DEC_WORDS@] = {0};
@DEC_READ@
    uint8_t *p = &ev_out[(size_t)i * 8];
    uint32_t victim = (uint32_t)get_bits(w, @DEC_VICTIM@);
    uint8_t flags = 0;
@DEC_FLAGS@
    memcpy(p, &victim, 4); p[4] = flags;
}

static int run_events(uint32_t n, uint32_t flags, uint32_t *done) {
    ev_out.assign((size_t)n * 8, 0);
    for (uint32_t i = 0; i < n; i++) {
        Record r = record(i);
        if (!(@EV_FITS@)) { *done = i; return @STATUS_BAD_RECORD@; }
    }
    uint32_t sent = 0, got = 0;
    uint64_t idle = 0;
    int status = 0;
    // flag bit 1: throttle: gaps before an event is offered (valid, once high, stays high until
    // taken, as lib.stream requires) and decision backpressure, from a fixed pseudo-random sequence
    bool throttle = flags & 2;
    uint32_t lcg = 0x2545F491u;
    auto one_in = [&](uint32_t den) { lcg = lcg * 1103515245u + 12345u; return ((lcg >> 16) % den) == 0; };
    if (n) load_event(0);
    top->@EV@valid = n > 0 && !throttle;
    top->@DEC@ready = 1;
    while (got < n) {
        if (throttle) {
            if (sent < n && !top->@EV@valid) top->@EV@valid = one_in(8);   // gaps of 8 cycles on average
            top->@DEC@ready = one_in(2);
        }
        top->clk = 0; top->eval();
        bool ev_hs = top->@EV@valid && top->@EV@ready;
        bool dec_hs = top->@DEC@valid && top->@DEC@ready;
        if (dec_hs && got < n) store_decision(got++);
        top->clk = 1; top->eval(); cycles++;
        if (ev_hs) {
            sent++;
            if (sent < n) load_event(sent);
            top->@EV@valid = sent < n && !throttle;
        }
        if (ev_hs || dec_hs) idle = 0;
        else if (++idle > @STALL_TIMEOUT@ULL) { status = @STATUS_STALLED@; break; }
    }
    top->@EV@valid = 0;
    top->@DEC@ready = 0;
    *done = got;
    return status;
}
"""

_ACCESS_FUNCS = r"""
// ---- HDM items (op @OP_ACCESSES@): accesses and hints in, decisions and routes out
static std::vector<uint8_t> ac_in, ac_dec, ac_route;

struct Item { uint8_t kind, flag; uint16_t layer, head, sample; uint32_t position, step; uint64_t addr; };

static inline Item item(uint32_t i) {
    const uint8_t *p = &ac_in[(size_t)i * 24];
    Item r;
    r.kind = p[0]; r.flag = p[1]; memcpy(&r.layer, p + 2, 2); memcpy(&r.head, p + 4, 2);
    memcpy(&r.sample, p + 6, 2); memcpy(&r.position, p + 8, 4); memcpy(&r.step, p + 12, 4);
    memcpy(&r.addr, p + 16, 8);
    return r;
}

static bool item_fits(const Item &r) {
    if (r.kind > 1 || r.flag > 1) return false;
    if (r.kind == 0) return fits(r.addr, @AC_ADDR_W@);
    return @HINT_FITS@;
}

static void load_item(uint32_t i) {
    Item r = item(i);
    if (r.kind == 0) {
        uint32_t w[@AC_WORDS@] = {0};
        uint64_t tag = i & 0xFFFF;
        put_bits(w, @AC_ADDR@, r.addr); put_bits(w, @AC_WRITE@, r.flag); put_bits(w, @AC_TAG@, tag);
@AC_ASSIGN@
    } else {
        uint32_t w[@HI_WORDS@] = {0};
        put_bits(w, @HI_STEP@, r.step); put_bits(w, @HI_HAS@, r.flag); put_bits(w, @HI_LAYER@, r.layer);
        put_bits(w, @HI_HEAD@, r.head); put_bits(w, @HI_POS@, r.position); put_bits(w, @HI_SAMPLE@, r.sample);
@HI_ASSIGN@
    }
}

static void store_route(uint32_t k, bool *event) {
    uint32_t w[@RT_WORDS@] = {0};
@RT_READ@
    uint8_t *p = &ac_route[(size_t)k * 8];
    uint32_t pos = (uint32_t)get_bits(w, @RT_POS@);
    uint16_t queue = (uint16_t)get_bits(w, @RT_QUEUE@);
    *event = get_bits(w, @RT_EVENT@);
    uint8_t flags = (uint8_t)(get_bits(w, @RT_STATUS@) | (*event << 2) | (get_bits(w, @RT_HINTED@) << 3) |
                              (get_bits(w, @RT_WRITE@) << 4));
    memcpy(p, &pos, 4); memcpy(p + 4, &queue, 2); p[6] = flags; p[7] = (uint8_t)get_bits(w, @RT_LINE@);
}

static int run_accesses(uint32_t n, uint32_t flags, uint32_t *done) {
    uint32_t n_acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        Item r = item(i);
        if (!item_fits(r)) { *done = i; return @STATUS_BAD_RECORD@; }
        if (r.kind == 0) n_acc++;
    }
    ac_route.assign((size_t)n_acc * 8, 0);
    ac_dec.clear();
    uint32_t sent = 0, routes = 0, events = 0, got = 0;
    uint64_t idle = 0;
    int status = 0;
    bool throttle = flags & 2;
    uint32_t lcg = 0x2545F491u;
    auto one_in = [&](uint32_t den) { lcg = lcg * 1103515245u + 12345u; return ((lcg >> 16) % den) == 0; };
    bool offer = false;
    auto present = [&]() {
        top->@AC@valid = 0; top->@HI@valid = 0;
        if (offer && sent < n) { if (item(sent).kind == 0) top->@AC@valid = 1; else top->@HI@valid = 1; }
    };
    if (n) { load_item(0); offer = !throttle; }
    present();
    top->@RT@ready = 1; top->@DEC@ready = 1;
    while (sent < n || routes < n_acc || got < events) {
        if (throttle) {
            if (sent < n && !offer) { offer = one_in(8); present(); }
            top->@DEC@ready = one_in(2);
            top->@RT@ready = one_in(2);
        }
        top->clk = 0; top->eval();
        bool in_hs = (top->@AC@valid && top->@AC@ready) || (top->@HI@valid && top->@HI@ready);
        bool rt_hs = top->@RT@valid && top->@RT@ready;
        bool dec_hs = top->@DEC@valid && top->@DEC@ready;
        if (rt_hs && routes < n_acc) { bool ev; store_route(routes++, &ev); if (ev) events++; }
        if (dec_hs) {
            ac_dec.resize(ac_dec.size() + 8);
            ev_out.swap(ac_dec);
            store_decision(got++);
            ev_out.swap(ac_dec);
        }
        top->clk = 1; top->eval(); cycles++;
        if (in_hs) {
            sent++;
            if (sent < n) load_item(sent);
            offer = sent < n && !throttle;
            present();
        }
        if (in_hs || rt_hs || dec_hs) idle = 0;
        else if (++idle > @STALL_TIMEOUT@ULL) { status = @STATUS_STALLED@; break; }
    }
    top->@AC@valid = 0; top->@HI@valid = 0;
    top->@RT@ready = 0; top->@DEC@ready = 0;
    *done = status ? sent : got;
    return status;
}
"""

_ACCESS_CASE = r"""            case @OP_ACCESSES@: {
                ac_in.resize((size_t)a * 24);
                if (!read_all(fd, ac_in.data(), ac_in.size())) { lost = true; break; }
                status = run_accesses(a, b, &value);
                break;
            }"""

_ACCESS_TAIL = r"""        if (req[0] == @OP_ACCESSES@ && status == 0 && (!write_all(fd, ac_dec.data(), ac_dec.size()) ||
                                                      !write_all(fd, ac_route.data(), ac_route.size()))) break;"""

_LINES_FUNCS = r"""
// ---- host lines (op @OP_LINES@): items with line data in; decisions, routes and line responses out
static std::vector<uint8_t> ln_data, ln_rsp;
static std::vector<uint32_t> ln_widx;   // item index of each write access, in order

static void load_wdata(uint32_t i) {
    uint32_t w[@WD_WORDS@] = {0};
    const uint8_t *p = &ln_data[(size_t)i * @LINE_BYTES@];
    for (int k = 0; k < @LINE_BYTES@ / 4; k++) { uint32_t v; memcpy(&v, p + 4 * k, 4); put_bits(w, @WD_DATA@ + 32 * k, 32, v); }
@WD_ASSIGN@
}

static void store_rsp(uint32_t k) {
    uint32_t w[@RS_WORDS@] = {0};
@RS_READ@
    uint8_t *p = &ln_rsp[(size_t)k * @RSP_BYTES@];
    uint16_t tag = (uint16_t)get_bits(w, @RS_TAG@);
    p[2] = (uint8_t)(get_bits(w, @RS_WRITE@) | (get_bits(w, @RS_STATUS@) << 1) | (get_bits(w, @RS_RESIDENT@) << 3) |
                     (get_bits(w, @RS_BAD@) << 4));
    memcpy(p, &tag, 2); p[3] = 0;
    for (int j = 0; j < @LINE_BYTES@ / 4; j++) {
        uint32_t v = (uint32_t)get_bits(w, @RS_DATA@ + 32 * j, 32);
        memcpy(p + 4 + 4 * j, &v, 4);
    }
}

static int run_lines(uint32_t n, uint32_t flags, uint32_t *done) {
    uint32_t n_acc = 0;
    ln_widx.clear();
    for (uint32_t i = 0; i < n; i++) {
        Item r = item(i);
        if (!item_fits(r)) { *done = i; return @STATUS_BAD_RECORD@; }
        if (r.kind == 0) { n_acc++; if (r.flag) ln_widx.push_back(i); }
    }
    uint32_t n_wr = (uint32_t)ln_widx.size();
    ac_route.assign((size_t)n_acc * 8, 0);
    ln_rsp.assign((size_t)n_acc * @RSP_BYTES@, 0);
    ac_dec.clear();
    uint32_t sent = 0, wsent = 0, routes = 0, rsps = 0, events = 0, got = 0;
    uint64_t idle = 0;
    int status = 0;
    // flag bit 1: throttle: gaps before items and write data, backpressure on route, decision, host_rsp
    bool throttle = flags & 2;
    uint32_t lcg = 0x2545F491u;
    auto one_in = [&](uint32_t den) { lcg = lcg * 1103515245u + 12345u; return ((lcg >> 16) % den) == 0; };
    bool offer = false, woffer = false;
    auto present = [&]() {
        top->@AC@valid = 0; top->@HI@valid = 0;
        if (offer && sent < n) { if (item(sent).kind == 0) top->@AC@valid = 1; else top->@HI@valid = 1; }
    };
    auto wpresent = [&]() { top->@WD@valid = woffer && wsent < n_wr; };
    if (n) { load_item(0); offer = !throttle; }
    if (n_wr) { load_wdata(ln_widx[0]); woffer = !throttle; }
    present(); wpresent();
    top->@RT@ready = 1; top->@DEC@ready = 1; top->@RS@ready = 1;
    while (sent < n || wsent < n_wr || routes < n_acc || rsps < n_acc || got < events) {
        if (throttle) {
            if (sent < n && !offer) { offer = one_in(8); present(); }
            if (wsent < n_wr && !woffer) { woffer = one_in(8); wpresent(); }
            top->@DEC@ready = one_in(2);
            top->@RT@ready = one_in(2);
            top->@RS@ready = one_in(2);
        }
        top->clk = 0; top->eval();
        bool in_hs = (top->@AC@valid && top->@AC@ready) || (top->@HI@valid && top->@HI@ready);
        bool wd_hs = top->@WD@valid && top->@WD@ready;
        bool rt_hs = top->@RT@valid && top->@RT@ready;
        bool rs_hs = top->@RS@valid && top->@RS@ready;
        bool dec_hs = top->@DEC@valid && top->@DEC@ready;
        if (rt_hs && routes < n_acc) { bool ev; store_route(routes++, &ev); if (ev) events++; }
        if (rs_hs && rsps < n_acc) store_rsp(rsps++);
        if (dec_hs) {
            ac_dec.resize(ac_dec.size() + 8);
            ev_out.swap(ac_dec);
            store_decision(got++);
            ev_out.swap(ac_dec);
        }
        top->clk = 1; top->eval(); cycles++;
        if (in_hs) {
            sent++;
            if (sent < n) load_item(sent);
            offer = sent < n && !throttle;
            present();
        }
        if (wd_hs) {
            wsent++;
            if (wsent < n_wr) load_wdata(ln_widx[wsent]);
            woffer = wsent < n_wr && !throttle;
            wpresent();
        }
        if (in_hs || wd_hs || rt_hs || rs_hs || dec_hs) idle = 0;
        else if (++idle > @STALL_TIMEOUT@ULL) { status = @STATUS_STALLED@; break; }
    }
    top->@AC@valid = 0; top->@HI@valid = 0; top->@WD@valid = 0;
    top->@RT@ready = 0; top->@DEC@ready = 0; top->@RS@ready = 0;
    *done = status ? sent : got;
    return status;
}
"""

_LINES_CASE = r"""            case @OP_LINES@: {
                std::vector<uint8_t> raw((size_t)a * (24 + @LINE_BYTES@));
                if (!read_all(fd, raw.data(), raw.size())) { lost = true; break; }
                ac_in.resize((size_t)a * 24); ln_data.resize((size_t)a * @LINE_BYTES@);
                for (uint32_t i = 0; i < a; i++) {
                    memcpy(&ac_in[(size_t)i * 24], &raw[(size_t)i * (24 + @LINE_BYTES@)], 24);
                    memcpy(&ln_data[(size_t)i * @LINE_BYTES@], &raw[(size_t)i * (24 + @LINE_BYTES@) + 24], @LINE_BYTES@);
                }
                status = run_lines(a, b, &value);
                break;
            }"""

_LINES_TAIL = r"""        if (req[0] == @OP_LINES@ && status == 0 && (!write_all(fd, ac_dec.data(), ac_dec.size()) ||
                                                   !write_all(fd, ac_route.data(), ac_route.size()) ||
                                                   !write_all(fd, ln_rsp.data(), ln_rsp.size()))) break;"""

_EVENTS_CASE = r"""            case @OP_EVENTS@: {
                ev_in.resize((size_t)a * 16);
                if (!read_all(fd, ev_in.data(), ev_in.size())) { lost = true; break; }
                status = run_events(a, b, &value);
                break;
            }"""

_EVENTS_TAIL = r"""        if (lost) break;
        if (req[0] == @OP_EVENTS@ && (b & 1) && !write_all(fd, ev_out.data(), ev_out.size())) break;"""


def _fields(layout) -> dict:
    """name -> (offset, width) of a lib.data StructLayout."""
    return {name: (f.offset, f.width) for name, f in layout}


def _assign(port: str, width: int, words: str, to_design: bool) -> str:
    """C++ moving a uint32_t word array to/from a Verilated port of ``width`` bits."""
    if width > 64:                                  # VlWide: 32-bit words
        n = (width + 31) // 32
        if to_design:
            return f"    for (int k = 0; k < {n}; k++) top->{port}[k] = {words}[k];"
        return f"    for (int k = 0; k < {n}; k++) {words}[k] = top->{port}[k];"
    if to_design:
        if width > 32:
            return f"    top->{port} = ((uint64_t){words}[1] << 32) | {words}[0];"
        return f"    top->{port} = {words}[0];"
    if width > 32:
        return f"    {{ uint64_t v = top->{port}; {words}[0] = (uint32_t)v; {words}[1] = (uint32_t)(v >> 32); }}"
    return f"    {words}[0] = top->{port};"


def event_ports(component):
    """(event fields, decision fields) of a top with an ``event``/``decision`` stream pair, else None."""
    members = component.signature.members
    if "event" not in members or "decision" not in members:
        return None
    ev = members["event"].signature.members["payload"].shape
    dec = members["decision"].signature.members["payload"].shape
    return _fields(ev), _fields(dec)


def hdm_ports(component):
    """(access, hint, route) fields of a top with the HDM decode's streams, else None."""
    members = component.signature.members
    if not {"access", "hint", "route"} <= set(members):
        return None
    return tuple(_fields(members[n].signature.members["payload"].shape) for n in ("access", "hint", "route"))


#: the fields of a LINES response record, in the order of its flags byte after ``write`` (bit 0)
LINE_RSP_FIELDS = ("tag", "write", "status", "resident", "bad", "data")


def host_ports(component):
    """((payload width, data offset) of ``host_wdata``, fields of ``host_rsp``) of a top with the
    host data path's streams, else None. ``host_wdata``'s payload is the 512-bit line itself (or a
    layout whose ``data`` field holds it)."""
    from amaranth.hdl import Shape
    from amaranth.lib import data as D
    members = component.signature.members
    if not {"host_wdata", "host_rsp"} <= set(members):
        return None
    wd = members["host_wdata"].signature.members["payload"].shape
    width = Shape.cast(wd).width
    offset = 0
    if isinstance(wd, D.StructLayout) and "data" in wd.members:
        offset = wd["data"].offset
    if width - offset < 8 * LINE_BYTES:
        raise ValueError(f"host_wdata's payload holds no {8 * LINE_BYTES}-bit line ({width} bits)")
    rsp = _fields(members["host_rsp"].signature.members["payload"].shape)
    missing = [f for f in LINE_RSP_FIELDS if f not in rsp]
    if missing or rsp["data"][1] != 8 * LINE_BYTES:
        raise ValueError(f"host_rsp's payload does not have the fields {LINE_RSP_FIELDS} with a "
                         f"{8 * LINE_BYTES}-bit data: {rsp}")
    return (width, offset), rsp


def stall_timeout(component) -> int:
    """Idle cycles before a batch is given up: the tracker memory sweep after enable takes
    queues x positions cycles, the decay-rate divider ~60."""
    n = getattr(component, "n_layers", 1) * getattr(component, "n_kv_heads", 1) << getattr(component, "entries_log2", 0)
    return max(100_000, 4 * n)


def render_cpp(top: str, bus_prefix: str = "s_axil", events=None, stall_cycles: int = 100_000, hdm=None,
               lines=None) -> str:
    """The harness's C++ for a top: the bus ops always; EVENTS with ``events`` (event_ports); ACCESSES
    with ``hdm`` too (hdm_ports); LINES with ``lines`` too (host_ports). A top without the host data
    path gets the same text as before LINES existed (its cached builds stay valid)."""
    subs = {"@TOP@": top, "@P@": _mangle(bus_prefix + "__"), "@TIMEOUT@": str(BUS_TIMEOUT_CYCLES),
            "@TIMEOUT_STATUS@": str(STATUS_TIMEOUT), "@OP_READ@": str(OP_READ), "@OP_WRITE@": str(OP_WRITE),
            "@OP_STEP@": str(OP_STEP), "@OP_CYCLES@": str(OP_CYCLES), "@OP_QUIT@": str(OP_QUIT),
            "@OP_BUS_THROTTLE@": str(OP_BUS_THROTTLE), "@PROTO_STATUS@": str(STATUS_PROTOCOL),
            **{f"@PROTO_{name}@": str(code) for name, (code, _) in PROTO_CHECKS.items()}}
    text = _CPP
    if events is None:
        text = text.replace("@EVENTS_FUNCS@", "").replace("@EVENTS_CASE@", "").replace("@EVENTS_TAIL@", "")
    else:
        evf, decf = events
        ev_w = max(o + w for o, w in evf.values())
        dec_w = max(o + w for o, w in decf.values())
        ev_port, dec_port = _mangle("event__payload"), _mangle("decision__payload")
        put = "\n".join(f"    put_bits(w, {evf[name][0]}, {evf[name][1]}, r.{name});" for name in EVENT_FIELDS)
        fit = " && ".join(f"fits(r.{name}, {evf[name][1]})" for name in EVENT_FIELDS)
        flags = "\n".join(f"    if (get_bits(w, {decf[name][0]}, {decf[name][1]})) flags |= {1 << i};"
                          for i, name in enumerate(DECISION_FLAGS))
        funcs = _EVENTS_FUNCS
        for k, v in {"@EV_WORDS@": str((ev_w + 31) // 32), "@DEC_WORDS@": str((dec_w + 31) // 32),
                     "@EV_PUT@": put, "@EV_ASSIGN@": _assign(ev_port, ev_w, "w", True),
                     "@DEC_READ@": _assign(dec_port, dec_w, "w", False),
                     "@DEC_VICTIM@": f"{decf['victim'][0]}, {decf['victim'][1]}", "@DEC_FLAGS@": flags,
                     "@EV_FITS@": fit, "@STALL_TIMEOUT@": str(stall_cycles),
                     "@STATUS_BAD_RECORD@": str(STATUS_BAD_RECORD), "@STATUS_STALLED@": str(STATUS_STALLED),
                     "@EV@": _mangle("event__"), "@DEC@": _mangle("decision__")}.items():
            funcs = funcs.replace(k, v)
        case, tail = _EVENTS_CASE, _EVENTS_TAIL
        if hdm is not None:
            acf, hif, rtf = hdm
            ac_w, hi_w, rt_w = (max(o + w for o, w in f.values()) for f in (acf, hif, rtf))

            def fw(f, name):
                return f"{f[name][0]}, {f[name][1]}"
            afuncs = _ACCESS_FUNCS
            hint_fits = " && ".join(f"fits(r.{src}, {hif[dst][1]})" for src, dst in
                                    (("layer", "layer"), ("head", "head"), ("position", "position"),
                                     ("sample", "sample"), ("step", "step")))
            for k, v in {"@AC_WORDS@": str((ac_w + 31) // 32), "@HI_WORDS@": str((hi_w + 31) // 32),
                         "@RT_WORDS@": str((rt_w + 31) // 32), "@AC_ADDR_W@": str(acf["addr"][1]),
                         "@HINT_FITS@": hint_fits, "@AC_ADDR@": fw(acf, "addr"), "@AC_WRITE@": fw(acf, "write"),
                         "@AC_TAG@": fw(acf, "tag"), "@HI_STEP@": fw(hif, "step"), "@HI_HAS@": fw(hif, "has_sample"),
                         "@HI_LAYER@": fw(hif, "layer"), "@HI_HEAD@": fw(hif, "head"),
                         "@HI_POS@": fw(hif, "position"), "@HI_SAMPLE@": fw(hif, "sample"),
                         "@AC_ASSIGN@": _assign(_mangle("access__payload"), ac_w, "w", True),
                         "@HI_ASSIGN@": _assign(_mangle("hint__payload"), hi_w, "w", True),
                         "@RT_READ@": _assign(_mangle("route__payload"), rt_w, "w", False),
                         "@RT_POS@": fw(rtf, "position"), "@RT_QUEUE@": fw(rtf, "queue"),
                         "@RT_EVENT@": fw(rtf, "event"), "@RT_STATUS@": fw(rtf, "status"),
                         "@RT_HINTED@": fw(rtf, "hinted"), "@RT_WRITE@": fw(rtf, "write"),
                         "@RT_LINE@": fw(rtf, "line"), "@STALL_TIMEOUT@": str(stall_cycles),
                         "@STATUS_BAD_RECORD@": str(STATUS_BAD_RECORD), "@STATUS_STALLED@": str(STATUS_STALLED),
                         "@AC@": _mangle("access__"), "@HI@": _mangle("hint__"), "@RT@": _mangle("route__"),
                         "@DEC@": _mangle("decision__")}.items():
                afuncs = afuncs.replace(k, v)
            funcs += afuncs
            case += "\n" + _ACCESS_CASE
            tail += "\n" + _ACCESS_TAIL
            subs["@OP_ACCESSES@"] = str(OP_ACCESSES)
            if lines is not None:
                (wd_w, wd_off), rsf = lines
                rs_w = max(o + w for o, w in rsf.values())
                lfuncs = _LINES_FUNCS
                for k, v in {"@WD_WORDS@": str((wd_w + 31) // 32), "@RS_WORDS@": str((rs_w + 31) // 32),
                             "@WD_DATA@": str(wd_off),
                             "@WD_ASSIGN@": _assign(_mangle("host_wdata__payload"), wd_w, "w", True),
                             "@RS_READ@": _assign(_mangle("host_rsp__payload"), rs_w, "w", False),
                             "@RS_TAG@": fw(rsf, "tag"), "@RS_WRITE@": fw(rsf, "write"),
                             "@RS_STATUS@": fw(rsf, "status"), "@RS_RESIDENT@": fw(rsf, "resident"),
                             "@RS_BAD@": fw(rsf, "bad"), "@RS_DATA@": str(rsf["data"][0]),
                             "@RSP_BYTES@": str(LINE_RSP_RECORD.size + LINE_BYTES),
                             "@STALL_TIMEOUT@": str(stall_cycles),
                             "@STATUS_BAD_RECORD@": str(STATUS_BAD_RECORD), "@STATUS_STALLED@": str(STATUS_STALLED),
                             "@AC@": _mangle("access__"), "@HI@": _mangle("hint__"), "@RT@": _mangle("route__"),
                             "@DEC@": _mangle("decision__"), "@WD@": _mangle("host_wdata__"),
                             "@RS@": _mangle("host_rsp__")}.items():
                    lfuncs = lfuncs.replace(k, v)
                funcs += lfuncs
                case += "\n" + _LINES_CASE
                tail += "\n" + _LINES_TAIL
                subs["@OP_LINES@"] = str(OP_LINES)
                subs["@LINE_BYTES@"] = str(LINE_BYTES)
        text = (text.replace("@EVENTS_FUNCS@", funcs).replace("@EVENTS_CASE@", case)
                .replace("@EVENTS_TAIL@", tail))
        subs["@OP_EVENTS@"] = str(OP_EVENTS)
    for k, v in subs.items():
        text = text.replace(k, v)
    return text


HARNESS_FLAGS = ("--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                 "-Wno-fatal", "-Wno-lint", "-Wno-style")
#: the harness's C++ optimisation (given as -CFLAGS, after verilated.mk's -Os, so it wins): -O2, the
#: speed users and `make bench` see; ``CXLKV_HARNESS_OPT`` overrides it. The test suite builds at -O1
#: (tests/conftest.py): measured 2026-11-30 on fresh build directories, tests/test_datapath.py took
#: 167 CPU-s against 221 at -O2, tests/test_controller.py with tests/test_serial_transport.py 327
#: against 427, and the default top ran 11 % fewer cycles per second (147 k against 165 k, side by side)
HARNESS_OPT = "-O2"
_HARNESS_OPTS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def harness_flags() -> tuple:
    """HARNESS_FLAGS with the C++ optimisation (``CXLKV_HARNESS_OPT``, else HARNESS_OPT)."""
    opt = os.environ.get("CXLKV_HARNESS_OPT", HARNESS_OPT)
    if opt not in _HARNESS_OPTS:
        raise ValueError(f"CXLKV_HARNESS_OPT={opt!r}: expected one of {', '.join(_HARNESS_OPTS)}")
    return (*HARNESS_FLAGS, "-CFLAGS", opt)


def build_harness(component, name: str) -> Path:
    """Generate, Verilate and compile the harness for ``component``; returns the executable."""
    verilog = generate_verilog(component, name)
    cpp = render_cpp(name, events=event_ports(component), stall_cycles=stall_timeout(component),
                     hdm=hdm_ports(component), lines=host_ports(component))
    flags = harness_flags()
    # verilated.mk compiles the model with MAKEFLAGS' OPT_* too: they are part of the build
    key = hashlib.sha256((verilog + cpp + " ".join(flags + tuple(compiler_make_flags()))).encode()).hexdigest()[:12]
    bdir = build_dir() / "harness" / f"{name}-{key}"
    exe = bdir / name
    with _locked(bdir.with_suffix(".lock")):
        if exe.is_file():
            return exe
        if bdir.exists():
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        (bdir / f"{name}.v").write_text(verilog)
        (bdir / "harness.cpp").write_text(cpp)
        env = verilator_env(dict(os.environ))
        cmd = ["verilator", *flags, "--top-module", name, "-Mdir", str(bdir / "obj"), "-o", str(exe),
               f"{name}.v", "harness.cpp", "-j", "2"]
        proc = subprocess.run(cmd, cwd=bdir, env=env, capture_output=True, text=True)
        (bdir / "build.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0 or not exe.is_file():
            raise RuntimeError(f"harness build failed; see {bdir / 'build.log'}")
    return exe
