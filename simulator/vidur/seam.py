"""The one seam to Vidur's private internals (PyPI ``vidur`` 0.0.26), inside the adapter package.

Vidur's extension points are its registries and config dataclasses; the rest of what this project
changes (how a Sarathi step sizes a decode row, how the predictor loads its tables, what a batch
hands its requests at the end of a step) lives in underscore-prefixed methods and attributes.
Every such access, the tests' included, is in this module and nowhere else:

* the base classes below route Vidur's private methods to public methods with names that say
  what they are for (``next_num_q_tokens``, ``load_predictions``, ...), whose default is Vidur's
  own behaviour; the project's subclasses override those public methods (the predictor's base
  forwards each call; Sarathi's binds the private names to the public methods on each subclass,
  since they run once per request per step);
* the functions and properties below read or write Vidur's private state under public names.

:data:`simulator.vidur.seam_hooks.HOOKS` lists every private member used, what it is used for
and the signature relied on; ``tests/test_vidur_seam.py`` checks each against the installed Vidur,
so an upgrade that renames or reshapes one fails with the hook's name rather than deep inside a
simulation, and checks that the underscore names of Vidur's that this module spells are exactly
the members listed.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import List

from vidur.entities import Batch, Request
from vidur.entities.base_entity import BaseEntity
from vidur.events import RequestArrivalEvent
from vidur.execution_time_predictor.base_execution_time_predictor import BaseExecutionTimePredictor
from vidur.execution_time_predictor.random_forrest_execution_time_predictor import RandomForrestExecutionTimePredictor
from vidur.execution_time_predictor.sklearn_execution_time_predictor import ModelType, SklearnExecutionTimePredictor
from vidur.scheduler.replica_scheduler.sarathi_replica_scheduler import SarathiReplicaScheduler
from vidur.simulator import Simulator


# --- Sarathi --------------------------------------------------------------------------------------
class SarathiSeam(SarathiReplicaScheduler):
    """Vidur's Sarathi with its private extension points under public names."""

    # Vidur calls its private names; each is bound to the public method of the same job, on this
    # class and on every subclass (so a subclass's override is what Vidur calls, with no extra
    # call frame on Sarathi's per-request hot path)
    _FORWARDS = {
        "_get_request_next_num_q_tokens": "next_num_q_tokens",
        "_can_allocate_request": "can_allocate",
        "_allocate_request": "allocate_for",
        "_get_next_batch": "next_batch",
    }

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for private, public in SarathiSeam._FORWARDS.items():
            setattr(cls, private, getattr(cls, public))

    @classmethod
    def vidur_name(cls, public: str) -> str:
        """The private name Vidur calls for the public method ``public``: what a test that wraps
        the method on a class already defined replaces (the binding is made at class creation)."""
        return next(private for private, name in SarathiSeam._FORWARDS.items() if name == public)

    # defaults: Vidur's own behaviour (its functions, under the public names)
    next_num_q_tokens = SarathiReplicaScheduler._get_request_next_num_q_tokens  # (request, num_batch_tokens): a prefill chunk or 1
    can_allocate = SarathiReplicaScheduler._can_allocate_request  # (request)
    allocate_for = SarathiReplicaScheduler._allocate_request  # (request)
    next_batch = SarathiReplicaScheduler._get_next_batch  # (time)

    # Vidur's private state, read-only
    @property
    def scheduler_config(self):
        return self._config

    @property
    def cache_config(self):
        return self._cache_config

    @property
    def allocated_blocks(self) -> int:
        return self._num_allocated_blocks

    def blocks_held(self, request_id: int) -> int:
        return self._allocation_map[request_id]

    @property
    def requests_holding_kv(self) -> int:
        return len(self._allocation_map)

    @property
    def stages_running(self) -> int:
        return self._num_running_stages

    @property
    def execution_time_predictor(self):
        return self._execution_time_predictor


