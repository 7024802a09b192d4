"""Request-length distributions (issue 31, item 5): the sampler at hand-worked points, its
determinism and clipping, the published rows' use of it, and the schema's refusals."""

import dataclasses
import math

import numpy as np
import pytest

from simulator.published.plan import WORKLOAD_SEED, plan
from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload
from simulator.runs.workloads import LengthShape, sampled_lengths
from simulator.specs.measurements import load, load_assumptions, load_length_distributions, load_measurements
from simulator.util.errors import ConfigError

from repo import DATA_DIR

PUBLISHED, ASSUMPTIONS = DATA_DIR / "published.toml", DATA_DIR / "published_assumptions.toml"
DISTRIBUTIONS = DATA_DIR / "calibration" / "length_distributions.toml"
N = 40_000


def rng(seed=1):
    return np.random.default_rng(seed)


# --- the sampler at hand-worked points ----------------------------------------------------------
def test_a_quantile_shape_scales_to_the_mean_and_keeps_its_quantiles():
    # Q(u) = 1 + 2u on [0, 0.5] and 2 + 2(u - 0.5) on [0.5, 1]: uniform on [1, 3], mean 2
    shape = LengthShape("quantiles", (0, 0.5, 1), (1, 2, 3))
    assert shape.scale_for(200) == pytest.approx(100, rel=1e-6)  # mean 2 -> 200 needs x 100
    draws = np.array(shape.draw(200, N, rng()))
    assert draws.mean() == pytest.approx(200, rel=0.01)
    # uniform on [100, 300]: quartiles 150, 200, 250 (sampling error about 1 token at this N)
    assert np.quantile(draws, [0.25, 0.5, 0.75]) == pytest.approx([150, 200, 250], abs=3)
    assert draws.min() >= 100 and draws.max() <= 300


def test_a_cap_is_paid_for_by_a_larger_scale_so_the_mean_is_kept():
    # uniform on [100, 300] capped at 250: 0.75 x 175 + 0.25 x 250 = 193.75 at scale 1
    shape = LengthShape("quantiles", (0, 1), (100, 300), max_tokens=250)
    assert shape._capped_mean(1.0) == pytest.approx(193.75, abs=0.01)
    assert shape.scale_for(193.75) == pytest.approx(1.0, rel=1e-4)
    draws = np.array(shape.draw(200, N, rng()))
    assert draws.max() <= 250 and draws.mean() == pytest.approx(200, rel=0.01)


def test_an_exponential_turn_at_hand_worked_points():
    free = LengthShape("exponential")
    assert free.scale_for(400) == pytest.approx(400, rel=1e-6)
    draws = np.array(free.draw(400, N, rng()))
    assert draws.mean() == pytest.approx(400, rel=0.02)
    assert np.median(draws) == pytest.approx(400 * math.log(2), rel=0.03)  # the exponential's median
    # capped at 2000: E[min(X, C)] = theta (1 - e^(-C / theta)) = 1000 (1 - e^-2) = 864.66 at theta 1000
    capped = LengthShape("exponential", max_tokens=2000)
    assert capped._capped_mean(1000.0) == pytest.approx(864.66, abs=0.01)
    assert capped.scale_for(864.66) == pytest.approx(1000, rel=1e-4)
    # two turns each capped: the conversation's mean is twice a turn's, its longest at most 2 x 2000
    two = LengthShape("exponential", turns=2, max_tokens=2000)
    assert two.scale_for(2 * 864.66) == pytest.approx(1000, rel=1e-4)
    conversation = np.array(two.draw(1692, N, rng()))
    assert conversation.mean() == pytest.approx(1692, rel=0.02) and conversation.max() <= 4000


def test_a_mean_the_cap_cannot_reach_is_refused():
    with pytest.raises(ConfigError, match="cannot be drawn under a cap of 2048"):
        LengthShape("exponential", turns=2, max_tokens=2048).draw(4096, 10, rng())


def test_the_same_seed_draws_the_same_lengths_and_another_does_not():
    shape = LengthShape("exponential")
    a = sampled_lengths(shape, shape, 300, 200, 50, seed=7, max_total_tokens=8192)
    assert a == sampled_lengths(shape, shape, 300, 200, 50, seed=7, max_total_tokens=8192)
    assert a != sampled_lengths(shape, shape, 300, 200, 50, seed=8, max_total_tokens=8192)
    # one stream per side: a prompt shape made fixed leaves the outputs' draws as they were
    assert sampled_lengths(LengthShape("fixed"), shape, 300, 200, 50, seed=7, max_total_tokens=8192)[1] == a[1]


