"""Side by side with a peer: NVIDIA AIConfigurator and this project on the published check rows (issue 31).

    python bench/peer_aiconfigurator.py --date 2026-12-03 --aic-python /tmp/aicvenv/bin/python

AIConfigurator (PyPI ``aiconfigurator``, Apache-2.0) predicts TTFT, TPOT and throughput of vLLM,
SGLang and TensorRT-LLM deployments from kernel tables collected on each GPU.  It is an optional
install, never a dependency of this project: put it in a virtual environment of its own
(``python3 -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator``) and name that
environment's Python with ``--aic-python``; this script runs itself there as a worker
(``--worker``, which imports AIConfigurator and nothing of this project), so the two tools never
share a process.

For every ``role = "check"`` row of data/published.toml: the project's value is the one recorded in
data/results/published.csv (nothing is simulated here), and the setting AIConfigurator is asked is
the project's own reading of the row (:func:`simulator.published.plan.plan`: lengths, load,
scheduler limits), mapped to AIConfigurator's terms:

* GPU: h100 -> h100_sxm, h200 -> h200_sxm, b200 -> b200_sxm, a100 -> a100_sxm (the systems it
  ships tables for); engine: vllm -> its vllm backend, sglang -> sglang, tensorrt-llm -> trtllm, at
  the perf-database version it ships for that GPU ("current");
* model: the row's model's config.json as the project reads it (its catalog file, or the shape of
  a model Vidur ships), so both tools price the same architecture;
* ``aiconfigurator cli estimate --estimate-mode agg`` (in-flight batching), SILICON database,
  ``--tp`` the row's, MoE experts tensor-parallel over the same GPUs (``--moe-tp tp --moe-ep 1``,
  vLLM's and SGLang's default), ``--ctx-tokens`` min(ISL, max_num_batched_tokens);
* load: a batch size or concurrency B -> ``--batch-size`` min(B, max_num_seqs); a request rate
  (qps) -> the concurrency at which AIConfigurator's own request rate (seq/s = B / request
  latency, Little's law) equals the row's qps, interpolated between the integer batch sizes around
  it (at most max_num_seqs: past it the engine is saturated and the row is priced there);
* metric: tpot_ms, tpot_mean_ms, itl_mean_ms -> its TPOT; decode_tokens_per_s -> 1000 / TPOT;
  output_tokens_per_s -> seq/s x OSL; requests_per_s -> seq/s; speculative rows only with MTP
  (``--nextn k --nextn-accepted`` the accepted drafts per step the row's acceptance implies).

A row it cannot express stays in the table with the reason; so does a row whose project value
is missing, or stale (published.csv recorded before the row's setting in published.toml changed).
Writes data/peer/aiconfigurator.csv (sorted by id) and data/peer/aiconfigurator.json (provenance;
the date is ``--date``, never the clock), each atomically, and prints the summary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path("data/peer/aiconfigurator.csv")

GPU_SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "a100": "a100_sxm"}
NO_SYSTEM = {
    "a100_40gb": "GPU a100_40gb: AIConfigurator's A100 system is a100_sxm, the 80 GB part (2.039 TB/s), whose kernel tables were "
                 "collected on it; the 40 GB part streams 1.555 TB/s and has no system of its own",
    "rtx4090": "GPU rtx4090: AIConfigurator has no RTX 4090 system (its non-datacenter-Hopper/Blackwell systems are l40s and rtx_pro_6000_server)",
}
BACKENDS = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
TPOT_METRICS = ("tpot_ms", "tpot_mean_ms", "itl_mean_ms")
METRICS = TPOT_METRICS + ("decode_tokens_per_s", "output_tokens_per_s", "requests_per_s", "speedup")
# the fields of a row that published.csv records beside its value: a difference from published.toml
# means the project's value was simulated for another setting
RECORDED_SETTING = ("metric", "engine", "engine_version", "gpu", "tp", "model", "proposer", "k", "batch_size", "concurrency", "qps",
                    "dataset", "input_len", "output_len")
DRAFTERS = {
    "eagle": "EAGLE head", "eagle3": "EAGLE-3 head", "eagle3_parallel": "parallel EAGLE-3 head", "draft": "draft model",
    "ngram": "n-gram matcher", "ngram_gpu": "n-gram matcher", "suffix": "suffix-tree matcher", "dflash": "DFlash drafter",
}


# ---- the project's side (the project's virtual environment) ------------------------------------

def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def stale_fields(m, recorded: dict) -> list[str]:
    """Where published.csv's record of a row differs from the row in published.toml."""
    diffs = []
    for key in RECORDED_SETTING:
        now, then = _cell(getattr(m, key)), recorded.get(key, "")
        if key == "k" and now in ("", "0") and then in ("", "0"):
            continue
        try:
            if now and then and float(now) == float(then):
                continue
        except ValueError:
            pass
        if now != then:
            diffs.append(f"{key} {then or '(none)'} (now {now or '(none)'})")
    published = float(recorded["published"])
    if abs(published - m.value) > 1e-5 * abs(m.value):
        diffs.append(f"published {recorded['published']} (now {m.value:g})")
    if recorded.get("role") != "check":
        diffs.append(f"role {recorded.get('role')} (now check)")
    return diffs