# --- the sklearn predictor ------------------------------------------------------------------------
class ForestPredictorSeam(RandomForrestExecutionTimePredictor):
    """Vidur's random-forest predictor with its private extension points under public names.

    Vidur's constructor already calls ``_load_predictions_from_hf``; that and the other hooks
    forward to the public methods, which subclasses override.
    """

    def _get_input_files(self):
        return self.input_files()

    def _load_predictions_from_hf(self):
        return self.load_predictions()

    def _get_estimator(self):
        return self.estimator()

    def _get_hash(self, model_type: ModelType) -> str:
        return self.cache_key(model_type)

    def _get_batch_prefill_attention_params(self, batch):
        return self.prefill_attention_rows(batch)

    def _get_attention_decode_execution_time(self, batch) -> float:
        return self.decode_attention_time(batch)

    # defaults: Vidur's own behaviour
    def input_files(self):
        return super()._get_input_files()

    def load_predictions(self) -> dict:
        return super()._load_predictions_from_hf()

    def estimator(self):
        return super()._get_estimator()

    def cache_key(self, model_type: ModelType) -> str:
        return super()._get_hash(model_type)

    def prefill_attention_rows(self, batch) -> list:
        return super()._get_batch_prefill_attention_params(batch)

    def decode_attention_time(self, batch) -> float:
        return super()._get_attention_decode_execution_time(batch)

    # Vidur's machinery, called by name
    def decode_attention_rows(self, batch) -> tuple[int, int]:
        """Vidur's (decode batch size, mean KV rounded up to the granularity)."""
        return self._get_batch_decode_attention_params(batch)

    def cached_table(self, name: str, key: str) -> dict:
        return self._load_model_prediction_cache(name, key)

    def fit_and_predict(self) -> dict:
        """Vidur's path: fit every forest on the profile, predict every table."""
        return self._predict_from_models(self._train_models())

    # Vidur's private state, read-only
    @property
    def predictor_config(self):
        return self._config

    @property
    def replica_config(self):
        return self._replica_config

    @property
    def model_config(self):
        return self._model_config

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def table_tokens(self) -> int:
        return self._max_tokens

    @property
    def predictions(self) -> dict:
        return self._predictions

    @property
    def decode_batching_overhead(self) -> float:
        """Vidur's GQA decode-batching overhead fraction (0 for models without GQA)."""
        return self._attention_decode_batching_overhead_fraction


# --- a whole-step predictor -------------------------------------------------------------------------
# the base predictor's per-op pieces, which a whole-step predictor replaces (and refuses below)
PER_OP_HOOKS = (
    "_get_attention_layer_pre_proj_execution_time", "_get_attention_layer_post_proj_execution_time",
    "_get_attention_rope_execution_time", "_get_attention_kv_cache_save_execution_time",
    "_get_attention_decode_execution_time", "_get_attention_prefill_execution_time",
    "_get_mlp_layer_up_proj_execution_time", "_get_mlp_layer_down_proj_execution_time", "_get_mlp_layer_act_execution_time",
    "_get_tensor_parallel_communication_time", "_get_pipeline_parallel_communication_time",
    "_get_mlp_norm_layer_act_execution_time", "_get_attn_norm_layer_act_execution_time", "_get_add_layer_act_execution_time",
    "_get_kv_parallel_communication_time",
)


def _whole_step_only(name: str):
    def refuse(self, batch):
        raise NotImplementedError(
            f"{type(self).__name__} costs whole steps (get_execution_time); Vidur's per-op piece {name} is not a part of it"
        )

    return refuse


class WholeStepPredictorSeam(BaseExecutionTimePredictor):
    """Vidur's predictor base for a model that costs a step as a whole: its ``get_execution_time``
    is replaced, so the per-op pieces Vidur's own version sums are never asked for (each refuses,
    naming itself, should a Vidur upgrade start calling one)."""

    def __init__(self, predictor_config, replica_config, cache_config):
        super().__init__(predictor_config=predictor_config, replica_config=replica_config, cache_config=cache_config)

    @property
    def predictor_config(self):
        return self._config

    @property
    def replica_config(self):
        return self._replica_config


for _member in PER_OP_HOOKS:
    setattr(WholeStepPredictorSeam, _member, _whole_step_only(_member))
abc.update_abstractmethods(WholeStepPredictorSeam)


# --- batches ------------------------------------------------------------------------------------
class q_tokens_as:
    """Within the block, a Batch's or BatchStage's per-request tokens read as ``tokens``: Vidur's
    end-of-step handlers hand requests their ``num_q_tokens`` as progress.  (A class rather than
    a generator context manager: it runs twice per step, and costs a third as much.)"""

    __slots__ = ("_entity", "_tokens", "_computed")

    def __init__(self, entity, tokens: List[int]):
        self._entity, self._tokens = entity, tokens

    def __enter__(self) -> None:
        self._computed = self._entity._num_q_tokens
        self._entity._num_q_tokens = self._tokens

    def __exit__(self, *exc) -> None:
        self._entity._num_q_tokens = self._computed


def adopt(batch: Batch, cls: type) -> Batch:
    """Make the Batch Sarathi just built an instance of a Batch subclass, in place: same id and
    fields, no second construction (which would draw another id from Vidur's counter)."""
    batch.__class__ = cls
    return batch


def retoken(batch: Batch, num_q_tokens: List[int], num_kv_tokens: List[int]) -> None:
    """Give a formed batch new per-row token counts (adaptive verification trims verify rows after
    Sarathi formed the batch) and the totals Vidur computed from them on construction."""
    batch._num_q_tokens, batch._num_kv_tokens = num_q_tokens, num_kv_tokens
    batch._total_num_q_tokens = total = sum(num_q_tokens)
    batch._total_num_kv_tokens = sum(num_kv_tokens)
    batch._total_num_q_tokens_rounded = (total + 7) // 8 * 8