def test_drawn_lengths_are_clipped_to_the_context():
    shape = LengthShape("exponential")
    prompts, outputs = sampled_lengths(shape, shape, 80, 80, 2000, seed=3, max_total_tokens=128)
    assert max(prompts) == 127 and min(outputs) >= 1
    assert max(p + o for p, o in zip(prompts, outputs)) == 128  # some are cut, none is over
    assert all(p >= 1 for p in prompts)


def test_a_fixed_shape_stays_fixed():
    assert LengthShape("fixed").draw(7, 5, rng()) == (7,) * 5


# --- the declared distributions -------------------------------------------------------------------
def test_every_declared_distribution_keeps_a_mean_asked_of_it():
    for name, d in load_length_distributions(DISTRIBUTIONS).items():
        for side in (d.input, d.output):
            if side.kind != "fixed":
                assert np.mean(side.draw(300, N, rng())) == pytest.approx(300, rel=0.03), name
        assert d.examined_rows == (), f"{name}: set from its source alone, no row examined"


def test_each_dataset_records_its_choice_and_fixed_ones_stay_fixed():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    assert all(d.lengths_note for d in assumptions.datasets.values())
    assert not assumptions.datasets["sonnet-decode-heavy"].sampled and not assumptions.datasets["unstated"].sampled
    rows = {m.id: m for m in measurements}
    sonnet = plan(rows["v060-l3-8b-h100-decode-qps16"], assumptions, rows)  # a fixed dataset: the stock Poisson stream
    assert isinstance(sonnet.run.workload, PoissonWorkload) and sonnet.run.workload.output_tokens == 256
    lmsys = plan(rows["lmsys-blog-oss120b-h100-mxfp4-bs1"], assumptions, rows)  # unstated dataset, the row's 1024 / 512
    assert set(lmsys.run.workload.prompt_tokens) == {1024} and set(lmsys.run.workload.output_tokens) == {512}


def test_a_row_that_says_fixed_keeps_its_lengths_in_a_drawn_dataset():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    row = rows["dogacel-oss120b-h100-nospec-bs64"]
    drawn = plan(row, assumptions, rows).run.workload
    fixed = plan(dataclasses.replace(row, lengths="fixed"), assumptions, rows).run.workload
    assert len(set(drawn.output_tokens)) > 10 and np.mean(drawn.output_tokens) == pytest.approx(1692, rel=0.1)
    assert fixed == ClosedLoopWorkload.fixed(64, 80, 150, 1692)


def test_a_rate_row_keeps_its_poisson_arrivals_and_only_its_lengths_change():
    from simulator.engine.generator import vidur_synthetic_config
    from simulator.vidur.runtime import synthetic_request_rows

    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    row = rows["vllm-blog2024-draft-qps4"]
    drawn = plan(row, assumptions, rows).run.workload
    stock = plan(dataclasses.replace(row, lengths="fixed"), assumptions, rows).run.workload
    assert isinstance(drawn, ExplicitWorkload) and isinstance(stock, PoissonWorkload) and stock.seed == WORKLOAD_SEED
    stream = synthetic_request_rows(vidur_synthetic_config(stock, 8192))
    assert drawn.arrival_s == tuple(t for t, _, _ in stream)
    assert np.mean(drawn.output_tokens) == pytest.approx(stock.output_tokens, rel=0.05)
    assert max(drawn.prompt_tokens) <= 1024  # vLLM's ShareGPT filter
    assert plan(row, assumptions, rows).run == plan(row, assumptions, rows).run  # deterministic


def test_a_closed_loop_row_sends_the_sources_request_count():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    eagle3 = plan(rows["eagle3-paper-sglang-eagle3-bs8"], assumptions, rows).run.workload
    assert eagle3.num_requests == 80  # MT-bench's 80 conversations (the dataset's num_prompts)
    assert plan(rows["vllm-pr16035-nospec"], assumptions, rows).run.workload.num_requests == 4  # fixed: as before


# --- refusals -------------------------------------------------------------------------------------
DATASET = '[datasets.d]\ninput_len = 10\noutput_len = 20\nsource_url = "https://x.org"\nnote = "n"\n'