def model_config_json(name: str) -> tuple[dict, str]:
    """The model's config.json as the project reads it, and where it comes from."""
    from importlib import resources

    from simulator.models.catalog import CATALOG

    spec = CATALOG.get(name)
    if spec is not None and spec.source.startswith("catalog file "):
        file = spec.source.removeprefix("catalog file ")
        config = json.loads((resources.files("simulator.models") / "data" / file).read_text(encoding="utf-8"))
        return {k: v for k, v in config.items() if k != "_name_or_path"}, f"the project's catalog config.json ({file})"
    from simulator.vidur.models import model_config

    c = model_config(name)  # a model Vidur ships (Llama-2): its shape as a Hugging Face config
    if "Llama" not in type(c).__name__ or getattr(c, "use_gated_mlp", False) is not True:
        raise ValueError(f"model {name}: no config.json and not a Llama-shaped Vidur model")
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": c.num_layers, "hidden_size": c.embedding_dim,
        "num_attention_heads": c.num_q_heads, "num_key_value_heads": c.num_kv_heads, "head_dim": c.embedding_dim // c.num_q_heads,
        "intermediate_size": c.mlp_hidden_dim, "vocab_size": c.vocab_size, "max_position_embeddings": c.max_model_len or 4096,
        "rope_theta": c.rope_theta, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    }
    return config, f"the shape the project simulates (Vidur's {type(c).__name__}) written as a Llama config.json"


def accepted_drafts(conditional) -> float:
    """Mean accepted draft tokens per verify step of a chain with conditional acceptance rates p_i."""
    total, run = 0.0, 1.0
    for p in conditional:
        run *= p
        total += run
    return total


