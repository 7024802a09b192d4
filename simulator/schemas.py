"""The contracts of the files one part of the project writes and another reads.

Every recorded CSV's columns (and which of them are numbers), the values a reader branches on,
and the JSON documents' identifiers and fields live here, so the writers (the sweep runner, the
pays-off sweep, the published-results reproduction, the validation harness) and the reader (the
site) agree by importing one module: the site never imports a writer to learn a column name.
Part of the model hash (:mod:`simulator.util.versions`): a column or threshold here shapes a
recorded file.
"""

# ---- every simulated row (data/results/sweep.csv, data/results/progress.csv, data/results/published.csv) ----

# Where a number came from: the profile, Vidur, this package and its model hash.
PROVENANCE_COLUMNS = ("profile_source", "profile_id", "vidur_version", "simulator_version", "simulator_source_hash")

# A run is called overloaded (the ``overloaded`` column) when the median TTFT of its last tenth
# of requests (by arrival) is more than this multiple of its first tenth's: the queue grew
# through the run.  The site states the threshold beside the column.
OVERLOAD_TTFT_GROWTH = 2.0

# ---- data/results/sweep.csv: the site's sweep charts ----

SWEEP_INPUT_COLUMNS = (
    "model",
    "device",
    "num_requests",
    "prompt_tokens",
    "output_tokens",
    "arrival_rate",
    "workload_seed",
    "num_speculative_tokens",
    "acceptance_rate",
    "proposer",
    "attention",
    "seed",
)
LATENCY_COLUMNS = tuple(f"{m}_p{p}_s" for m in ("ttft", "tpot", "e2e") for p in (50, 90, 99))
SWEEP_METRIC_COLUMNS = LATENCY_COLUMNS + (
    "tpot_speedup",
    "realized_acceptance_rate",
    "mean_acceptance_length",
    "proposed_tokens",
    "accepted_tokens",
    "verify_steps",
    "makespan_s",
    "throughput_tok_s",
    "mean_decode_batch",
    "preemptions",
    "peak_kv_blocks",
    "kv_blocks_total",
    "ttft_first_tenth_p50_s",
    "ttft_last_tenth_p50_s",
    "ttft_growth",
    "overloaded",
)
SWEEP_COLUMNS = SWEEP_INPUT_COLUMNS + SWEEP_METRIC_COLUMNS + PROVENANCE_COLUMNS
# the columns the site reads as numbers (a non-numeric cell is refused, not plotted as a gap)
SWEEP_NUMERIC = (
    "num_requests", "prompt_tokens", "output_tokens", "arrival_rate", "workload_seed", "num_speculative_tokens", "seed",
    "ttft_p50_s", "tpot_p50_s", "e2e_p50_s", "tpot_speedup", "ttft_first_tenth_p50_s", "ttft_last_tenth_p50_s", "ttft_growth",
    "mean_acceptance_length", "realized_acceptance_rate", "mean_decode_batch",
)
# columns that hold one value for the whole sweep: the site's setup line states them once
SWEEP_SETUP_COLUMNS = (
    "model", "device", "num_requests", "prompt_tokens", "output_tokens", "workload_seed", "seed", *PROVENANCE_COLUMNS,
)

# ---- data/results/progress.csv: simulated vs closed-form progress per verify step ----

PROGRESS_COLUMNS = (
    "model",
    "device",
    "num_requests",
    "prompt_tokens",
    "output_tokens",
    "interarrival_s",
    "num_speculative_tokens",
    "acceptance_rate",
    "seed",
    "verify_steps",
    "realized_acceptance_rate",
    "simulated_progress_per_step",
    "closed_form_progress_per_step",
) + PROVENANCE_COLUMNS
PROGRESS_NUMERIC = ("num_speculative_tokens", "acceptance_rate", "simulated_progress_per_step", "closed_form_progress_per_step")

# ---- data/results/published.csv: published measurements beside their simulated values ----

