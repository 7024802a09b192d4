"""The one acceptance input (issue 34): each form's conversion at hand-worked points, and its refusals."""

import pytest

from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.util.errors import ConfigError


def test_a_rate_is_the_same_rate_at_every_position():
    figure = AcceptanceInput.given(rate=0.6)
    assert figure.rate == 0.6 and figure.per_position is None
    assert figure.conditional(3) == (0.6, 0.6, 0.6)
    assert figure.length(2) == pytest.approx(1 + 0.6 + 0.36)


def test_a_length_becomes_the_iid_rate_that_reproduces_it():
    # 1 + a + a^2 = 1.75 at k = 2 has the root a = 0.5
    figure = AcceptanceInput.given(length=1.75, at_k=2)
    assert figure.rate == pytest.approx(0.5, abs=1e-9)
    assert figure.conditional(4) == pytest.approx((0.5,) * 4, abs=1e-9)
    assert "mean acceptance length 1.75 at k = 2" in figure.derivation and "0.5000" in figure.derivation


def test_vllm_unconditional_rates_become_conditional_ones():
    # p_i = a_i / a_(i-1): 0.8, 0.4 / 0.8, 0.1 / 0.4
    figure = AcceptanceInput.given(unconditional=(0.8, 0.4, 0.1))
    assert figure.rate is None
    assert figure.per_position == pytest.approx((0.8, 0.5, 0.25))
    assert figure.conditional(2) == pytest.approx((0.8, 0.5))


def test_lengths_at_consecutive_k_give_per_position_rates():
    # L(1) = 1.5: a_0 = 0.5; L(2) - L(1) = 0.25 = a_1, so p_1 = 0.25 / 0.5
    figure = AcceptanceInput.given(lengths=(1.5, 1.75), from_k=1)
    assert figure.per_position == pytest.approx((0.5, 0.5))
    assert figure.length(2) == pytest.approx(1.75)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({}, "give exactly one of"),
        ({"rate": 0.5, "per_position": (0.5,)}, "give exactly one of"),
        ({"rate": 1.2}, "rate = 1.2 must be a probability"),
        ({"length": 2.0}, "acceptance_length = 2.0 needs at_k"),
        ({"length": 4.5, "at_k": 3}, "is outside [1, 4]"),
        ({"per_position": ()}, "per_position is empty"),
        ({"per_position": (0.5, 1.5)}, r"per_position[1] = 1.5 must be a probability"),
        ({"lengths": (1.5, 4.0), "from_k": 1}, "acceptance_lengths[1] = 4.0 (k = 2) is outside [1, 3]"),
        ({"unconditional": (0.5, 0.6)}, "unconditional rates cannot increase"),
    ],
)
def test_a_bad_figure_is_refused_naming_the_input(kwargs, needle):
    with pytest.raises(ConfigError) as info:
        AcceptanceInput.given(**kwargs)
    assert needle in str(info.value)


def test_a_refusal_names_the_input_as_the_user_spelled_it():
    with pytest.raises(ConfigError, match=r"^--acceptance 1.5: must be a probability"):
        AcceptanceInput.given(rate=1.5, names={"rate": "--acceptance"})
    with pytest.raises(ConfigError, match=r"^spec row 3: acceptance_length = 9.0 at at_k = 2 is outside"):
        AcceptanceInput.given(length=9.0, at_k=2, where="spec row 3")


def test_too_few_positions_for_k_are_refused():
    with pytest.raises(ConfigError, match="2 per-position rates at k = 3"):
        AcceptanceInput.given(per_position=(0.7, 0.6)).conditional(3)