def ask_for(m, plan, recorded):
    """What AIConfigurator is asked for row ``m`` (a dict), or why it is not asked (a string)."""
    speculative = m.proposer != "none"
    if speculative and m.proposer != "mtp":
        drafter = DRAFTERS.get(m.proposer, m.proposer)
        return (f"speculative ({m.proposer}{', tree' if m.drafting == 'tree' else ''}): AIConfigurator prices speculation only as MTP "
                f"(--nextn, --nextn-accepted: the checkpoint's own MTP layers); it has no {drafter} to draft with")
    if m.metric == "speedup" and not speculative:
        return "speedup without speculation"
    if m.metric not in METRICS:
        return f"metric {m.metric}: AIConfigurator has no counterpart"
    if m.gpu in NO_SYSTEM:
        return NO_SYSTEM[m.gpu]
    if m.gpu not in GPU_SYSTEMS:
        return f"GPU {m.gpu}: no AIConfigurator system for it (mapped: {', '.join(sorted(GPU_SYSTEMS))})"
    if m.engine not in BACKENDS:
        return f"engine {m.engine}: not an AIConfigurator backend"
    if recorded is None:
        return "no project value: the row is not in published.csv (re-record it with the build)"
    if recorded.get("status") != "simulated":
        return f"no project value: published.csv says {recorded.get('status')!r} ({recorded.get('reason') or 'no reason'})"
    diffs = stale_fields(m, recorded)
    stale = ("project value stale: published.csv was recorded with " + "; ".join(diffs) + " (re-record it with the build and rerun)") if diffs else ""
    if plan.run is None:
        return f"the project does not simulate it: {plan.reason}"
    try:
        config, config_source = model_config_json(m.model)
    except Exception as exc:  # the worker checks the architecture; here only whether a config exists
        return f"model {m.model}: no config.json to give AIConfigurator ({exc})"
    run, workload = plan.run, plan.run.workload
    prompts, outputs = workload.prompt_tokens, workload.output_tokens
    prompts, outputs = (prompts if isinstance(prompts, tuple) else (prompts,)), (outputs if isinstance(outputs, tuple) else (outputs,))
    prompt, output = round(sum(prompts) / len(prompts)), round(sum(outputs) / len(outputs))
    ask = {
        "id": m.id, "metric": m.metric, "model": m.model, "config": config, "config_source": config_source,
        "system": GPU_SYSTEMS[m.gpu], "backend": BACKENDS[m.engine], "tp": run.tensor_parallel_size, "isl": int(prompt), "osl": int(output),
        "ctx_tokens": int(min(prompt, run.chunk_size)), "max_num_seqs": int(run.batch_size_cap),
        "row_engine": f"{m.engine} {m.engine_version}" if m.engine_version else f"{m.engine} (version not stated)",
        "lengths": "" if len(set(prompts)) == 1 and len(set(outputs)) == 1 else "the project simulates a spread of lengths; ISL and OSL are their means",
        "project_stale": stale,  # the peer is still asked (the row's setting now); the project's value is left out
    }
    if m.qps is not None:
        ask["qps"] = float(m.qps)
    else:
        ask["batch"] = int(min(m.batch_size or m.concurrency, run.batch_size_cap))
    if speculative:
        ask["nextn"] = int(m.k)
        ask["nextn_accepted"] = round(accepted_drafts(plan.acceptance.conditional), 4)
    return ask


def project_rows(published: Path, assumptions: Path, project_csv: Path):
    """Every check row, its recorded project values, and what AIConfigurator is asked (or why not)."""
    import csv

    from simulator.published.plan import plan
    from simulator.specs.measurements import load

    measurements, assumed = load(published, assumptions)
    by_id = {m.id: m for m in measurements}
    with open(project_csv, newline="", encoding="utf-8") as handle:
        recorded = {r["id"]: r for r in csv.DictReader(handle)}
    out = []
    for m in sorted((m for m in measurements if m.role == "check"), key=lambda m: m.id):
        rec = recorded.get(m.id)
        ask = ask_for(m, plan(m, assumed, by_id), rec)
        out.append((m, rec, ask))
    return out, recorded


