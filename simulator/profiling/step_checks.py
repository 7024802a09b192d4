"""The step-time model against published measurements, each labelled held out or in-sample.

`python -m simulator.profiling step-checks` prints the tables of docs/calibration.md ("The
step-time model"): cuBLAS GEMMs and FlashAttention decode kernels from published kernel benchmarks,
and whole decode steps of Llama-3.1-8B on one H100 against two released step-time fits of vLLM.
A comparison is *held out* only if its source set no constant and saw no check row (a
``[[check]]`` entry of ``data/calibration/step_time.toml``); the others are printed as *in-sample*
with why: vLLM's flash-attention PR #63 set the decode constants (its 1,024- and 16,384-token
points are the calibration points), SpecDecode-Bench's fit sets the 1.2 ms per-step overhead, and
BLIS's fit was trained on 15 runs of which 10 are check rows' (``[[in_sample]]`` entries).
``tests/test_step_calibration.py`` holds these labels to the declared data.  Pure arithmetic on
the model, nothing simulated: the speculative-step table prices its steps with the simulation's
own step pricer (:class:`~simulator.engine.step_price.StepPricer`), outside any simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.vidur.models import model_config, model_shape
from simulator.profiles import roofline
from simulator.profiles.attention import AttentionRows
from simulator.profiles.engines import get_engine
from simulator.profiles.hardware import get_device
from simulator.profiles.step import StepModel
from simulator.models.shapes import ModelShape


@dataclass(frozen=True)
class Source:
    url: str
    in_sample: Optional[str] = None  # why it is not held out; None: held out


PR63_WHY = "in-sample: its source set decode_bandwidth_eff and kernel_us"
SOURCES = {
    "vLLM PR #17126": Source("https://github.com/vllm-project/vllm/pull/17126"),
    "vLLM PR #49363": Source("https://github.com/vllm-project/vllm/pull/49363"),
    "vllm-project/flash-attention PR #63": Source("https://github.com/vllm-project/flash-attention/pull/63", PR63_WHY),
    "Dao-AILab/flash-attention#1572": Source("https://github.com/Dao-AILab/flash-attention/issues/1572"),
    "ONNX Runtime PR #21414": Source("https://github.com/microsoft/onnxruntime/pull/21414"),
    "SpecDecode-Bench fit": Source(
        "https://github.com/SpecDecode-Bench/simulator/blob/main/predictor.py", "in-sample: the same fit sets the 1.2 ms per-step overhead"
    ),
    "BLIS fit": Source(
        "https://github.com/inference-sim/inference-sim/blob/main/defaults.yaml", "in-sample: fitted on 15 runs, 10 of them check rows' runs"
    ),
}
L8 = "meta-llama/Llama-3.1-8B-Instruct"
# (source, N, K, {tokens: measured TFLOP/s}): torch bf16 (cuBLAS) on one H100
GEMM_POINTS = (
    ("vLLM PR #17126", 6144, 4096, {1: 2.513023, 16: 39.110705, 64: 160.586644, 128: 307.854920, 256: 544.327503}),
    ("vLLM PR #49363", 12288, 5376, {1: 2.870333, 16: 46.541434, 64: 182.588263, 128: 352.560566}),
    ("vLLM PR #49363", 43008, 5376, {1: 3.072025, 256: 593.264799}),
)
GQA8_70B = ModelShape(num_q_heads=64, num_kv_heads=8, embedding_dim=8192, mlp_hidden_dim=28672, vocab_size=128256)
QWEN32B_TP2 = ModelShape(num_q_heads=40, num_kv_heads=8, embedding_dim=5120, mlp_hidden_dim=27648, vocab_size=152064).sharded(2)
# (source, detail, shape, batch, cached tokens, measured us, what the point is when not only its source)
ATTENTION_POINTS = (
    ("vllm-project/flash-attention PR #63", "Qwen-32B, TP 2", QWEN32B_TP2, 1, 1024, 14.8, "a calibration point of both"),
    ("vllm-project/flash-attention PR #63", "Qwen-32B, TP 2", QWEN32B_TP2, 1, 4096, 16.5, None),
    ("vllm-project/flash-attention PR #63", "Qwen-32B, TP 2", QWEN32B_TP2, 1, 16384, 26.3, "a calibration point of decode_bandwidth_eff"),
    ("Dao-AILab/flash-attention#1572", "multi-head, upstream FA3 build", None, 16, 128, 27.6, None),
    ("Dao-AILab/flash-attention#1572", "multi-head, upstream FA3 build", None, 16, 2000, 292.0, None),
    ("Dao-AILab/flash-attention#1572", "multi-head, upstream FA3 build", None, 16, 4000, 567.2, None),
    ("ONNX Runtime PR #21414", "GQA-8", GQA8_70B, 64, 32, 21.135, None),
    ("ONNX Runtime PR #21414", "GQA-8", GQA8_70B, 64, 256, 43.563, None),
)
STEP_POINTS = ((1, 300), (16, 300), (64, 300), (1, 1010), (32, 1010), (64, 1010), (128, 1010), (256, 1010))


@dataclass(frozen=True)
class Comparison:
    what: str
    measured: float
    modelled: float
    source: str = ""  # a key of SOURCES
    point: Optional[str] = None  # what this point is besides its source's (a calibration point)

    @property
    def error_pct(self) -> float:
        return 100 * (self.modelled / self.measured - 1)

    @property
    def in_sample(self) -> Optional[str]:
        why = SOURCES[self.source].in_sample
        return f"{why}; {self.point}" if why and self.point else why

    @property
    def held_out(self) -> bool:
        return self.in_sample is None

    def label(self) -> str:
        return "held out" if self.held_out else self.in_sample


def gemm_comparisons() -> list[Comparison]:
    dev = get_device("h100")
    out = []
    for source, n, k, points in GEMM_POINTS:
        for m, tflops in points.items():
            measured_us = 2 * m * n * k / tflops / 1e12 * 1e6
            out.append(Comparison(f"{source}: {n}x{k} at {m} tokens", measured_us, float(roofline.gemm_ms(m, n, k, dev)) * 1e3, source))
    return out


def attention_comparisons() -> list[Comparison]:
    from simulator.profiles.attention import attention_ms

    dev = get_device("h100")
    mha = model_shape("meta-llama/Llama-2-7b-hf")
    out = []
    for source, detail, shape, batch, kv, measured, point in ATTENTION_POINTS:
        modelled = attention_ms(AttentionRows(decode=((1, kv),) * batch), shape or mha, dev) * 1e3
        out.append(Comparison(f"{source} ({detail}): batch {batch} x {kv} tokens", measured, modelled, source, point))
    return out


def specdecode_bench_fit_ms(batch: int, context: int) -> float:
    """SpecDecode-Bench's Llama8BH100 decode step: forward + per-step overhead (its predictor.py)."""
    return (batch * context * 3.92645679e-08 + batch * 2.10103129e-05 + 5.88590713e-03 + 1.20683946e-03) * 1e3


