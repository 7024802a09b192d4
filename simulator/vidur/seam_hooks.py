"""The inventory of Vidur's private members that the seam (:mod:`simulator.vidur.seam`) relies on.

Each :class:`Hook` names one member, the Vidur class that defines it, how the seam uses it and the
parameter names it relies on.  ``tests/test_vidur_seam.py`` checks each against the installed Vidur
(an upgrade that renames or reshapes one fails with the hook's name, not deep inside a simulation)
and checks that the underscore names of Vidur's that ``seam.py`` spells are exactly the members
listed here: the list is kept apart from the code it describes so that the check compares two
things, not the seam with itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur.entities import Batch, BatchStage, Request
from vidur.entities.base_entity import BaseEntity
from vidur.events import RequestArrivalEvent
from vidur.execution_time_predictor.base_execution_time_predictor import BaseExecutionTimePredictor
from vidur.execution_time_predictor.random_forrest_execution_time_predictor import RandomForrestExecutionTimePredictor
from vidur.execution_time_predictor.sklearn_execution_time_predictor import SklearnExecutionTimePredictor
from vidur.scheduler.global_scheduler.base_global_scheduler import BaseGlobalScheduler
from vidur.scheduler.replica_scheduler.sarathi_replica_scheduler import SarathiReplicaScheduler
from vidur.simulator import Simulator

from simulator.vidur.seam import PER_OP_HOOKS


@dataclass(frozen=True)
class Hook:
    """One private member of Vidur's that the project relies on."""

    name: str  # the project's name for it
    owner: type  # the Vidur class that defines it
    member: str  # the private member
    kind: str  # "override" (we replace it), "call" (we call it), "read" or "write" (instance state)
    params: tuple = ()  # for methods: the parameter names after ``self`` we rely on