def _fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def table_rows(rows, answers: dict) -> list[dict]:
    """The recorded table: one row per check row (sorted by id), the peer's answer beside the project's."""
    from simulator.website.peer import closer

    table = []
    for m, rec, ask in sorted(rows, key=lambda row: row[0].id):
        published = m.value  # published.toml's (published.csv's copy agrees to 6 digits unless the row is stale)
        simulated = float(rec["simulated"]) if rec and rec.get("simulated") else None
        project_error = float(rec["error_pct"]) if rec and rec.get("error_pct") else None
        row = {"id": m.id, "metric": m.metric, "published": published, "project_simulated": simulated, "project_error": project_error,
               "peer_predicted": None, "peer_error": None, "closer": "", "peer_setting": "", "note": ""}
        if isinstance(ask, str):
            row["note"] = ask
        else:
            answer, notes = answers[m.id], []
            if ask.get("project_stale"):
                row["project_simulated"] = row["project_error"] = None
                notes.append(ask["project_stale"])
            row["peer_setting"] = answer.get("setting", "")
            if answer.get("value") is None:
                notes.append(f"AIConfigurator refused: {answer['reason']}")
            else:
                row["peer_predicted"] = answer["value"]
                row["peer_error"] = 100 * (answer["value"] - published) / published
                if row["project_error"] is not None:  # as the table prints them
                    row["closer"] = closer(round(row["project_error"], 2), round(row["peer_error"], 2))
                notes.extend(answer.get("notes", ()))
            row["note"] = "; ".join(notes)
        table.append(row)
    return table


def csv_text(table: list[dict]) -> str:
    import csv
    import io

    from simulator.website.peer import PEER_COLUMNS

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PEER_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow({
            **row,
            "published": _fmt(row["published"], ".6g"), "project_simulated": _fmt(row["project_simulated"], ".6g"),
            "project_error": _fmt(row["project_error"], ".2f"), "peer_predicted": _fmt(row["peer_predicted"], ".6g"),
            "peer_error": _fmt(row["peer_error"], ".2f"),
        })
    return buffer.getvalue()


def summary_lines(table_text: str, asks: dict) -> list[str]:
    """The printed summary: over the rows both tools express, overall and by load."""
    from simulator.website.peer import parse_rows, summarize

    rows = parse_rows(table_text)
    asked = lambda key, value=None: [r for r in rows if isinstance(asks.get(r["id"]), dict) and key in asks[r["id"]]  # noqa: E731
                                     and (value is None or asks[r["id"]][key] == value)]
    groups = {"all rows both express": rows, "batch or concurrency": asked("batch"), "request rate (qps, by Little's law)": asked("qps"),
              "vLLM rows": asked("backend", "vllm"), "SGLang rows": asked("backend", "sglang"), "TensorRT-LLM rows": asked("backend", "trtllm")}
    lines = []
    for name, group in groups.items():
        s = summarize(group)
        if not s["both"]:
            continue
        lines.append(
            f"{name}: N = {s['both']}; median |error| project {s['project_median_abs_error_pct']:.1f} %, AIConfigurator "
            f"{s['peer_median_abs_error_pct']:.1f} %; within +-15 % project {s['project_within_15pct']}, AIConfigurator "
            f"{s['peer_within_15pct']}; closer: project {s['closer']['project']}, AIConfigurator {s['closer']['peer']}, tie {s['closer']['tie']}"
        )
    alone = [abs(r["peer_error"]) for r in rows if r["peer_error"] is not None and r["project_error"] is None]
    if alone:
        lines.append(f"AIConfigurator alone (the project's value stale): N = {len(alone)}; its median |error| {statistics.median(alone):.1f} %, "
                     f"within +-15 % {sum(e <= 15 for e in alone)}")
    s = summarize(rows)
    lines.append(f"not expressed by both: {s['not_expressed']} of {s['rows']} check rows (the reasons are in the table's note column)")
    return lines


def _shown(path: Path) -> str:
    """A path as the provenance states it: relative to the checkout (no machine paths)."""
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def provenance(args, recorded: dict, worker: dict, table_text: str, asks: dict) -> dict:
    from simulator.website.peer import parse_rows, summarize

    hashes = sorted({r.get("simulator_source_hash", "") for r in recorded.values()} - {""})
    versions = sorted({r.get("simulator_version", "") for r in recorded.values()} - {""})
    return {
        "peer": "NVIDIA AIConfigurator (PyPI aiconfigurator, Apache-2.0)",
        "aiconfigurator_version": worker["aiconfigurator_version"],
        "aiconfigurator_core_version": worker["aiconfigurator_core_version"],
        "database_mode": worker["database_mode"],
        "estimate_mode": "agg",
        "perf_databases": worker["perf_databases"],  # "system/backend" -> the version whose tables were used
        "project_csv": _shown(args.project_csv),
        "project_simulator_source_hash": hashes,
        "project_simulator_version": versions,
        "published_toml": _shown(args.published),
        "published_toml_sha256_16": _sha256(args.published),
        "date": args.date,
        "command": "python bench/peer_aiconfigurator.py --date " + args.date + " --aic-python <venv with aiconfigurator>/bin/python",
        "summary": summarize(parse_rows(table_text)),
        "rows_asked": sum(isinstance(a, dict) for a in asks.values()),
    }