def assumptions_file(tmp_path, text):
    path = tmp_path / "assumptions.toml"
    path.write_text("acceptance = []\n" + text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        (DATASET + 'lengths_note = "w"\n', "missing lengths"),
        (DATASET + 'lengths = "fixed"\nlengths_note = ""\n', "lengths_note must say why"),
        (DATASET + 'lengths = "lognormal"\nlengths_note = "w"\n', "lengths = 'lognormal' names a distribution, but the file names no length_distributions"),
        ('length_distributions = "dist.toml"\n' + DATASET + 'lengths = "nope"\nlengths_note = "w"\n', "lengths = 'nope' is neither \"fixed\" nor a distribution"),
        (DATASET + 'lengths = "fixed"\nlengths_note = "w"\nnum_prompts = 0\n', "num_prompts = 0 must be a positive integer"),
    ],
)
def test_a_bad_dataset_length_choice_is_refused_naming_the_key(tmp_path, text, message):
    (tmp_path / "dist.toml").write_text('[distributions.real]\nsource_url = "https://x.org"\nbasis = "source"\nstatistics = "s"\n'
                                        'derivation = "d"\nexamined_rows = []\n[distributions.real.input]\nkind = "fixed"\n[distributions.real.output]\nkind = "fixed"\n')
    with pytest.raises(ConfigError, match=message):
        load_assumptions(assumptions_file(tmp_path, text), ())


def test_a_dataset_naming_a_declared_distribution_is_read(tmp_path):
    (tmp_path / "dist.toml").write_text('[distributions.real]\nsource_url = "https://x.org"\nbasis = "source"\nstatistics = "s"\n'
                                        'derivation = "d"\nexamined_rows = []\n[distributions.real.input]\nkind = "fixed"\n'
                                        '[distributions.real.output]\nkind = "exponential"\nmax_tokens = 64\n')
    text = 'length_distributions = "dist.toml"\n' + DATASET + 'lengths = "real"\nlengths_note = "w"\n'
    dataset = load_assumptions(assumptions_file(tmp_path, text), ()).datasets["d"]
    assert dataset.sampled and dataset.distribution.output == LengthShape("exponential", max_tokens=64)


HEAD = '[distributions.x]\nsource_url = "https://x.org"\nbasis = "source"\nstatistics = "s"\nderivation = "d"\nexamined_rows = []\n'


@pytest.mark.parametrize(
    "body, message",
    [
        ('[distributions.x.input]\nkind = "gamma"\n[distributions.x.output]\nkind = "fixed"\n', r"\[distributions.x.input\] kind = 'gamma'"),
        ('[distributions.x.input]\nkind = "quantiles"\nprobabilities = [0, 0.6, 0.5, 1]\ntokens = [1, 2, 3, 4]\n[distributions.x.output]\nkind = "fixed"\n',
         r"\[distributions.x.input\]: length shape probabilities = \[0, 0.6, 0.5, 1\]: must rise strictly from 0 to 1"),
        ('[distributions.x.input]\nkind = "fixed"\n[distributions.x.output]\nkind = "quantiles"\nprobabilities = [0, 1]\ntokens = [5, 2]\n',
         r"\[distributions.x.output\]: length shape tokens = \[5, 2\]"),
        ('[distributions.x.input]\nkind = "quantiles"\nprobabilities = [0, 1]\ntokens = [1, 2]\nturns = 2\n[distributions.x.output]\nkind = "fixed"\n', "turns = 2"),
        ('[distributions.x.input]\nkind = "fixed"\nmax_tokens = 10\n[distributions.x.output]\nkind = "fixed"\n', "max_tokens = 10"),
        ('[distributions.x.input]\nkind = "fixed"\n', "missing output"),
    ],
)
def test_a_bad_shape_is_refused_naming_the_key(tmp_path, body, message):
    path = tmp_path / "dist.toml"
    path.write_text(HEAD + body)
    with pytest.raises(ConfigError, match=message):
        load_length_distributions(path)


def test_a_bad_basis_is_refused(tmp_path):
    path = tmp_path / "dist.toml"
    path.write_text(HEAD.replace('basis = "source"', 'basis = "hunch"') + '[distributions.x.input]\nkind = "fixed"\n[distributions.x.output]\nkind = "fixed"\n')
    with pytest.raises(ConfigError, match="basis = 'hunch'"):
        load_length_distributions(path)


def test_a_row_with_an_unknown_lengths_flag_is_refused(tmp_path):
    path = tmp_path / "published.toml"
    path.write_text('[[measurement]]\nid = "x-1"\nsource_url = "https://x.org"\nengine = "vllm"\ntp = 1\nmodel = "m"\nproposer = "none"\n'
                    'metric = "tpot_ms"\nvalue = 1.0\nrole = "check"\nacceptance_class = "same_source"\nbatch_size = 1\nlengths = "sampled"\n')
    with pytest.raises(ConfigError, match=r"lengths = 'sampled'; expected one of \['dataset', 'fixed'\]"):
        load_measurements(path)