def blis_fit_ms(batch: int, context: int) -> float:
    """BLIS's trained-physics decode step of Llama-3.1-8B on an H100 (its defaults.yaml, iter29):
    roofline terms on the datasheet times its coefficients."""
    weights = 16.06e9 / 3.35e12
    kv = batch * context * 131072 / 3.35e12
    return (1.36252915 * weights + 1.94710771 * kv) * 1e3 + (32.09546717 * 32 + 4.41684444 * batch + 126.024825) * 1e-3


def step_model(engine: str = "vllm-0.10.1") -> StepModel:
    dev = get_device("h100")
    return StepModel(shape=model_shape(L8), num_layers=model_config(L8).num_layers, device=dev, engine=get_engine(engine), max_tokens=512)


def step_ms(model: StepModel, batch: int, context: int, overhead_ms: float = 1.2) -> float:
    """A decode step of ``batch`` rows at ``context`` cached tokens, with the engine overhead."""
    rows = AttentionRows(decode=((1, context + 1),) * batch)
    return model.forward(rows, batch, batch, uniform_decode=True).total_ms + overhead_ms


SPEC_K = 3  # SpecDecode-Bench's runs (its project page); the EAGLE-3 head of its class Llama8BH100
SPEC_DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
SPEC_POINTS = ((1, 300), (4, 300), (16, 300), (32, 300), (64, 300), (128, 300))


