"""The acceptance a server measured, from its spec-decode counter deltas (pure math).

vLLM V1 counts, per verify step with drafts, how many draft positions were accepted:
acceptance rate = accepted / draft tokens, mean acceptance length = 1 + accepted / drafts,
and the per-position counters give the *unconditional* rate u_i = P(positions 0..i all
accepted).  The simulator wants the *conditional* p_i = P(i accepted | 0..i-1 accepted) =
u_i / u_{i-1} (converted by :class:`~simulator.speculative.acceptance_convert.AcceptanceInput`).
V0 counts a token accepted even after an earlier rejection in the same draft, so V0 is
calibrated from emitted tokens instead, as an i.i.d. rate (:func:`iid_alpha`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from simulator.speculative.acceptance_convert import AcceptanceInput, iid_rate_from_length
from simulator.util.errors import ConfigError
from simulator.validation.metrics import COUNTERS, PER_POSITION, Snapshot, spec_counter_problem

V1_NEEDS = ("drafts", "draft_tokens", "accepted_tokens")
V0_NEEDS = ("emitted_tokens", "draft_tokens", "accepted_tokens")


@dataclass(frozen=True)
class MeasuredAcceptance:
    """What a server's spec-decode counters measured between two scrapes (a record of the
    measurement; the figure a run takes is its conditional ``acceptance_per_position``, converted
    by :class:`~simulator.speculative.acceptance_convert.AcceptanceInput`)."""

    engine: Optional[str]  # "v1", "v0", or None when speculation is off
    num_speculative_tokens: int
    acceptance_rate: Optional[float]
    mean_acceptance_length: Optional[float]
    acceptance_per_position: tuple  # conditional, what the simulator takes
    acceptance_per_position_unconditional: tuple
    method: str
    # drafts, draft tokens and accepted tokens as the calibrated k counts them (the summary
    # rates are these ratios): the counters' own, unless --force gave another k than theirs
    counts_at_k: Optional[dict] = None


def iid_alpha(mean_accepted_per_step: float, k: int) -> float:
    """The i.i.d. per-token rate a with a + a^2 + ... + a^k = accepted tokens per verify step: the
    one conversion from a length (:func:`~simulator.speculative.acceptance_convert.iid_rate_from_length`,
    length = 1 + accepted), held to [0, 1] at the ends a server's counters can reach."""
    if k <= 0 or mean_accepted_per_step <= 0:
        return 0.0
    if mean_accepted_per_step >= k:
        return 1.0
    return iid_rate_from_length(1 + mean_accepted_per_step, k)


def _missing(counts: Snapshot, names: Sequence[str]) -> list[str]:
    return [COUNTERS[name] for name in names if getattr(counts, name) is None]


def acceptance_from_counters(counts: Snapshot, expected_k: Optional[int], source: str, force: bool = False, warnings: Optional[list] = None) -> MeasuredAcceptance:
    """The acceptance a server measured, from counter deltas.

    ``expected_k``: None infers it (and treats absent counters as "speculation off"); 0 says
    speculation is off; k > 0 requires the counters and checks that they agree with k.
    """
    if expected_k == 0 or (expected_k is None and counts.engine is None and not counts.accepted_per_pos):
        return MeasuredAcceptance(None, 0, None, None, (), (), "speculative decoding off: no spec-decode counters" if expected_k is None else "speculative decoding off (k = 0 given)")
    if counts.drafts is not None or counts.accepted_per_pos:
        return _v1(counts, expected_k, source, force, warnings if warnings is not None else [])
    if counts.emitted_tokens is not None:
        return _v0(counts, expected_k, source)
    raise ConfigError(
        f"speculative decoding was expected (k = {expected_k}) but {spec_counter_problem(counts, source)}; is the server running with --speculative-config?"
    )