def batch_stage_kwargs(batch: Batch, stage_id: int, execution_time) -> dict:
    """BatchStage's constructor arguments for a stage of ``batch``, by name, as Vidur's
    ``Batch.to_batch_stage`` passes them by position."""
    return dict(
        batch_id=batch._id,
        replica_id=batch._replica_id,
        pipeline_stage=stage_id,
        execution_time=execution_time,
        requests=batch._requests,
        num_q_tokens=batch._num_q_tokens,
        num_kv_tokens=batch._num_kv_tokens,
        num_active_kvp_groups=batch._num_active_kvp_groups,
        last_kvp_group_ids=batch._last_kvp_group_ids,
        kvp_group_id=batch._kvp_group_id,
    )


# --- requests -----------------------------------------------------------------------------------
def set_arrival(request: Request, time: float) -> None:
    request._arrived_at = time


def set_split(request: Request, prefill_tokens: int, decode_tokens: int) -> None:
    request._num_prefill_tokens = prefill_tokens
    request._num_decode_tokens = decode_tokens


def reset_stage_progress(request: Request) -> None:
    """Vidur 0.0.26's restart leaves the pipeline-stage counters of the old attempt in place."""
    request._num_stage_processed_tokens = 0
    request._is_prefill_stage_complete = False


def mark_prefill_complete(request: Request) -> None:
    """A request whose prompt is done, for a mid-run batch built by hand (tests)."""
    request._is_prefill_complete = True


def reset_entity_ids(root: type = BaseEntity) -> None:
    """Vidur numbers entities with process-global class counters; reset them (``root``'s and its
    subclasses') before every run: a second simulation in one process would start at
    ReplicaId(1) and fail, and request ids, which key the acceptance draws, would depend on what
    ran before."""
    stack = [root]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "_id" in cls.__dict__:
            cls._id = -1


# --- the simulator ------------------------------------------------------------------------------
class SimulatorSeam(Simulator):
    """Vidur's Simulator with its event-queue hooks under public names: as on :class:`SarathiSeam`,
    each private name is bound to the public method on every subclass (``_add_events`` runs once
    per event)."""

    _FORWARDS = {"_init_event_queue": "init_event_queue", "_add_events": "add_events"}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for private, public in SimulatorSeam._FORWARDS.items():
            setattr(cls, private, getattr(cls, public))

    # defaults: Vidur's own behaviour
    init_event_queue = Simulator._init_event_queue
    add_events = Simulator._add_events  # (events)

    def add_event(self, event) -> None:
        self._add_event(event)

    @property
    def now(self) -> float:
        return self._time

    @property
    def request_generator(self):
        return self._request_generator


def replica_scheduler(sim: Simulator):
    """The one replica's scheduler of a single-replica simulation."""
    return next(iter(sim.scheduler._replica_schedulers.values()))


def scheduler_predictor(scheduler: SarathiReplicaScheduler) -> BaseExecutionTimePredictor:
    """The execution-time predictor of a Sarathi replica scheduler, Vidur's own class included
    (the project's scheduler exposes it as a property; a stock one only privately)."""
    return scheduler._execution_time_predictor


def generated_requests(sim: Simulator) -> list:
    return sim._request_generator.requests


def queued_events(sim: Simulator) -> list:
    """The events queued in a simulator, in heap order (not time order)."""
    return [event for _, event in sim._event_queue]


def queued_requests(sim: Simulator) -> list:
    """The requests of the arrival events queued in a simulator not yet run."""
    return [event._request for event in queued_events(sim) if isinstance(event, RequestArrivalEvent)]


def vidur_source_dir() -> Path:
    """The installed Vidur's source folder (the seam's contract test reads Vidur's private names there)."""
    import vidur

    return Path(vidur.__file__).parent


# --- the sklearn predictor's profile readers ----------------------------------------------------------
def training_frames(mlp_csv: str, attention_csv: str, model_config, block_size: int, tensor_parallel_size: int = 1):
    """(MLP rows, attention rows): the frames Vidur's sklearn predictor trains on, read and filtered
    by its own loader methods, on a stand-in that holds just the state those methods read (a real
    predictor would fit forests on construction)."""
    from types import SimpleNamespace

    reader = SklearnExecutionTimePredictor
    stand_in = SimpleNamespace(_model_config=model_config, _replica_config=SimpleNamespace(tensor_parallel_size=tensor_parallel_size), _block_size=block_size)
    stand_in._read_input_file = lambda path: reader._read_input_file(stand_in, path)
    mlp = reader._load_compute_df(stand_in, str(mlp_csv))
    attention = reader._get_attention_df_with_derived_features(stand_in, reader._load_attention_df(stand_in, str(attention_csv)))
    return mlp, attention
