"""EAGLE draft trees, as SGLang runs them (``--speculative-algorithm EAGLE`` / ``EAGLE3`` with
``--speculative-eagle-topk`` > 1): top-k candidates per step, a tree of drafted tokens verified in
one target pass under a tree mask.

Settings (SGLang's names): ``--speculative-num-steps`` is the tree's depth (the run's k),
``--speculative-eagle-topk`` the branching per step, ``--speculative-num-draft-tokens`` the tokens
the target verifies per request, the verified root included: N = num_draft_tokens - 1 drafted
tokens, N + 1 computed tokens per row (SGLang keeps the top N of a pool of topk + (steps - 1) x
topk^2 candidates and prepends the root; with topk 1 it sets num_draft_tokens = steps + 1;
docs/sources/proposers.md §4.1).

Acceptance: the accept length the engine reports (bonus included), at most depth + 1; converted,
as every length is, to the i.i.d. rate that gives it over the depth's positions.  A step advances
by the accepted path plus one; a path is no deeper than the tree, the request's end or the nodes
the token budget left.

Cost per step (SGLang's EAGLE worker): the draft-extend pass over the tokens each request
accepted (a prompt chunk's tokens for a prefill), then depth - 1 draft forwards with topk query
tokens per sampling request, each scoring topk logits rows per request; each with the fc layer
(EAGLE-1: every pass; EAGLE-3: the first) and the fixed per-pass cost.  The target's verify of
N + 1 tokens per row is its own (the verify model, KV read once per row: a tree mask reads each
row's cache once, as a chain's does).  Memory and lookahead as the EAGLE head's.  SGLang has no
k schedule, so a tree runs at one depth.
"""

from __future__ import annotations

from simulator.util.errors import ConfigError
from simulator.speculative.proposers.base import DraftPass, Option, PassRow, SpeculationSettings, StepWork
from simulator.speculative.proposers.eagle import EAGLE, EAGLE3, EagleKind
from simulator.speculative.step import StepPlan, TreeShape

SGLANG_DOCS = "https://docs.sglang.ai/advanced_features/speculative_decoding.html (Auto: 4 and 8 for Llama)"
OPTIONS = (
    Option("eagle_topk", int, 4, "candidates per draft step, SGLang's --speculative-eagle-topk", minimum=1, source=SGLANG_DOCS),
    Option("num_draft_tokens", int, 8, "tokens the target verifies per request, root included, SGLang's --speculative-num-draft-tokens", minimum=2, source=SGLANG_DOCS),
)


class EagleTreeKind(EagleKind):
    engine = "sglang"
    async_scheduling = False  # SGLang's worker: vLLM's engine profiles do not describe it
    acceptance_inputs = ("length",)
    options = OPTIONS

    def __init__(self, chain: EagleKind, algorithm: str, rank: int):
        super().__init__(chain.name + "_tree", chain.label + ", draft tree (SGLang)", chain.fc_every_pass, chain.own_lm_head, chain.draft_architectures, rank)
        self.vllm_method = ""  # not a vLLM method: SGLang's algorithm
        self.drafter = chain.drafter
        self.chain = chain
        self.algorithm = algorithm
        self.vllm_version = "SGLang's EAGLE worker (tree drafting since its EAGLE support, SGLang PR #2150, 2024-11)"

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def tree(self, settings: SpeculationSettings) -> TreeShape:
        return TreeShape(nodes=settings.options["num_draft_tokens"] - 1, depth=settings.k)

    def max_acceptance_length(self, settings: SpeculationSettings) -> int:
        tree = self.tree(settings)
        return min(tree.depth, tree.nodes) + 1

    def check(self, settings: SpeculationSettings, target, draft_tp: int, tp: int) -> None:
        self._check_drafter(settings.draft, target)
        topk, tokens, depth = settings.options["eagle_topk"], settings.options["num_draft_tokens"], settings.k
        pool = topk + (depth - 1) * topk * topk
        if tokens - 1 > pool:
            raise ConfigError(
                f"num_draft_tokens = {tokens}: a tree of depth {depth} (num_speculative_tokens) with eagle_topk = {topk} drafts at most "
                f"{pool} candidates, so it verifies at most {pool + 1} tokens (root included); lower num_draft_tokens or raise the depth or top-k"
            )
        if topk == 1 and tokens != depth + 1:
            raise ConfigError(f"num_draft_tokens = {tokens}: with eagle_topk = 1 the tree is a chain of depth {depth}, so SGLang verifies {depth + 1} tokens; give {depth + 1}")

    def step_cost(self, settings: SpeculationSettings):
        return _TreePasses(settings.draft.fc_inputs, self.fc_every_pass, settings.options["eagle_topk"], settings.k)

    def speculative_config(self, settings, draft_model, draft_tp) -> dict:
        raise ConfigError(f"proposer '{self.name}': SGLang's tree drafting has no vLLM --speculative-config; see its launch command")

    def launch_flags(self, settings: SpeculationSettings, draft_model: str) -> list[str]:
        """SGLang's speculative flags for the tree."""
        return [
            f"--speculative-algorithm {self.algorithm}", f"--speculative-draft-model-path {draft_model}",
            f"--speculative-num-steps {settings.k}", f"--speculative-eagle-topk {settings.options['eagle_topk']}",
            f"--speculative-num-draft-tokens {settings.options['num_draft_tokens']}",
        ]

    def from_launch_flags(self, flags: dict) -> SpeculationSettings:
        """The inverse of :meth:`launch_flags` (flag -> value, SGLang's names)."""
        return SpeculationSettings(k=int(flags["--speculative-num-steps"]), options=self.resolve_options({
            "eagle_topk": int(flags["--speculative-eagle-topk"]), "num_draft_tokens": int(flags["--speculative-num-draft-tokens"])}))

    def serve_command(self, target: str, flags, config) -> str:
        return " ".join([f"python3 -m sglang.launch_server --model {target}", *flags])


class _TreePasses:
    def __init__(self, fc_inputs: int, fc_every_pass: bool, topk: int, depth: int):
        self.fc_inputs, self.fc_every_pass, self.topk, self.depth = fc_inputs, fc_every_pass, topk, depth

    def work(self, step: StepPlan) -> StepWork:
        if step.max_proposals == 0:
            return StepWork()
        extend, sampled = [], []
        for i, (r, q, kv, d, progress) in enumerate(zip(step.requests, step.computed, step.kv_tokens, step.decode, step.progress)):
            if d:  # the accepted path's tokens, over the context they extend
                extend.append(PassRow(r, progress, step.context_after(i), True))
            else:
                extend.append(PassRow(r, q, kv, False))
            if step.samples(i):
                sampled.append((r, step.context_after(i)))
        passes = [DraftPass(tuple(extend), len(sampled), self.fc_inputs, sum(row.q for row in extend))]
        for j in range(1, self.depth):
            rows = tuple(PassRow(r, self.topk, context + j * self.topk, True) for r, context in sampled)
            passes.append(DraftPass(rows, self.topk * len(rows), self.fc_inputs if self.fc_every_pass else 0, self.topk * len(rows)))
        return StepWork(passes=tuple(passes))


KINDS = (EagleTreeKind(EAGLE, "EAGLE", rank=70), EagleTreeKind(EAGLE3, "EAGLE3", rank=80))
