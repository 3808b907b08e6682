"""Register map table. GENERATED from hdl/regs.rdl by `python -m cxlkv.sw.regmap_gen`: do not edit."""
from cxlkv.models.regdefs import Field, Memory, Register

SOURCE_SHA256 = "1494b24c62261be592b63159a3cbd8c90a64e810ff6c7d0fc6515d8e9c14d4b8"

REGISTERS = (
    Register('ID', 0x000, 32, external=False, desc='Identification', fields=(
        Field('magic', 0, 32, 'r', 'na', 0x43584b56, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc="Magic 0x43584B56 ('CXKV')."),
    )),
    Register('VERSION', 0x004, 32, external=False, desc='Version', fields=(
        Field('minor', 0, 16, 'r', 'na', 0x5, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Minor version of the register interface.'),
        Field('major', 16, 16, 'r', 'na', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Major version; the driver refuses a major it does not know.'),
    )),
    Register('GEOMETRY', 0x008, 32, external=False, desc='Tracked geometry, fixed at synthesis.', fields=(
        Field('n_layers', 0, 16, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Number of layers.'),
        Field('n_kv_heads', 16, 16, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='KV heads per layer (queues = n_layers x n_kv_heads).'),
    )),
    Register('GEOMETRY2', 0x00c, 32, external=False, desc='Geometry 2', fields=(
        Field('entries_log2', 0, 6, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='log2 of the positions each queue can track.'),
        Field('bitags', 8, 8, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='BITags the BI-snoop engine can have outstanding.'),
        Field('coldlist_depth', 16, 16, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Depth of the cold-list ring, entries.'),
    )),
    Register('CAPS', 0x010, 32, external=False, desc='Which blocks this build contains.', fields=(
        Field('tracker', 0, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Access tracker and victim selection.'),
        Field('scoring', 1, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='EMA scoring pipeline.'),
        Field('prefetch', 2, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Prefetch engine.'),
        Field('phase', 3, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Phase detector.'),
        Field('quant', 4, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Quantizer.'),
        Field('bisnoop', 5, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Back-Invalidate snoop engine.'),
        Field('hdm', 6, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='HDM address decode and hint path in front of the tracker.'),
        Field('tiermover', 7, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Tier mover behind the tracker (device DRAM <-> flash; TIER_LAT, TIER_* counters).'),
    )),
    Register('SCRATCH', 0x014, 32, external=False, desc='Read/write register with no effect, for bus checks.', fields=(
        Field('value', 0, 32, 'rw', 'na', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('CONTROL', 0x020, 32, external=False, desc='Control', fields=(
        Field('enable', 0, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Policy logic enabled. 0 holds the tracker cleared (events wait): each enable starts from the empty state.'),
        Field('decode_lock', 1, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Host marks all queues as in active decode: no victims are taken from them.'),
        Field('phase_override', 2, 2, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=2, desc='Phase override: 0 automatic, 1 force prefill, 2 force decode.'),
        Field('counters_clear', 8, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=True, hwset=False, range_min=None, range_max=None, desc='Write 1: clear every counter (reads as 0).'),
    )),
    Register('STATUS', 0x024, 32, external=False, desc='Status', fields=(
        Field('phase', 0, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Current phase: 0 prefill, 1 decode.'),
        Field('cfg_error', 1, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='A configuration the hardware cannot honour: ring_error, or a phase configuration the detector clamps.'),
        Field('cfg_reject', 2, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='A write was refused since the last clear (write 1 to clear). Set by the register block itself.'),
        Field('busy', 3, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Events wait: the tracker clears its queue state, its memories are swept (after reset and every CONTROL.enable 0 -> 1), or the decay-rate divider recomputes after a TAU change; or the tier mover has commands in flight or clears its frame table (read it until 0 before reading the TIER_* counters).'),
        Field('bi_timeout', 4, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='A BIRsp timed out; the line stays in BIP.'),
        Field('ring_error', 5, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='The tracker cannot run the configuration exactly: TLN_R/TLN_D/HW_BUCKET need more deadline buckets than the ring built in, or QUEUE_BUDGET exceeds the slots built in (HW_RING): events are held until it fits.'),
        Field('hdm_cfg_error', 6, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='The HDM decode refuses its configuration (HDM_*): every access decodes as outside, every hint is bad (counted).'),
        Field('hint_busy', 7, 1, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='A pushed hint (HINT_PUSH) waits for the HDM decode.'),
    )),
    Register('REJECT_ADDR', 0x028, 32, external=False, desc='Last refused write address', fields=(
        Field('addr', 0, 16, 'r', 'na', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Byte address of the last refused write, word-aligned (the low two address bits are ignored, as on every access). Set by the register block itself.'),
    )),
    Register('ALPHA', 0x030, 32, external=False, desc='EMA weight', fields=(
        Field('value', 0, 16, 'rw', 'r', 0x1000, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=65535, desc='alpha, UQ0.16.'),
    )),
    Register('TAU', 0x034, 32, external=False, desc='Recency time constant', fields=(
        Field('value', 0, 21, 'rw', 'r', 0x3e8, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=1048576, desc='tau in decode steps.'),
    )),
    Register('PREFETCH', 0x038, 32, external=False, desc='Prefetch', fields=(
        Field('window', 0, 8, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=64, desc='Window W: fetch the missing positions of [P-W, P+W].'),
        Field('trigger', 8, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Trigger: 0 demand misses, 1 every read.'),
        Field('overflow_stall', 9, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Queue overflow: 0 drop oldest, 1 stall.'),
        Field('exact', 10, 1, 'rw', 'r', 0x1, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc="Exact mode (window != 0): the controller top holds demand events until the last one's prefetch candidates are inserted, so the tracker sees the policy simulator's order (`policy replay --policy hw --param window=W`). 0: no hold (the engine's queue, drops and rate limit apply)."),
        Field('decode_only', 11, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Decode only: 1 starts prefetch windows only while the phase detector says decode (STATUS.phase = 1; reads and the newest positions are still tracked in prefill); 0 in every phase, as the policy simulator.'),
        Field('rate_issues', 16, 8, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Issue at most this many prefetches per rate period (0: unlimited).'),
    )),
    Register('PREFETCH_PERIOD', 0x03c, 32, external=False, desc='Prefetch rate period', fields=(
        Field('cycles', 0, 16, 'rw', 'r', 0x40, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=None, desc='Rate-limit period in cycles.'),
    )),
    Register('PHASE_CFG', 0x040, 32, external=False, desc='Phase detector', fields=(
        Field('ratio', 0, 8, 'rw', 'r', 0xa, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=None, desc='Decode when reads exceed ratio x writes over the window.'),
        Field('window_log2', 8, 5, 'rw', 'r', 0xc, woclr=False, singlepulse=False, hwset=False, range_min=4, range_max=24, desc='log2 of the window, in events.'),
        Field('hysteresis', 16, 8, 'rw', 'r', 0x2, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=None, desc='Hysteresis: consecutive windows before a change.'),
    )),
    Register('QUEUE_BUDGET', 0x044, 32, external=False, desc='Queue budget', fields=(
        Field('entries', 0, 18, 'rw', 'r', 0x400, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=131072, desc='Fast-tier entries per queue (C).'),
    )),
    Register('PINS', 0x048, 32, external=False, desc='Pinned positions', fields=(
        Field('first_n', 0, 8, 'rw', 'r', 0x4, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=64, desc='Positions 0..N-1 of every queue are pinned (attention sinks): never victims.'),
    )),
    Register('WATERMARKS', 0x04c, 32, external=False, desc='Fast-tier watermarks', fields=(
        Field('high', 0, 16, 'rw', 'r', 0xf000, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Start background eviction above this fill, UQ0.16 of the budget.'),
        Field('low', 16, 16, 'rw', 'r', 0xe000, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Stop background eviction below this fill, UQ0.16 of the budget.'),
    )),
    Register('BI_TIMEOUT', 0x050, 32, external=False, desc='BIRsp timeout', fields=(
        Field('cycles', 0, 32, 'rw', 'r', 0x186a0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Cycles to wait for a BIRsp before raising bi_timeout (0: never): the timeout fires 1 to 32 cycles after this many (a free-running 16-cycle time base).'),
    )),
    Register('FMT_SEL', 0x060, 32, external=False, desc='Format queue select', fields=(
        Field('queue', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=65535, desc='Queue index whose storage format FMT_DATA reads and writes.'),
    )),
    Register('FMT_DATA', 0x064, 32, external=True, desc='Indirect window onto the per-queue format table: reads and writes act on queue FMT_SEL.', fields=(
        Field('format', 0, 2, 'rw', 'rw', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='0 fp16, 1 fp8 (E4M3), 2 int8, 3 int4.'),
    )),
    Register('IRQ_STATUS', 0x070, 32, external=False, desc='Write 1 to clear a bit. The interrupt line is (IRQ_STATUS & IRQ_ENABLE) != 0.', fields=(
        Field('cfg_reject', 0, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='A register write was refused.'),
        Field('bi_timeout', 1, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='A BIRsp timed out.'),
        Field('proto_error', 2, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='A CXL protocol violation was seen.'),
        Field('coldlist_fill', 3, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='The cold list reached its threshold.'),
        Field('coldlist_overflow', 4, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='The cold list overflowed (entries were dropped, counted).'),
        Field('phase_change', 5, 1, 'rw', 'na', 0x0, woclr=True, singlepulse=False, hwset=True, range_min=None, range_max=None, desc='The phase changed.'),
    )),
    Register('IRQ_ENABLE', 0x074, 32, external=False, desc='Interrupt enable', fields=(
        Field('cfg_reject', 0, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
        Field('bi_timeout', 1, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
        Field('proto_error', 2, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
        Field('coldlist_fill', 3, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
        Field('coldlist_overflow', 4, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
        Field('phase_change', 5, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TLN_R', 0x080, 32, external=False, desc='Deadline constant, normal mode', fields=(
        Field('value', 0, 28, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='round(hw_rank_tau * ln2 * 256); 0: no attention term (the key is recency alone).'),
    )),
    Register('TLN_D', 0x084, 32, external=False, desc='Deadline constant, dense mode', fields=(
        Field('value', 0, 28, 'rw', 'r', 0x2c5d, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='round(hw_rank_tau_long * ln2 * 256) after tau clamping; 0: no dense mode.'),
    )),
    Register('HW_BUCKET', 0x088, 32, external=False, desc='Deadline bucket width', fields=(
        Field('bits', 0, 5, 'rw', 'r', 0x3, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=24, desc='g: a deadline bucket spans 2^g steps (hw_bucket_bits).'),
    )),
    Register('HW_SAMPLE', 0x08c, 32, external=False, desc='Sample shaping', fields=(
        Field('write_sample', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='EMA sample of a write, UQ0.16 (hw_write_sample).'),
        Field('read_credit', 16, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Added to the sample of a read, saturating, UQ0.16 (hw_read_credit).'),
    )),
    Register('HW_RING', 0x090, 32, external=False, desc="The tracker's deadline-bucket ring, fixed at synthesis.", fields=(
        Field('buckets_log2', 0, 5, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='log2 of the buckets per queue.'),
        Field('slots_log2', 8, 5, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc="log2 of the tracker's slots per queue: the largest QUEUE_BUDGET it runs (a larger one sets STATUS.ring_error)."),
    )),
    Register('HDM_BASE_LO', 0x0a0, 32, external=False, desc='HDM window base, low word', fields=(
        Field('value', 0, 32, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Base bits [31:0]; bits 5:0 must be 0.'),
    )),
    Register('HDM_BASE_HI', 0x0a4, 32, external=False, desc='HDM window base, high word', fields=(
        Field('value', 0, 20, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Base bits [51:32] (a 52-bit CXL HPA).'),
    )),
    Register('HDM_SIZE_LO', 0x0a8, 32, external=False, desc='HDM window size, low word', fields=(
        Field('value', 0, 32, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Size in bytes, bits [31:0]; a multiple of 64. 0: no window (every access decodes as outside).'),
    )),
    Register('HDM_SIZE_HI', 0x0ac, 32, external=False, desc='HDM window size, high word', fields=(
        Field('value', 0, 20, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Size bits [51:32].'),
    )),
    Register('HDM_LAYOUT', 0x0b0, 32, external=False, desc='HDM layout', fields=(
        Field('entry_shift', 0, 4, 'rw', 'r', 0x9, woclr=False, singlepulse=False, hwset=False, range_min=6, range_max=12, desc='log2 of the entry bytes (9: 512 B = K and V of one token and KV head).'),
        Field('pos_shift', 8, 6, 'rw', 'r', 0xa, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='log2 of the position stride, in entries.'),
        Field('head_shift', 16, 5, 'rw', 'r', 0x1, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='log2 of the head stride, in position strides.'),
    )),
    Register('HDM_GEOMETRY', 0x0b4, 32, external=False, desc='HDM geometry in use', fields=(
        Field('n_layers', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Layers decoded (0: the elaborated number, GEOMETRY.n_layers).'),
        Field('n_kv_heads', 16, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='KV heads per layer decoded (0: the elaborated number).'),
    )),
    Register('HDM_POSITIONS', 0x0b8, 32, external=False, desc='HDM positions in use', fields=(
        Field('n_positions', 0, 32, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Positions per queue decoded (0: the elaborated number, 2^entries_log2).'),
    )),
    Register('HINT_DEFAULT', 0x0bc, 32, external=False, desc='Default attention sample', fields=(
        Field('sample', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Sample (UQ0.16) of a read event no hint names.'),
    )),
    Register('HDM_STEP', 0x0c0, 32, external=False, desc='HDM current step', fields=(
        Field('step', 0, 32, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='The decode step the hints have set (events carry it).'),
    )),
    Register('HINTS_PENDING', 0x0c4, 32, external=False, desc='Hints pending', fields=(
        Field('count', 0, 8, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Sample hints of the current step waiting for their read.'),
        Field('depth', 8, 8, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Depth of the hint queue (elaborated).'),
    )),
    Register('HINT_STEP', 0x0c8, 32, external=False, desc='Hint step', fields=(
        Field('step', 0, 32, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Step of the next pushed hint.'),
    )),
    Register('HINT_ENTRY', 0x0cc, 32, external=False, desc='Hint entry', fields=(
        Field('position', 0, 20, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Position of the next pushed sample hint.'),
        Field('head', 20, 4, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='KV head.'),
        Field('layer', 24, 8, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Layer.'),
    )),
    Register('HINT_PUSH', 0x0d0, 32, external=False, desc='Hint push', fields=(
        Field('sample', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Attention sample, UQ0.16.'),
        Field('has_sample', 16, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='1: a sample hint for HINT_ENTRY; 0: a step-only hint.'),
        Field('push', 31, 1, 'rw', 'r', 0x0, woclr=False, singlepulse=True, hwset=False, range_min=None, range_max=None, desc='Write 1: push the hint {HINT_STEP, HINT_ENTRY, sample, has_sample} (reads as 0).'),
    )),
    Register('TIER_LAT', 0x0d4, 32, external=False, desc="Cycles the tier memory models inside the top (tiers = model) add to a read's 2-cycle minimum. Timing only: what moves does not depend on it.", fields=(
        Field('dram', 0, 8, 'rw', 'r', 0x2, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Device DRAM model.'),
        Field('flash', 8, 8, 'rw', 'r', 0x8, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc='Flash model.'),
    )),
    Register('READS', 0x100, 64, external=False, desc='Reads (attention reads of KV entries).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('READ_HITS', 0x108, 64, external=False, desc='Reads served from the fast tier.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('WRITES', 0x110, 64, external=False, desc='Writes (entries written or appended).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('FILLS', 0x118, 64, external=False, desc='Demand fills (reads - read_hits).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('EVICTIONS', 0x120, 64, external=False, desc='Entries evicted from the fast tier.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('VICTIM_NONE', 0x128, 64, external=False, desc="Victim requests answered 'none' (nothing evictable, or the queue decode-locked).", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('PREFETCHES', 0x130, 64, external=False, desc="Prefetch inserts of positions that were not resident (the tracker's count; the policy simulator's prefetches), no_victim ones included.", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('PREFETCH_HITS', 0x138, 64, external=False, desc='Reads that hit a prefetched entry not touched since.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('PREFETCH_DROPS', 0x140, 64, external=False, desc='Candidate positions dropped by prefetch-queue overflow (drop-oldest mode); rate-limited prefetches wait, they are not dropped.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BISNP_SENT', 0x148, 64, external=False, desc='BISnp messages sent.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BIRSP_I', 0x150, 64, external=False, desc='BIRspI received.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BIRSP_S', 0x158, 64, external=False, desc='BIRspS received.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BIRSP_E', 0x160, 64, external=False, desc='BIRspE received.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BI_CONFLICTS', 0x168, 64, external=False, desc='BIConflict messages received (each answered by BIConflictAck).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('PROTO_ERRORS', 0x170, 64, external=False, desc='CXL protocol violations (unknown BITag, illegal BIRsp, stray BIConflict).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BI_TIMEOUTS', 0x178, 64, external=False, desc='BIRsp timeouts.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('QUANT_RAW_LINES', 0x180, 64, external=False, desc='Lines stored raw because they held Inf or NaN.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('PHASE_CHANGES', 0x188, 64, external=False, desc='Prefill/decode transitions.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('STALL_CYCLES', 0x190, 64, external=False, desc='Cycles the tracker waited on its memory ports.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BI_SNOOPS_SKIPPED', 0x198, 64, external=False, desc="Lines of evicted entries left to the host unsnooped: the evict gate's BI_BUSY_LIMIT Busy answers of an eviction were spent (no free BITag while the host's answers wait); the data stays safe, the host keeps its copy.", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('NO_VICTIM', 0x1a0, 64, external=False, desc="Demand misses with nothing evictable (the policy's bypass: the entry is not inserted).", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('STEP_ERRORS', 0x1a8, 64, external=False, desc="Events whose step went backwards in their queue (applied as the queue's current step).", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BAD_EVENTS', 0x1b0, 64, external=False, desc='Events with a layer or KV head beyond the geometry (their decision carries error; no state changes).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('COLDLIST_DROPS', 0x1b8, 64, external=False, desc='Cold-list entries dropped because the ring was full (IRQ_STATUS.coldlist_overflow).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('COLDLIST_HEAD', 0x200, 32, external=False, desc='Index of the next entry the device writes (CHMU hot-list head), 0..63; entries pending = (HEAD - TAIL) mod 64; the ring holds at most 63.', fields=(
        Field('index', 0, 16, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('COLDLIST_TAIL', 0x204, 32, external=False, desc='Index of the next entry the host reads; the host advances it after consuming entries.', fields=(
        Field('index', 0, 16, 'rw', 'r', 0x0, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=63, desc=''),
    )),
    Register('COLDLIST_THRESHOLD', 0x208, 32, external=False, desc='Cold list threshold', fields=(
        Field('entries', 0, 16, 'rw', 'r', 0x10, woclr=False, singlepulse=False, hwset=False, range_min=1, range_max=63, desc='Raise IRQ_STATUS.coldlist_fill when an entry written makes this many pending.'),
    )),
    Register('HDM_ACCESSES', 0x300, 64, external=False, desc='Line accesses the HDM decode took (each leaves on route).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HDM_EVENTS', 0x308, 64, external=False, desc='Tracker events the HDM decode made (line 0 of an entry in the window).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('DECODE_ERRORS', 0x310, 64, external=False, desc='Accesses outside the window or beyond the geometry in use.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BEYOND_GEOMETRY', 0x318, 64, external=False, desc='Accesses in the window beyond the geometry in use (also in DECODE_ERRORS).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HINTS', 0x320, 64, external=False, desc='Hints taken (step-only and sample hints).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('BAD_HINTS', 0x328, 64, external=False, desc='Hints ignored: an entry beyond the geometry, or the configuration refused.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HINTS_USED', 0x330, 64, external=False, desc="Read events that took a hint's sample.", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('DEFAULT_SAMPLES', 0x338, 64, external=False, desc='Read events that took HINT_DEFAULT (no hint named them).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HINT_DROPS', 0x340, 64, external=False, desc='Sample hints dropped: the hint queue held its depth of current-step hints.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HINT_ORPHANS', 0x348, 64, external=False, desc='Sample hints removed unread when the step advanced.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HDM_STEP_ERRORS', 0x350, 64, external=False, desc='Hints whose step was below the current step (the step is kept).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('HINT_PUSH_DROPS', 0x358, 64, external=False, desc='HINT_PUSH writes dropped: one still waiting, CONTROL.enable = 0, or an entry wider than the built geometry.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_COMMANDS', 0x360, 64, external=False, desc='Decisions the tier mover took as commands (one per demand decision, and one per prefetch decision that inserted).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_HITS', 0x368, 64, external=False, desc='Commands that hit a resident frame (no traffic).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_FILLS', 0x370, 64, external=False, desc='Entries filled from flash into a DRAM frame (read misses).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_WRITEBACKS', 0x378, 64, external=False, desc='Dirty victims written back from DRAM to flash.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_CLEAN_DROPS', 0x380, 64, external=False, desc='Clean victims dropped without traffic.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_BYPASSES', 0x388, 64, external=False, desc='Decisions neither hit nor inserted (no_victim, error): no traffic.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_BAD_COMMANDS', 0x390, 64, external=False, desc="Commands the tier mover's frame table refused (a slot mismatch with the tracker): no traffic.", fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_LINES_TO_FLASH', 0x398, 64, external=False, desc='Lines written to flash (writebacks).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_LINES_TO_DRAM', 0x3a0, 64, external=False, desc='Lines written to DRAM (fills).', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
    Register('TIER_PROTO_ERRORS', 0x3a8, 64, external=False, desc='Tier mover protocol errors: an unexpected or mismatched evict grant, a memory answer with no read pending.', fields=(
        Field('count', 0, 64, 'r', 'w', None, woclr=False, singlepulse=False, hwset=False, range_min=None, range_max=None, desc=''),
    )),
)

MEMORIES = (
    Memory('COLDLIST', 0x400, 64, 64, desc="Ring of 8-byte entries in the CHMU hot-list format (counter_width 16), one per eviction (its victim): bits [15:0] the eviction's ordinal since reset mod 2^16 (a gap between consecutive entries = entries dropped), bits [63:16] the unit index ((queue << entries_log2) | victim position), queue = layer x n_kv_heads + head."),
)

BY_NAME = {r.name: r for r in REGISTERS}