def _v1(counts: Snapshot, expected_k: Optional[int], source: str, force: bool = False, warnings: Optional[list] = None) -> MeasuredAcceptance:
    missing = _missing(counts, V1_NEEDS) + ([] if counts.accepted_per_pos else [PER_POSITION])
    if missing:
        raise ConfigError(f"{source}: V1 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if counts.drafts <= 0 or counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    counted = max(counts.accepted_per_pos) + 1
    k = counted
    if expected_k is not None and expected_k != counted:
        problem = f"{source}: the server counts acceptance for {counted} draft positions but k = {expected_k} was given"
        if not force:
            raise ConfigError(f"{problem}; pass the server's k (or leave --num-speculative-tokens out to read it from the counters), or --force to calibrate with k = {expected_k}")
        # the given k wins: positions the server did not count are taken as never accepted
        warnings.append(f"{problem} (calibrated with k = {expected_k} anyway: --force; " + ("positions beyond the counters' count as never accepted)" if expected_k > counted else f"positions {expected_k}..{counted - 1} of the counters are left out)") + "; the acceptance rate and length are the given k's")
        k = expected_k
    unconditional = tuple(counts.accepted_per_pos.get(i, 0.0) / counts.drafts for i in range(k))
    at_k = _v1_counts_at_k(counts, counted, k)
    return MeasuredAcceptance(
        engine="v1",
        num_speculative_tokens=k,
        acceptance_rate=at_k["accepted_tokens"] / at_k["draft_tokens"],
        mean_acceptance_length=1 + at_k["accepted_tokens"] / at_k["drafts"],
        acceptance_per_position=AcceptanceInput.given(unconditional=unconditional, names={"unconditional": f"{PER_POSITION} / drafts"}).per_position,
        acceptance_per_position_unconditional=unconditional,
        method="V1 counters: per-position accepted / drafts, made conditional",
        counts_at_k=at_k,
    )


def _v1_counts_at_k(counts: Snapshot, counted: int, k: int) -> dict:
    """Drafts, draft tokens and accepted tokens as a server drafting ``k`` tokens would have
    counted them, the server's counters being for ``counted`` positions: its own counts when
    the two agree; under --force, draft tokens scaled to k per draft and accepted tokens those
    of the first k positions, so the summary rates describe the run that is simulated (the
    server's would put a -23% acceptance "error" in the report that is not the simulator's)."""
    if k == counted:
        return {"drafts": counts.drafts, "draft_tokens": counts.draft_tokens, "accepted_tokens": counts.accepted_tokens}
    return {
        "drafts": counts.drafts,
        "draft_tokens": counts.draft_tokens * k / counted,
        "accepted_tokens": sum(counts.accepted_per_pos.get(i, 0.0) for i in range(k)),
    }


def _v0(counts: Snapshot, expected_k: Optional[int], source: str) -> MeasuredAcceptance:
    missing = _missing(counts, V0_NEEDS)
    if missing:
        raise ConfigError(f"{source}: V0 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if not expected_k:
        raise ConfigError(f"{source}: V0 counters do not say how many tokens each draft proposes; pass --num-speculative-tokens (the k of the server's --speculative-config)")
    if counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    k = expected_k
    steps = counts.draft_tokens / k
    mean_accepted = max(0.0, counts.emitted_tokens / steps - 1)
    alpha = iid_alpha(mean_accepted, k)
    return MeasuredAcceptance(
        engine="v0",
        num_speculative_tokens=k,
        acceptance_rate=mean_accepted / k,
        mean_acceptance_length=1 + mean_accepted,
        acceptance_per_position=AcceptanceInput.given(rate=alpha).conditional(k),
        acceptance_per_position_unconditional=tuple(alpha ** (i + 1) for i in range(k)),
        method="V0 emitted tokens: i.i.d. rate matching emitted tokens per verify step",
        counts_at_k={"drafts": steps, "draft_tokens": counts.draft_tokens, "accepted_tokens": mean_accepted * steps},
    )
