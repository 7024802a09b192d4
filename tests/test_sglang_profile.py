"""SGLang engine profiles (simulator/profiles/engines.toml) against SGLang's source, and the rule
that runs an SGLang row of a stated version on its profile (simulator/published/plan.py).

The constants below are hand-copied from SGLang's source at the commit that bumps
python/sglang/version.py to each release (sgl-project/sglang; docs/sources/engines.md, "SGLang"):

* v0.4.4, commit 6aaeb84 (PR #4041): server_args.py l. 234 ``cuda_graph_max_bs = 160``, l. 283-284
  EAGLE sets ``disable_cuda_graph_padding`` and ``disable_overlap_schedule``; cuda_graph_runner.py
  l. 118 ``[1, 2, 4] + [i * 8 for i in range(1, 21)]``, l. 120 ``list(range(1, 33))`` under
  speculation; speculative/eagle_worker.py l. 62 the draft runner without CUDA graphs (its extend
  eager), l. 153 ``EAGLEDraftCudaGraphRunner`` for the decode steps; eagle_utils.py l. 70
  ``extend_lens = [x + 1 for x in accept_length_cpu]``.
* v0.5.1.post3, commit bc80dc4: cuda_graph_runner.py l. 174 ``[1, 2, 4, 8] + list(range(16, 161, 8))``,
  l. 179-182 the speculative list; server_args.py l. 604 overlap off under EAGLE.
* v0.5.3, commit a4a3d82, and v0.5.6.post1, commit 9a327bd: server_args.py ``cuda_graph_max_bs =
  512`` (TP >= 4, or above 160 GB), ``_generate_cuda_graph_batch_sizes`` (l. 696 / 889); v0.5.6.post1
  l. 1721 overlap off under EAGLE unless SGLANG_ENABLE_SPEC_V2, environ.py l. 318 its default False.
"""

from __future__ import annotations

import pytest

from simulator.profiles.engines import DEFAULT_ENGINE, engine_for_version, get_engine, sglang_engine_for_version
from simulator.published.plan import PROXY_ENGINE, engine_identity
from simulator.schemas import OTHER_ENGINE
from simulator.specs.measurements import Measurement
from simulator.util.errors import ConfigError

V044_PLAIN = [1, 2, 4] + [i * 8 for i in range(1, 21)]
V051_PLAIN = [1, 2, 4, 8] + list(range(16, 161, 8))
V051_SPEC = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 64, 8)) + list(range(80, 161, 16))
V05X_PLAIN = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, 513, 32))
V053_SPEC = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 64, 4)) + list(range(72, 257, 8)) + list(range(272, 513, 16))
V056_SPEC = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8)) + list(range(272, 513, 16))


@pytest.mark.parametrize(
    "name, max_bs, plain, spec, extend_graph",
    [
        ("sglang-0.4.4", 160, V044_PLAIN, list(range(1, 33)), False),
        ("sglang-0.5.1.post3", 160, V051_PLAIN, V051_SPEC, True),
        ("sglang-0.5.3", 512, V05X_PLAIN, V053_SPEC, True),
        ("sglang-0.5.6.post1", 512, V05X_PLAIN, V056_SPEC, True),
    ],
)
def test_each_profile_is_what_the_source_says(name, max_bs, plain, spec, extend_graph):
    e = get_engine(name)
    assert e.engine == "sglang" and e.cudagraph_mode == "full_decode_only" and e.capture_rule == "sglang"
    assert (e.cuda_graph_max_bs, list(e.capture_bs), list(e.spec_capture_bs), e.draft_extend_graph) == (max_bs, plain, spec, extend_graph)
    # the overlap scheduler runs without speculation, and is off under EAGLE at every one of these versions
    assert e.overlaps(None, kind_rule=True) and not e.overlaps("eagle3", kind_rule=True) and not e.overlaps("eagle", kind_rule=True)
    assert "carried" in e.source and set(e.carried_from) <= {"vllm-0.10.1", "vllm-0.14.0"} and e.carried_from  # the kernel gaps and CPU costs are vLLM's, and the profile says which


