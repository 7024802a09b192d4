"""One interface, two profile sources: the built-in generator or a Vidur-format directory.

Either way the result is a pair of Vidur-format CSV files plus provenance; the same
random-forest predictor trains on both.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from simulator.catalog import model_shape
from simulator.errors import ConfigError
from simulator.profiles import builtin
from simulator.profiles.hardware import get_device
from simulator.profiles.vidur_format import ProfileFiles, max_decode_batch, validate_profile_dir, write_profile


@dataclass(frozen=True)
class ResolvedProfile:
    files: ProfileFiles
    source: str  # "builtin" or "directory"
    profile_id: str  # constants version (built-in) or "sha256:<digest>" (directory)
    content_sha256: str
    max_decode_batch: int

    def provenance(self) -> dict:
        return {"profile_source": self.source, "profile_id": self.profile_id, "profile_sha256": self.content_sha256}


def _builtin_key(model: str, device: str, max_seq_len: int, block_size: int) -> str:
    dev = get_device(device)
    text = f"{model}|{dev.fingerprint()}|{max_seq_len}|{block_size}|v{builtin.GENERATOR_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def builtin_profile_dir(model: str, device: str, root: Path, max_seq_len: int = 4096, block_size: int = 16) -> Path:
    """Generate (once) the built-in profile under ``root``; a finished directory is never rewritten."""
    shape = model_shape(model)
    dev = get_device(device)
    target = Path(root) / f"builtin-{device}-{model.replace('/', '--')}-{_builtin_key(model, device, max_seq_len, block_size)}"
    if (target / "metadata.json").is_file():
        return target
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=".builtin-"))
    except OSError as exc:
        raise ConfigError(f"cache directory {root}: not writable ({exc.strerror})") from exc
    try:
        write_profile(
            staging,
            builtin.mlp_table(shape, dev, max_tokens=max_seq_len),
            builtin.attention_table(shape, dev, max_seq_len, block_size),
            {
                "source": "built-in roofline generator",
                "generator_version": builtin.GENERATOR_VERSION,
                "model": model,
                "device": device,
                "constants_version": dev.constants_version,
                "constants_fitted_from": dev.fitted_from,
                "max_seq_len": max_seq_len,
                "block_size": block_size,
            },
        )
        try:
            staging.rename(target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "metadata.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_profile(
    profile_dir, model: str, device: str, cache_dir: Path, max_seq_len: int = 4096, block_size: int = 16
) -> ResolvedProfile:
    """The profile a run trains on; validated and hashed once per process for unchanged files."""
    directory = Path(profile_dir) if profile_dir is not None else None
    stamp = None
    if directory is not None and directory.is_dir():
        stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.iterdir()) if p.is_file())
    return _resolve(directory, stamp, model, device, Path(cache_dir), max_seq_len, block_size)


@lru_cache(maxsize=32)
def _resolve(profile_dir, stamp, model: str, device: str, cache_dir: Path, max_seq_len: int, block_size: int) -> ResolvedProfile:
    shape = model_shape(model)
    if profile_dir is None:
        directory = builtin_profile_dir(model, device, Path(cache_dir) / "profiles", max_seq_len, block_size)
        files = validate_profile_dir(directory, shape, block_size)
        dev = get_device(device)
        profile_id = f"builtin-v{builtin.GENERATOR_VERSION}:{dev.constants_version}"
        return ResolvedProfile(files, "builtin", profile_id, files.sha256(), max_decode_batch(files, shape, block_size))
    files = validate_profile_dir(profile_dir, shape, block_size)
    digest = files.sha256()
    return ResolvedProfile(files, "directory", f"sha256:{digest[:16]}", digest, max_decode_batch(files, shape, block_size))
