"""``bench``'s work directory: its name, the files one run keeps there, and setting the last
run aside so that every run measures anew unless ``--resume`` continues it.

    workload.jsonl   replay/   simulated/   report/   (one run, :data:`RUN_FILES`)
    previous/        the run before it, set aside when a new one starts
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError

WORK_PREFIX = "vidur-bench-"
WORKLOAD_FILE = "workload.jsonl"
RUN_FILES = (WORKLOAD_FILE, "replay", "simulated", "report")  # one run's files in the work directory
PREVIOUS = "previous"  # where a new run sets the last one's files aside


def set_aside_previous_run(work: Path) -> Optional[Path]:
    """Move the last run's files in ``work`` (:data:`RUN_FILES`) into ``work/previous/``,
    replacing the run set aside before it, so a new run starts from nothing and the last one's
    measurements are not lost to a rerun without ``--resume``.  Returns where they went (None
    when there was nothing to set aside)."""
    import os
    import shutil

    present = [name for name in RUN_FILES if (work / name).exists()]
    if not present:
        return None
    previous = work / PREVIOUS
    if previous.exists():
        shutil.rmtree(previous)
    previous.mkdir(parents=True)
    for name in present:
        os.replace(work / name, previous / name)
    return previous


def starter(work: Path, workload, fresh: bool):
    """What runs once the replay's checks have passed, before its first write: a fresh run sets
    the last one aside; either writes the workload (a resumed run only when it is missing)."""
    from simulator.validation.workload import write_workload

    def start() -> None:
        if fresh:
            previous = set_aside_previous_run(work)
            if previous is not None:
                print(f"bench: measuring anew; the last run's files in {work} are set aside in {previous} (pass --resume to continue a run instead)")
        if not (work / WORKLOAD_FILE).is_file():
            write_workload(work / WORKLOAD_FILE, workload)

    return start


def check_work_dir(work: Path, workload, resume: bool) -> None:
    """The work directory can hold a run's files, and a run resumed there is of this workload."""
    from simulator.validation.files import check_output_dir
    from simulator.validation.workload import read_workload

    check_output_dir(work, "--work-dir", files=(WORKLOAD_FILE,), dirs=RUN_FILES[1:] + (PREVIOUS,))
    workload_path = work / WORKLOAD_FILE
    if resume and workload_path.is_file() and read_workload(workload_path).workload_hash != workload.workload_hash:
        raise ConfigError(f"--resume: --work-dir {work} holds another workload ({workload_path}); drop --resume to measure these flags anew, or pass a new --work-dir")


def default_work_dir(workload_hash: str, root: str, api_model: str) -> str:
    """The work directory's name: the workload, the server and the model served, hashed, so
    the same command resumes its own replay and another server or model never reuses it."""
    from simulator.validation.files import sha256_hex

    return WORK_PREFIX + sha256_hex(f"{workload_hash}\n{root}\n{api_model}")[:12]