def test_a_decode_batch_replays_a_graph_and_a_prefill_runs_eagerly():
    e = get_engine("sglang-0.4.4").for_run(256, 8192)
    assert e.mode(24, 1) == "full" and e.padded(20, 1) == 24  # padded to the next captured request count
    assert e.mode(161, 1) == "eager"  # above cuda_graph_max_bs
    assert e.mode(100, False) == "eager"  # a prefill or mixed batch: no piecewise graphs in SGLang


def test_an_eagle_verify_batch_replays_at_k_plus_one_tokens_a_request():
    e = get_engine("sglang-0.4.4").for_run(64, 8192, k=3, method="eagle3")
    assert e.max_capture_size == 32 * 4  # 32 requests of 4 tokens
    assert e.mode(32 * 4, 4) == "full" and e.mode(33 * 4, 4) == "eager"  # 33-64 requests verify eagerly at 0.4.4
    d = e.drafter("eagle3")
    assert d.mode(10, 1) == "full"  # the draft's one-token steps: EAGLEDraftCudaGraphRunner
    assert d.mode(40, 4) == "eager"  # its extend over the accepted tokens, eager at 0.4.4
    d5 = get_engine("sglang-0.5.3").for_run(64, 8192, k=3, method="eagle3").drafter("eagle3")
    assert d5.mode(40, 4) == "full"  # EAGLEDraftExtendCudaGraphRunner from 0.5.x
    # graphs are captured per request count, so the extend of 200 requests (800 tokens) replays the
    # 200-request graph, and 11 requests pad to the 12-request graph (48 tokens), not to 44 tokens
    assert d5.mode(200 * 4, 4) == "full" and d5.padded(11 * 4, 4) == 12 * 4
    assert d5.mode(513 * 4, 4) == "eager"  # above cuda_graph_max_bs (512 requests)
    assert d5.mode(100, 1) == "full" and d5.padded(61, 1) == 72  # its one-token steps: 61 requests pad to 72


def test_a_verify_batch_pads_its_request_count_whatever_its_row_length():
    """A tree's verify rows are num_draft_tokens long, not 1 + k: the graph is still chosen by
    request count (SGLang captures num_draft_tokens a request, per count)."""
    e = get_engine("sglang-0.5.3").for_run(64, 8192, k=3, method="eagle3")
    assert e.mode(100 * 8, 8) == "full" and e.padded(100 * 8, 8) == 104 * 8
    assert e.padded(33 * 4, 4) == 40 * 4 and e.mode(600 * 4, 4) == "eager"


def test_vllm_lookups_never_see_an_sglang_profile():
    assert engine_for_version("0.4.4").name.startswith("vllm-") and DEFAULT_ENGINE.startswith("vllm-")


def _row(version, engine="sglang"):
    return Measurement(
        id="sglang-row", source_url="https://example.org/a", engine=engine, engine_version=version, model="meta-llama/Llama-3.1-8B-Instruct",
        proposer="none", k=0, metric="output_tokens_per_s", value=100.0, role="check", acceptance_class="same_source",
        gpu="h100", batch_size=1, input_len=128, output_len=128,
    )


@pytest.mark.parametrize(
    "version, profile",
    [("0.4.4", "sglang-0.4.4"), ("0.4.6", "sglang-0.4.4"), ("0.5.1.post3", "sglang-0.5.1.post3"), ("0.5.2", "sglang-0.5.1.post3"),
     ("0.5.3", "sglang-0.5.3"), ("0.5.6.post1", "sglang-0.5.6.post1"), ("0.5.9", "sglang-0.5.6.post1")],
)
def test_a_stated_sglang_version_runs_its_profile(version, profile):
    assert sglang_engine_for_version(version).name == profile
    identity = engine_identity(_row(version))
    assert (identity.profile, identity.engine_class) == (profile, OTHER_ENGINE)  # still apart from the vLLM headline
    assert "sourced" in identity.basis and "carried from vllm-0.10.1 and vllm-0.14.0" in identity.basis


