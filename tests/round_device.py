"""A made-up GPU with round numbers, for tests that work a kernel model's arithmetic by hand.

Its numbers are chosen so each kernel model of :mod:`simulator.profiles.roofline` reduces to a
launch time plus bytes over bandwidth: no L2 (every byte streams from HBM), full efficiency for
GEMMs with no tile overhead and no partial-wave discount, and the streaming kernels' three
efficiencies told apart (act 1/2, add 1/4, rope 1/8), so a kernel costed with another's shows.
What a hand-worked test reads of it:

* GEMM [m, k] x [k, n]: 10 us launch + max(compute, memory); memory = 2 bytes x (m k + n k + m n)
  at 1 TB/s; compute = waves x 2 x 64 x 64 x k x 200 slots at 1,000 TFLOPS, waves = tiles / 200
  (64 x 64 tiles, 2 CTAs on each of 100 SMs), far below memory at the sizes the tests use.
* RMSNorm over t rows: 3 us launch + (t / 200 waves) x 1 us.
* a streaming kernel of B bytes at efficiency e: 2 us launch + B / (e x 1 TB/s).

The attention and decode constants are placeholders: no hand-worked test reads them.
"""

from __future__ import annotations

from simulator.models.shapes import ModelShape
from simulator.profiles.hardware import Datasheet, DeviceSpec, KernelConstants, KernelShapes

ROUND = DeviceSpec(
    name="round",
    datasheet=Datasheet(memory_gib=80, peak_fp16_tflops=1000, hbm_bandwidth_tbps=1.0, num_sms=100, l2_cache_mib=0, source="round numbers, for hand-worked tests"),
    constants=KernelConstants(
        gemm_compute_eff=1.0, gemm_memory_eff=1.0, gemm_launch_us=10.0, gemm_tail_exponent=1.0, gemm_k_overhead=0.0,
        norm_launch_us=3.0, norm_wave_l2_us=1.0, norm_wave_hbm_us=1.0, norm_tail_exponent=1.0,
        act_eff=0.5, add_eff=0.25, rope_eff=0.125, elementwise_launch_us=2.0, l2_bandwidth_gain=1.0,
        decode_fixed_us=1.0, decode_per_seq_us=1.0, decode_first_wave_eff=1.0, decode_stream_gain=1.0, decode_sm_gbps=1.0,
        decode_short_kv_eff=1.0, decode_short_kv_tokens=1.0, decode_doubling_penalty=0.0, split_combine_us=1.0,
        prefill_fixed_us=1.0, prefill_compute_eff=1.0, prefill_tail_weight=0.0, prefill_cta_overhead_blocks=0.0,
        gemm_overlap_loss=0.0,
    ),
    constants_version="round",
    fitted_from="nothing: round numbers",
    kernels=KernelShapes(gemm_tile_m=64, gemm_tile_n=64, gemm_ctas_per_sm=2, norm_width_exponent=0.0, source="round numbers"),
)

# A small Llama-style model: hidden 256, 4 query heads and 2 KV heads of 64, MLP width 512 (gated),
# so one worker's QKV projection is (4 + 2 x 2) x 64 = 512 wide
SMALL = ModelShape(num_q_heads=4, num_kv_heads=2, embedding_dim=256, mlp_hidden_dim=512, vocab_size=1000)