PUBLISHED_COLUMNS = (
    "id", "source_url", "metric", "published", "simulated", "error_pct", "unit", "status", "reason",
    "role", "acceptance_class", "calibrated_by", "plausible", "error_range_pct", "source", "engine", "engine_version",
    "engine_profile", "engine_class", "engine_basis", "gpu", "tp", "model", "proposer", "draft", "k",
    "batch_size", "concurrency", "qps", "dataset", "input_len", "output_len", "acceptance_used", "acceptance_source",
    *PROVENANCE_COLUMNS, "seed", "engine_overhead_ms",
)
# the ``status`` column: a row was simulated, or says why it could not be
SIMULATED, NOT_REPRODUCIBLE = "simulated", "not reproducible"
# the ``acceptance_class`` column: how close the acceptance a row was simulated with is to its setting
ACCEPTANCE_CLASSES = ("same_source", "same_setting_other_run", "other_dataset", "assumed")
# the engines a published row may name (its ``engine``): those the rows come from
ROW_ENGINES = ("vllm", "sglang", "tensorrt-llm")
# the ``engine_class`` column (simulator/published/plan.py engine_identity): a vLLM row modelled by
# its own version's engine generation, which alone makes the headline; a vLLM V0 row (run on the
# oldest profile, informational); a vLLM row of unknown version and date, and another engine's row
# (both run on a proxy profile), reported apart
VLLM, VLLM_V0, VLLM_UNKNOWN, OTHER_ENGINE = "vllm", "vllm V0", "vllm version unknown", "other engine"
ENGINE_CLASSES = (VLLM, VLLM_V0, VLLM_UNKNOWN, OTHER_ENGINE)
# columns added with roles and acceptance classes, and with engine classes: a CSV recorded before
# them still renders, unlabelled
PUBLISHED_LATER_COLUMNS = ("role", "acceptance_class", "calibrated_by", "plausible", "error_range_pct", "engine_profile", "engine_class", "engine_basis")

# ---- simulator/published/speedup_checks.csv: each speculative check row's speedup error, by regime ----
# (package data: the pays-off answer's error bar, simulator/sweep/error_bar.py)
SPEEDUP_CHECK_COLUMNS = ("id", "source", "load", "proposer_class", "engine", "version_series", "tensor_parallel", "error_pct")

# ---- data/results/paysoff.csv and data/results/paysoff_crossovers.csv: the pays-off sweep ----

PAYSOFF_COLUMNS = (
    "mode",
    "concurrency",
    "arrival_rate",
    "deployment",
    "model",
    "device",
    "tensor_parallel_size",
    "proposer",
    "draft_model",
    "num_requests",
    "prompt_tokens",
    "output_tokens",
    "acceptance",
    "acceptance_rate",
    "num_speculative_tokens",
    "k_schedule",
    "drafter_idle",
    "adaptive_verification",
    "attention",
    "interpolation",
    "seed",
    "workload_seed",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p50_low_s",
    "tpot_p50_high_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "e2e_p50_s",
    "throughput_tok_s",
    "tpot_speedup",
    "tpot_speedup_low",
    "tpot_speedup_high",
    "speedup_ceiling",
    "throughput_speedup",
    "best_k",
    "mean_acceptance_length",
    "realized_acceptance_rate",
    "mean_decode_batch",
    "mean_scheduled_k",
    "preemptions",
    "overloaded",
    "profile_source",
    "profile_id",
    "vidur_version",
    "simulator_source_hash",
)
# the columns the pays-off page cannot render without
PAYSOFF_REQUIRED = ("mode", "acceptance", "tpot_speedup", "num_speculative_tokens", "k_schedule", "attention", "model", "device", "tensor_parallel_size", "mean_decode_batch")
CROSSOVER_COLUMNS = (
    "mode",
    "acceptance",
    "attention",
    "num_speculative_tokens",
    "crossover_x",
    "crossover",
    "crossings",
    "x_min",
    "x_max",
    "speedup_at_x_min",
    "speedup_at_x_max",
)
CROSSOVER_REQUIRED = ("crossover", "crossings")

# ---- data/results/recommended_schedules.json: one recommended k schedule per deployment ----

SCHEDULES_FIELDS = (
    "description", "batch_size_cap", "chunk_size", "workload", "verify_cost", "tie_rule", "tie_tolerance", "error_bar_rule", "vllm",
    "vidur_version", "simulator_source_hash", "schedules",
)
SCHEDULE_ENTRY_FIELDS = (
    "acceptance", "label", "deployment", "deployment_label", "model", "device", "tensor_parallel_size", "proposer", "draft_model",
    "draft_tensor_parallel_size", "acceptance_source", "acceptance_derivation", "acceptance_rate", "acceptance_per_position",
    "acceptance_length_at_k", "attention", "interpolation", "num_speculative_tokens_per_batch_size", "speculative_config",
    "speculative_config_json", "serve_command", "note", "simulated_up_to", "stops_paying_from", "stops_paying_band", "comparison",
    "fixed_k_fallback", "adaptive_verification", "recommended",
)

# ---- a validation run's report.json ----

VALIDATION_REPORT_SCHEMA = "vidur-specdec/validation-report"
