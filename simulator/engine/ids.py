"""Vidur numbers entities with process-global class counters; reset them before every run.

Without this a second simulation in one process starts at ReplicaId(1) and fails, and request
ids (which key the acceptance draws) would depend on what ran before.
"""

from vidur.entities.base_entity import BaseEntity


def reset_entity_ids() -> None:
    stack = [BaseEntity]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "_id" in cls.__dict__:
            cls._id = -1