def specdecode_bench_spec_step_ms(batch: int, context: int, k: int = SPEC_K) -> float:
    """SpecDecode-Bench's EAGLE step (its simulator.py, ``simulate_sd_batch``): the target's
    forward over every row's k + 1 tokens, one request's draft time (its KV term over the whole
    batch's cache, its token term over that request's k + 1) and the per-step overhead."""
    kv = batch * context
    target = kv * 3.92645679e-08 + batch * (k + 1) * 2.10103129e-05 + 5.88590713e-03
    draft = kv * 2.37768493e-09 + (k + 1) * 8.41429603e-07 + 2.13526175e-03
    return (target + draft + 1.20683946e-03) * 1e3


def speculative_step_comparisons() -> list[tuple[int, int, float, float, float, float]]:
    """(batch, context, model plain, model speculative, fit plain, fit speculative) in ms: the
    simulation's own step price (:class:`~simulator.engine.step_price.StepPricer`: target, logits,
    rejection sampling, the EAGLE-3 head's passes, the engine overhead) of a decode step and of an
    EAGLE-3 k = 3 verify step, every row at ``context`` cached tokens."""
    from simulator.engine.step_price import StepPricer
    from simulator.runs.config import RunConfig, SpeculationConfig

    plain = RunConfig(model=L8, device="h100", engine="vllm-0.10.1")
    speculation = SpeculationConfig(num_speculative_tokens=SPEC_K, acceptance_rate=0.7, proposer="eagle3", draft_model=SPEC_DRAFT)
    plain_price, spec_price = StepPricer(plain), StepPricer(RunConfig(model=L8, device="h100", engine="vllm-0.10.1", speculation=speculation))
    out = []
    for b, c in SPEC_POINTS:
        model_plain = plain_price.seconds([], [(1, c)] * b) * 1e3
        model_spec = spec_price.seconds([], [(SPEC_K + 1, c)] * b) * 1e3
        out.append((b, c, model_plain, model_spec, specdecode_bench_fit_ms(b, c), specdecode_bench_spec_step_ms(b, c)))
    return out


def step_comparisons() -> list[tuple[int, int, float, float, float]]:
    model = step_model()
    return [(b, c, step_ms(model, b, c), specdecode_bench_fit_ms(b, c), blis_fit_ms(b, c)) for b, c in STEP_POINTS]


def report() -> str:
    lines = ["GEMMs (H100, bf16): measured us, modelled us, error [held out or in-sample]"]
    lines += [f"  {c.what}: {c.measured:.1f} / {c.modelled:.1f} ({c.error_pct:+.1f}%) [{c.label()}]" for c in gemm_comparisons()]
    lines.append("decode attention (H100): measured us, modelled us, error [held out or in-sample]")
    lines += [f"  {c.what}: {c.measured:.1f} / {c.modelled:.1f} ({c.error_pct:+.1f}%) [{c.label()}]" for c in attention_comparisons()]
    lines.append("decode steps of Llama-3.1-8B on one H100 (ms): model, SpecDecode-Bench fit, BLIS fit; neither fit is held out:")
    lines += [f"  {name}: {SOURCES[name].in_sample}" for name in ("SpecDecode-Bench fit", "BLIS fit")]
    for b, c, model, sdb, blis in step_comparisons():
        lines.append(f"  batch {b:3d} at {c:4d} tokens: {model:6.2f}  {sdb:6.2f} ({100 * (model / sdb - 1):+.0f}%)  {blis:6.2f} ({100 * (model / blis - 1):+.0f}%)")
    lines.append(
        f"EAGLE-3 k = {SPEC_K} steps of Llama-3.1-8B on one H100 (ms), model against SpecDecode-Bench's fit "
        f"({SOURCES['SpecDecode-Bench fit'].in_sample}, and the draft pass's cost): plain, speculative, speculative / plain"
    )
    for b, c, mp, ms, fp, fs in speculative_step_comparisons():
        lines.append(f"  batch {b:3d} at {c:4d} tokens: model {mp:6.2f} {ms:6.2f} {ms / mp:4.2f}x  fit {fp:6.2f} {fs:6.2f} {fs / fp:4.2f}x  ({100 * (ms / fs - 1):+.0f}% on the step, {100 * ((ms / mp) / (fs / fp) - 1):+.0f}% on the ratio)")
    return "\n".join(lines)