HOOKS: tuple[Hook, ...] = (
    # Sarathi scheduler
    Hook("decode row size", SarathiReplicaScheduler, "_get_request_next_num_q_tokens", "override", ("request", "num_batch_tokens")),
    Hook("can allocate", SarathiReplicaScheduler, "_can_allocate_request", "override", ("request",)),
    Hook("allocate", SarathiReplicaScheduler, "_allocate_request", "override", ("request",)),
    Hook("next batch", SarathiReplicaScheduler, "_get_next_batch", "override", ("time",)),
    Hook("scheduler config", SarathiReplicaScheduler, "_config", "read"),
    Hook("cache config", SarathiReplicaScheduler, "_cache_config", "read"),
    Hook("allocation map", SarathiReplicaScheduler, "_allocation_map", "read"),
    Hook("allocated blocks", SarathiReplicaScheduler, "_num_allocated_blocks", "read"),
    Hook("running stages", SarathiReplicaScheduler, "_num_running_stages", "read"),
    Hook("execution time predictor", SarathiReplicaScheduler, "_execution_time_predictor", "read"),
    # sklearn / random-forest predictor
    Hook("profile files", RandomForrestExecutionTimePredictor, "_get_input_files", "override"),
    Hook("load predictions", RandomForrestExecutionTimePredictor, "_load_predictions_from_hf", "override"),
    Hook("forest estimator", RandomForrestExecutionTimePredictor, "_get_estimator", "override"),
    Hook("cache key", RandomForrestExecutionTimePredictor, "_get_hash", "override", ("model_type",)),
    Hook("prefill attention rows", RandomForrestExecutionTimePredictor, "_get_batch_prefill_attention_params", "override", ("batch",)),
    Hook("decode attention time", RandomForrestExecutionTimePredictor, "_get_attention_decode_execution_time", "override", ("batch",)),
    Hook("decode attention rows", RandomForrestExecutionTimePredictor, "_get_batch_decode_attention_params", "call", ("batch",)),
    Hook("cached table", RandomForrestExecutionTimePredictor, "_load_model_prediction_cache", "call", ("model_name", "model_hash")),
    Hook("fit forests", RandomForrestExecutionTimePredictor, "_train_models", "call"),
    Hook("predict tables", RandomForrestExecutionTimePredictor, "_predict_from_models", "call", ("models",)),
    Hook("predictor config", RandomForrestExecutionTimePredictor, "_config", "read"),
    Hook("replica config", RandomForrestExecutionTimePredictor, "_replica_config", "read"),
    Hook("model config", RandomForrestExecutionTimePredictor, "_model_config", "read"),
    Hook("block size", RandomForrestExecutionTimePredictor, "_block_size", "read"),
    Hook("table tokens", RandomForrestExecutionTimePredictor, "_max_tokens", "read"),
    Hook("prediction tables", RandomForrestExecutionTimePredictor, "_predictions", "read"),
    Hook("GQA decode overhead", RandomForrestExecutionTimePredictor, "_attention_decode_batching_overhead_fraction", "read"),
    # the sklearn predictor's profile readers (tests: what Vidur trains on, read by Vidur's own filters)
    Hook("read profile csv", SklearnExecutionTimePredictor, "_read_input_file", "call", ("file_path",)),
    Hook("load compute rows", SklearnExecutionTimePredictor, "_load_compute_df", "call", ("file_path",)),
    Hook("load attention rows", SklearnExecutionTimePredictor, "_load_attention_df", "call", ("file_path",)),
    Hook("attention features", SklearnExecutionTimePredictor, "_get_attention_df_with_derived_features", "call", ("df",)),
    # the base predictor: its per-op pieces, which a whole-step predictor replaces (simulator.vidur.seam)
    *(Hook("per-op time", BaseExecutionTimePredictor, member, "override", ("batch",)) for member in PER_OP_HOOKS),
    # batches and requests
    Hook("batch tokens", Batch, "_num_q_tokens", "write"),
    *(Hook("batch token totals", Batch, member, "write") for member in (
        "_num_kv_tokens", "_total_num_q_tokens", "_total_num_kv_tokens", "_total_num_q_tokens_rounded",
    )),
    Hook("batch stage tokens", BatchStage, "_num_q_tokens", "write"),
    Hook("batch stage fields", Batch, "_id", "read"),
    Hook("batch stage fields", Batch, "_replica_id", "read"),
    Hook("batch stage fields", Batch, "_requests", "read"),
    Hook("batch stage fields", Batch, "_num_kv_tokens", "read"),
    Hook("batch stage fields", Batch, "_num_active_kvp_groups", "read"),
    Hook("batch stage fields", Batch, "_last_kvp_group_ids", "read"),
    Hook("batch stage fields", Batch, "_kvp_group_id", "read"),
    Hook("batch stage constructor", BatchStage, "__init__", "call", (
        "batch_id", "replica_id", "pipeline_stage", "execution_time", "requests", "num_q_tokens", "num_kv_tokens",
        "num_active_kvp_groups", "last_kvp_group_ids", "kvp_group_id",
    )),
    Hook("request arrival", Request, "_arrived_at", "write"),
    Hook("request prefill split", Request, "_num_prefill_tokens", "write"),
    Hook("request decode split", Request, "_num_decode_tokens", "write"),
    Hook("request stage progress", Request, "_num_stage_processed_tokens", "write"),
    Hook("request stage prefill flag", Request, "_is_prefill_stage_complete", "write"),
    Hook("request prefill flag", Request, "_is_prefill_complete", "write"),
    Hook("entity id counter", BaseEntity, "_id", "write"),
    # the simulator's event loop
    Hook("event queue setup", Simulator, "_init_event_queue", "override"),
    Hook("add events", Simulator, "_add_events", "override", ("events",)),
    Hook("add event", Simulator, "_add_event", "call", ("event",)),
    Hook("simulated time", Simulator, "_time", "read"),
    Hook("request generator", Simulator, "_request_generator", "read"),
    Hook("event queue", Simulator, "_event_queue", "read"),
    Hook("arrival's request", RequestArrivalEvent, "_request", "read"),
    Hook("replica schedulers", BaseGlobalScheduler, "_replica_schedulers", "read"),
)