class WorkerError(Exception):
    pass


def run_worker(aic_python: str, asks: list[dict], database_mode: str) -> dict:
    probe = subprocess.run([aic_python, "-c", "import aiconfigurator, aiconfigurator_core"], capture_output=True)
    if probe.returncode != 0:
        raise WorkerError(f"aiconfigurator is not importable by {aic_python}: install it in a virtual environment of its own "
                          "(python3 -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator) and pass --aic-python /tmp/aicvenv/bin/python")
    with tempfile.TemporaryDirectory(prefix="peer-aic-") as tmp:
        request, answer = Path(tmp) / "asks.json", Path(tmp) / "answers.json"
        request.write_text(json.dumps({"asks": asks, "database_mode": database_mode}), encoding="utf-8")
        done = subprocess.run([aic_python, str(Path(__file__).resolve()), "--worker", str(request), str(answer)], cwd=tmp)
        if done.returncode != 0 or not answer.is_file():
            raise WorkerError(f"the AIConfigurator worker failed (exit {done.returncode}; its messages are above)")
        return json.loads(answer.read_text(encoding="utf-8"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--date", help="the date the comparison is recorded under (YYYY-MM-DD; an input, never the clock)")
    parser.add_argument("--aic-python", default=sys.executable, help="the Python of a virtual environment with aiconfigurator installed (default: this one)")
    parser.add_argument("--published", type=Path, default=Path("data/published.toml"))
    parser.add_argument("--assumptions", type=Path, default=Path("data/published_assumptions.toml"))
    parser.add_argument("--project-csv", type=Path, default=Path("data/results/published.csv"), help="the project's recorded values")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the table (its provenance goes beside it, .json)")
    parser.add_argument("--database-mode", default="SILICON", choices=("SILICON", "HYBRID"), help="AIConfigurator's database mode (default SILICON: its collected tables only)")
    parser.add_argument("--worker", nargs=2, metavar=("ASKS", "ANSWERS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(Path(args.worker[0]), Path(args.worker[1]))
    import datetime

    try:
        datetime.date.fromisoformat(args.date or "")
    except ValueError:
        print(f"--date {args.date!r}: give the recording date as YYYY-MM-DD", file=sys.stderr)
        return 2
    for key in ("published", "assumptions", "project_csv", "out"):
        setattr(args, key, Path(getattr(args, key)).resolve())
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    from simulator.util.textio import atomic_write_text

    rows, recorded = project_rows(args.published, args.assumptions, args.project_csv)
    asks = {m.id: ask for m, _, ask in rows}
    try:
        worker = run_worker(args.aic_python, [a for a in asks.values() if isinstance(a, dict)], args.database_mode)
    except (WorkerError, OSError) as exc:
        print(f"peer_aiconfigurator: {exc}", file=sys.stderr)
        return 2
    text = csv_text(table_rows(rows, worker["answers"]))
    meta = provenance(args, recorded, worker, text, asks)
    atomic_write_text(args.out, text)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    print(f"AIConfigurator {meta['aiconfigurator_version']} ({meta['database_mode']}; {', '.join(f'{k} {v}' for k, v in sorted(meta['perf_databases'].items()))})")
    for line in summary_lines(text, asks):
        print(line)
    print(f"wrote {_shown(args.out)} and {_shown(args.out.with_suffix('.json'))}")
    return 0


# ---- AIConfigurator's side (the worker, in AIConfigurator's virtual environment) ----------------
# Imports AIConfigurator and the standard library only: nothing of this project.

def _is_moe(config: dict) -> bool:
    return bool(config.get("num_local_experts") or config.get("n_routed_experts") or config.get("num_experts"))


class Estimator:
    """AIConfigurator's ``cli_estimate`` (or a stand-in with its signature and result fields, for tests)."""

    def __init__(self, folder: Path, database_mode: str, estimate=None):
        if estimate is None:
            import logging
            import warnings

            warnings.filterwarnings("ignore")
            logging.disable(logging.WARNING)
            from aiconfigurator.cli.api import cli_estimate as estimate

        self.estimate, self.folder, self.database_mode, self.cache, self.versions = estimate, folder, database_mode, {}, {}

    def model_dir(self, ask: dict) -> str:
        directory = self.folder / ask["model"].replace("/", "--")
        if not directory.is_dir():
            directory.mkdir(parents=True)
            (directory / "config.json").write_text(json.dumps(ask["config"]), encoding="utf-8")
        return str(directory)

    def point(self, ask: dict, batch: int, nextn: int = 0) -> dict:
        """AIConfigurator's agg estimate at ``batch`` requests in flight (cached)."""
        key = (ask["model"], ask["system"], ask["backend"], ask["tp"], ask["isl"], ask["osl"], ask["ctx_tokens"], batch, nextn,
               ask.get("nextn_accepted") if nextn else None)
        if key not in self.cache:
            kwargs = dict(mode="agg", backend_name=ask["backend"], database_mode=self.database_mode, isl=ask["isl"], osl=ask["osl"],
                          batch_size=batch, ctx_tokens=ask["ctx_tokens"], tp_size=ask["tp"])
            if _is_moe(ask["config"]):
                kwargs.update(moe_tp_size=ask["tp"], moe_ep_size=1)
            if nextn:
                kwargs.update(nextn=nextn, nextn_accepted=ask["nextn_accepted"])
            r = self.estimate(self.model_dir(ask), ask["system"], **kwargs)
            self.versions[f"{ask['system']}/{ask['backend']}"] = r.backend_version
            self.cache[key] = {"tpot_ms": float(r.tpot), "ttft_ms": float(r.ttft), "seq_s": float(r.seq_per_second),
                               "e2e_ms": float(r.request_latency), "version": r.backend_version, "warning": r.kv_cache_warning or ""}
        return self.cache[key]

    def at_rate(self, ask: dict, qps: float, nextn: int = 0) -> tuple[dict, str]:
        """The operating point where AIConfigurator's own request rate equals ``qps`` (Little's law:
        seq/s = B / request latency), interpolated between the integer batch sizes around it."""
        cap = ask["max_num_seqs"]
        lo, hi = None, 1
        while True:
            p = self.point(ask, hi, nextn)
            if p["seq_s"] >= qps:
                break
            if hi >= cap:
                return p, f"saturated: its rate at max_num_seqs {cap} is {p['seq_s']:.3g} req/s < qps {qps:g}; priced at batch {cap}"
            lo, hi = hi, min(2 * hi, cap)
        if lo is None:
            return self.point(ask, 1, nextn), f"qps {qps:g} is below its batch-1 rate ({self.point(ask, 1, nextn)['seq_s']:.3g} req/s): priced at batch 1"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.point(ask, mid, nextn)["seq_s"] >= qps:
                hi = mid
            else:
                lo = mid
        a, b = self.point(ask, lo, nextn), self.point(ask, hi, nextn)
        t = (qps - a["seq_s"]) / (b["seq_s"] - a["seq_s"]) if b["seq_s"] > a["seq_s"] else 1.0
        mixed = {k: a[k] + t * (b[k] - a[k]) for k in ("tpot_ms", "ttft_ms", "seq_s", "e2e_ms")}
        mixed.update(version=b["version"], warning=b["warning"] or a["warning"])
        return mixed, f"batch {lo + t:.2f} (between {lo}: {a['seq_s']:.3g} req/s and {hi}: {b['seq_s']:.3g} req/s)"

    def operating_point(self, ask: dict, nextn: int = 0) -> tuple[dict, str]:
        if "qps" in ask:
            return self.at_rate(ask, ask["qps"], nextn)
        return self.point(ask, ask["batch"], nextn), f"batch {ask['batch']}"


def _value(metric: str, p: dict, osl: int) -> float:
    if metric in TPOT_METRICS:
        return p["tpot_ms"]
    if metric == "decode_tokens_per_s":
        return 1000.0 / p["tpot_ms"]
    if metric == "output_tokens_per_s":
        return p["seq_s"] * osl
    if metric == "requests_per_s":
        return p["seq_s"]
    raise ValueError(metric)


def answer(est: Estimator, ask: dict) -> dict:
    nextn = ask.get("nextn", 0)
    moe = f" --moe-tp {ask['tp']} --moe-ep 1" if _is_moe(ask["config"]) else ""
    mtp = f" --nextn {nextn} --nextn-accepted {ask['nextn_accepted']:g}" if nextn else ""
    base = (f"estimate agg --system {ask['system']} --backend {ask['backend']} --tp {ask['tp']}{moe} --isl {ask['isl']} --osl {ask['osl']} "
            f"--ctx-tokens {ask['ctx_tokens']}{mtp}")
    try:
        p, where = est.operating_point(ask, nextn)
        if ask["metric"] == "speedup":
            q, where_base = est.operating_point(ask, 0)
            value = (q["e2e_ms"] / p["e2e_ms"]) if "qps" in ask else (p["seq_s"] / q["seq_s"])
            where = f"{where}; baseline {where_base}"
        else:
            value = _value(ask["metric"], p, ask["osl"])
    except Exception as exc:  # its refusal is the answer: the row is listed with it
        message = " ".join(str(exc).replace(str(est.folder), "<config dir>").split())
        return {"value": None, "reason": f"{type(exc).__name__}: {message[:300]}", "setting": base}
    load = f"qps {ask['qps']:g} -> {where}" if "qps" in ask else where
    setting = f"{base}, {load}; perf database {ask['backend']} {p['version']}"
    notes = [f"row ran {ask['row_engine']}, AIConfigurator's tables are {ask['backend']} {p['version']}",
             f"model: {ask['config_source']}"]
    if ask.get("lengths"):
        notes.append(ask["lengths"])
    if ask["metric"] == "tpot_ms":
        notes.append("its TPOT is one steady-state value, compared with the row's median")
    if "qps" in ask:
        notes.append("a request rate priced at the concurrency that serves it (mean-field: no queueing spread)")
    if p.get("warning"):
        notes.append("its KV-cache warning: " + " ".join(p["warning"].split())[:200])
    return {"value": value, "setting": setting, "notes": notes}


def worker_main(asks_path: Path, answers_path: Path) -> int:
    from importlib import metadata

    request = json.loads(asks_path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="aic-models-") as folder:
        est = Estimator(Path(folder), request["database_mode"])
        answers = {}
        for i, ask in enumerate(request["asks"], 1):
            answers[ask["id"]] = answer(est, ask)
            print(f"[{i}/{len(request['asks'])}] {ask['id']}: {answers[ask['id']].get('value', answers[ask['id']].get('reason'))}", file=sys.stderr, flush=True)
    result = {
        "answers": answers, "database_mode": request["database_mode"], "perf_databases": dict(sorted(est.versions.items())),
        "aiconfigurator_version": metadata.version("aiconfigurator"), "aiconfigurator_core_version": metadata.version("aiconfigurator-core"),
    }
    answers_path.write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