def test_an_sglang_row_of_no_version_or_date_stays_on_the_proxy():
    assert engine_identity(_row(None)).profile == PROXY_ENGINE


@pytest.mark.parametrize(
    "date, profile",
    [("2025-01-02", PROXY_ENGINE), ("2025-03-12", PROXY_ENGINE), ("2025-03-13", "sglang-0.4.4"), ("2025-08-26", "sglang-0.4.4"),
     ("2025-08-27", "sglang-0.5.1.post3"), ("2025-12-01", "sglang-0.5.3"), ("2025-12-23", "sglang-0.5.6.post1")],
)
def test_an_sglang_row_of_no_version_runs_the_newest_profile_out_by_its_date(date, profile):
    """The vLLM rows' rule: the newest profile released on or before the source's date (0.4.4 on
    2025-03-13, 0.5.1.post3 on 2025-08-27, 0.5.3 on 2025-10-06, 0.5.6.post1 on 2025-12-09);
    a row older than every profile stays on the proxy, as another engine."""
    from dataclasses import replace

    identity = engine_identity(replace(_row(None), source_date=date))
    assert (identity.profile, identity.engine_class) == (profile, OTHER_ENGINE)
    if profile != PROXY_ENGINE:
        assert identity.basis.startswith(f"SGLang of {date} (version not stated): {profile} (released ") and "carried from" in identity.basis
    else:  # says why: the date, and the oldest profile's release it falls before
        assert identity.basis == f"SGLang of {date} (version not stated): before every SGLang profile (sglang-0.4.4, released 2025-03-13); run on the proxy profile {PROXY_ENGINE}"


@pytest.mark.parametrize("version", ["0.3.6", "0.5.0", "0.6.1"])
def test_a_stated_version_without_a_profile_is_refused_by_name(version):
    with pytest.raises(ConfigError, match=rf"engine_version = '{version}'.*no SGLang engine profile"):
        engine_identity(_row(version))


@pytest.mark.parametrize(
    "row, text",
    [({"engine_class": OTHER_ENGINE, "engine": "sglang", "engine_version": "0.5.3", "engine_profile": "sglang-0.5.3"}, "SGLang 0.5.3: another engine, on profile sglang-0.5.3"),
     ({"engine_class": OTHER_ENGINE, "engine": "sglang", "engine_version": "", "engine_profile": PROXY_ENGINE}, f"SGLang: another engine, on the proxy {PROXY_ENGINE}")],
)
def test_the_page_names_an_sglang_profile_as_its_own_and_the_proxy_as_a_proxy(row, text):
    from simulator.website.published import engine_text

    assert engine_text(row) == text


def test_a_row_stating_an_sglang_version_without_a_profile_is_refused_before_anything_runs():
    """Bad input, not an unreproducible row: the build stops naming the row (its CSV row needs the engine identity)."""
    from simulator.published.plan import plan
    from simulator.specs.measurements import Assumptions

    with pytest.raises(ConfigError, match=r"row 'sglang-row'.*engine_version = '0\.5\.0'.*no SGLang engine profile"):
        plan(_row("0.5.0"), Assumptions({}, {}), {})


def test_the_drafter_keeps_its_one_token_steps_in_the_graph_and_an_unconfigured_profile_replays_its_decode_list():
    chain = get_engine("sglang-0.4.4").for_run(64, 8192, k=3, method="eagle3").drafter("eagle3")
    assert chain.mode(10, True) == "full"  # a uniform batch of unknown length is a one-token draft step, not the extend
    tree = get_engine("sglang-0.4.4").for_run(64, 8192, k=3, method="eagle3").drafter("eagle3_tree", tree=True)
    assert tree.mode(8 * 4, 4) == "full"  # a top-4 step of 8 requests: in EAGLEDraftCudaGraphRunner, though 4 = 1 + depth
    plain = get_engine("sglang-0.5.3")  # before for_run: the plain decode list
    assert plain.mode(8, 1) == "full" and plain.padded(9, 1) == 12
