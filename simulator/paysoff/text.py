"""The pays-off answer as a terminal prints it, in the order a serving engineer reads it: the verdict
(does it pay, with what, how much, how far to trust it), what to deploy and the ``vllm bench serve``
loop that checks it on a GPU, the set-up, the table, then the details.  Every line fits
:data:`simulator.cli.terminal.WIDTH` columns; commands are broken at their flags and still paste.

Pure text from the sweep's output (:mod:`simulator.paysoff.runner`): nothing is decided here.
What to deploy is the schedule document's ``recommended`` entry (never worse than its fallback).
"""

from __future__ import annotations

import json
import math
from typing import Optional

from simulator.cli import vllm_serve
from simulator.cli.terminal import WIDTH, shell_lines, wrap
from simulator.cli.vllm_bench import closed_loop_grid, open_loop_grid
from simulator.sweep.crossover import fixed_k

# the table's columns: load, base TPOT and TTFT, one per k, best k, the recommendation's figure
FIXED_COLUMNS = 9 + 3 + 9 + 1 + 10 + 3 + 3 + 4 + 3 + 13
K_COLUMN = 7  # "2.48×^" and a space
MAX_TABLE_KS = max(1, (WIDTH - FIXED_COLUMNS) // K_COLUMN)  # more k are printed as further tables

OVERLOAD_NOTE = (
    "overloaded: the no-speculation run's queue grew through the run (the median TTFT of its last tenth of requests above "
    "{growth:g}x its first tenth's; simulator/sweep/metrics.py): arrivals outpace service, so the speedups there compare runs "
    "that never reached a steady state, and waiting, not TPOT, is what requests feel"
)


def format_answer(spec, output, limits: Optional[vllm_serve.Limits] = None, speculative_input=None) -> str:
    """The whole answer.  ``limits``: where the scheduler limits came from (the command's flags);
    ``speculative_input``: the user's --speculative-config, read."""
    entry = output.schedules["schedules"][0]
    version = limits.version if limits else None
    sections = [
        verdict_lines(spec, entry, version, output.rows),
        deploy_lines(spec, entry, version),
        setup_lines(spec, entry, output.schedules, limits, speculative_input),
        table_lines(spec, entry, output.rows),
        detail_lines(spec, entry, output, version),
    ]
    return "\n".join(line for section in sections for line in section + [""]).rstrip("\n")


def _dynamic(version: Optional[str]) -> bool:
    return version is None or vllm_serve.at_least(version, vllm_serve.DYNAMIC_SD_VERSION)


def _closed(entry: dict) -> list[dict]:
    return sorted((c for c in entry["comparison"] if c["mode"] == "closed_loop"), key=lambda c: c["x"])


def _error_words(spec, entry: dict) -> tuple[str, str]:
    """(what the error bar is made of, the bar in words)."""
    from simulator.sweep import error_bar

    if spec.fit_error_pct is not None:  # a fitted profile: its own held-out error is the bar
        source = "the fitted profile's held-out error"
        return source, f"error ±{spec.fit_error_pct:.1f}% ({source})"
    bars = [c["error_bar"] for c in _closed(entry) if c.get("error_bar")]
    if not bars:
        return "the verify-cost band", "no check rows of this regime: the error is not known"
    return "the check rows' largest error", f"error {error_bar.summary(bars)}"


def _fixed_figures(entry: dict, rows, spec, k: int) -> list[tuple[float, float, float]]:
    """(x, simulated speedup, guarded low) of the fixed k at each closed-loop concurrency."""
    out = []
    for c in _closed(entry):
        band = [r["tpot_speedup"] for r in rows if r["acceptance"] == entry["acceptance"] and r["mode"] == "closed_loop" and fixed_k(r)
                and r["num_speculative_tokens"] == k and r["concurrency"] == c["x"]]
        bar = c.get("error_bar")
        low = min(band) if band else math.nan
        guarded = low / (1 + bar["high_pct"] / 100) if bar else low
        out.append((c["x"], c["fallback_tpot_speedup"], guarded))
    return out


def verdict_lines(spec, entry: dict, version: Optional[str], rows=()) -> list[str]:
    """The answer first: does it pay, with what, how much, and how far the check rows of the same
    regime say to trust it; then why the alternatives lost."""
    from simulator.speculative.k_schedule import k_for_batch
    from simulator.util.units import schedule_words

    closed = _closed(entry)
    rec = entry["recommended"]
    source, error = _error_words(spec, entry)
    span = "the loads simulated"
    if closed:
        span = f"{closed[0]['x']:g} in flight" if len(closed) == 1 else f"{closed[0]['x']:g}–{closed[-1]['x']:g} in flight"
    lines: list[str] = []
    if rec["kind"] in ("schedule", "schedule_up_to"):
        schedule = tuple(map(tuple, entry["num_speculative_tokens_per_batch_size"]))
        upto = rec["kind"] == "schedule_up_to"
        on = [c for c in closed if k_for_batch(schedule, int(c["x"])) > 0 and (not upto or c["x"] <= rec["up_to"])] or closed
        lo, hi = min(c["schedule_tpot_speedup"] for c in on), max(c["schedule_tpot_speedup"] for c in on)
        guarded = min(c["guarded_band_low"] for c in on)
        figures = f"{lo:.2f}–{hi:.2f}× median TPOT speedup simulated, at least {guarded:.2f}× with {source}; {error}."
        if upto:
            above = [c for c in closed if c["x"] >= rec["from"]]
            slow = f"{min(c['schedule_tpot_speedup'] for c in above):.2f}–{max(c['schedule_tpot_speedup'] for c in above):.2f}×"
            head = (f"Yes below {rec['from']:g} in flight, no from there: {schedule_words(entry['num_speculative_tokens_per_batch_size'])} gives "
                    f"{figures[:-1]}; from {rec['from']:g} in flight it gives {slow} (even its k = 0 steps still run the drafter), so "
                    "serve without speculation if your load runs there.")
        else:
            head = f"Yes: {schedule_words(entry['num_speculative_tokens_per_batch_size'])}; {figures}"
    elif rec["kind"] == "fixed_k":
        figures = _fixed_figures(entry, rows, spec, rec["num_speculative_tokens"])
        lo, hi = min(f[1] for f in figures), max(f[1] for f in figures)
        guarded = min(f[2] for f in figures)
        head = (f"Yes: the fixed k = {rec['num_speculative_tokens']} at every load ({span}); {lo:.2f}–{hi:.2f}× median TPOT speedup "
                f"simulated, at least {guarded:.2f}× with {source}; {error}.")
    elif rec["kind"] == "adaptive":
        lo, hi = min(c["adaptive_tpot_speedup"] for c in closed), max(c["adaptive_tpot_speedup"] for c in closed)
        guarded = min(c["adaptive_guarded_low"] for c in closed)
        head = (f"Yes: adaptive verification at k = {rec['num_speculative_tokens']} (enable_adaptive_verification) at every load ({span}); "
                f"{lo:.2f}–{hi:.2f}× median TPOT speedup simulated, at least {guarded:.2f}× with {source}; {error}.")
    else:
        head = f"No: serve without speculation at {span}; {error}."
    lines += wrap(head)
    if rec.get("adaptive_verification"):
        lines += wrap(f"Not adaptive verification: {rec['adaptive_verification']}.")
    if not _dynamic(version) and rec["kind"] == "none" and any(c.get("guarded_best_k") for c in closed):
        safe = ", ".join(f"k = {c['guarded_best_k']} at {c['x']:g}" for c in closed if c.get("guarded_best_k"))
        lines += wrap(f"vLLM {version} takes no k schedule and no fixed k stays at or above 1× at every concurrency once {source} is "
                      f"taken off its band; if your load stays where a k pays ({safe} in flight), that k pays there.")
    elif rec["kind"] in ("fixed_k", "none") and _dynamic(version) and "schedule_loses_at" in rec:
        lines += wrap(f"Not the k schedule: {rec['why']}.")
    switched = [c for c in closed if c.get("guarded_best_k") == 0 and c["best_fixed_k"] > 0]
    if switched:
        parts = ", ".join(f"{c['x']:g} in flight (k = {c['best_fixed_k']}: {c['best_fixed_tpot_speedup']:.2f}× simulated)" for c in switched)
        why = (f"their band divided by (1 + {source}) falls below 1×" if any(c.get("error_bar") for c in switched)
               else "their band (the verify-cost bounds) reaches below 1×")
        lines += wrap(f"Off where it may lose: {parts} pay in simulation, but {why} (rule: simulator/sweep/error_bar.py).")
    if rec["kind"] == "schedule":
        idle = [c for c in closed if c.get("guarded_best_k") == 0 and c["schedule_tpot_speedup"] < 1 and not _breaks_even(rec, c)]
        if idle:
            lo, hi = min(c["schedule_tpot_speedup"] for c in idle), max(c["schedule_tpot_speedup"] for c in idle)
            lines += wrap(
                f"Where the schedule runs k = 0 ({', '.join(format(c['x'], 'g') for c in idle)} in flight) it is {lo:.2f}–{hi:.2f}× against "
                "a server without speculation (vLLM >= 0.24 still drafts there: Model Runner V2 the full k, the V1 runner a drafter's first "
                "pass); if most of your load is there, serve without --speculative-config."
            )
    even = [c for c in closed if _breaks_even(rec, c)]
    if even:
        lines += wrap(f"Break-even, not a gain, at {', '.join(format(c['x'], 'g') for c in even)} in flight: the speedup there is within "
                      "the runs' sampling noise of 1×.")
    return lines


def _breaks_even(rec: dict, c: dict) -> bool:
    """The recommended option's speedup at one load is within its sampling noise of 1x."""
    from simulator.sweep.crossover import tied

    if rec["kind"] == "none":
        return False
    scheduled = rec["kind"] in ("schedule", "schedule_up_to")
    s, n = (c["schedule_tpot_speedup"], c["schedule_noise"]) if scheduled else (c["fallback_tpot_speedup"], c["fallback_noise"])
    if rec["kind"] == "adaptive":
        s, n = c["adaptive_tpot_speedup"], c["adaptive_noise"]
    return tied((s, n), (1.0, 0.0))


def deploy_lines(spec, entry: dict, version: Optional[str]) -> list[str]:
    """What to run: the recommended ``vllm serve`` line, then the ``vllm bench serve`` loop over
    the same workload that measures it (and, against a server without speculation, the base)."""
    from simulator.cli.vllm_serve import served_model_name, served_name_hint

    rec = entry["recommended"]
    profile = spec.profiles[0]
    words = {"schedule": "with the k schedule (num_speculative_tokens_per_batch_size)", "fixed_k": f"with the fixed k = {rec['num_speculative_tokens']}",
             "none": "without speculation",
             "schedule_up_to": f"with the k schedule while your load stays below {rec.get('from', 0):g} in flight",
             "adaptive": f"with adaptive verification at k = {rec['num_speculative_tokens']}"}[rec["kind"]]
    lines = [f"Serve {words}" + (f" on vLLM {version}:" if version else ":")]
    lines += ["  " + line for line in shell_lines(rec["serve_command"])]
    if rec["kind"] == "schedule_up_to":
        lines.append(f"and without speculation where it runs at {rec['from']:g} in flight or more:")
        lines += ["  " + line for line in shell_lines(rec["plain_serve_command"])]
    model = served_model_name(profile.model, profile.served_model_name)
    hint = served_name_hint(model)
    if hint:
        lines += wrap(hint)
    lines += wrap("Check it on a GPU: against that server, and against one without --speculative-config for the base TPOT, run the same "
                  "workload (vLLM draws its own lengths from the same distribution):")
    loop = closed_loop_grid(model, spec.concurrency, requests_per_slot=spec.requests_per_slot, min_requests=spec.min_requests,
                            prompt_tokens=spec.prompt_tokens, output_tokens=spec.output_tokens, range_ratio=spec.length_spread, seed=spec.workload_seed)
    lines += ["  " + line for line in shell_lines(loop)]
    rates = open_loop_grid(model, spec.arrival_rates, num_prompts=spec.poisson_requests, prompt_tokens=spec.prompt_tokens,
                           output_tokens=spec.output_tokens, range_ratio=0.0, seed=spec.workload_seed)
    if rates and not spec.trace:
        lines += ["  " + line for line in shell_lines(rates)]
    if spec.trace:
        lines += wrap(f"(the runs drew their lengths from {spec.trace}: give vllm bench serve that dataset instead of the random one)")
    return lines


def setup_lines(spec, entry: dict, doc: dict, limits, speculative_input) -> list[str]:
    """What was simulated: the deployment, scheduler, engine, acceptance, verify cost and workload."""
    from simulator.util import units

    profile = spec.profiles[0]
    tp = f"{profile.tensor_parallel_size} × "
    lines = wrap(
        f"Deployment: {profile.model} on {tp}{profile.device.upper()} (tensor parallel {profile.tensor_parallel_size}), proposer {profile.proposer}"
        + (f" ({profile.draft_model})" if profile.draft_model else "")
        + (f", proposal probability {profile.proposal_probability:g}" if profile.proposal_probability != 1 else "")
    )
    lines += wrap(f"Scheduler: {limits.describe()}" if limits else f"Scheduler: max_num_seqs {spec.batch_size_cap}, max_num_batched_tokens {spec.chunk_size}")
    if limits:
        lines += wrap(f"vLLM {limits.version} (--vllm-version), engine profile {spec.engine} (simulator/profiles/engines.toml)")
    if spec.step_scales is not None:
        scales = spec.step_scales
        lines += wrap(f"Step costs fitted to your server (--engine-profile): CPU {spec.engine_overhead_ms:.2f} ms per step, GEMM x{scales.gemm:.3g}, "
                      f"attention x{scales.attention:.3g}, all-reduce x{scales.all_reduce:.3g}, drafter x{scales.drafter:.3g}")
    if speculative_input is not None:
        k = speculative_input.k
        where = f"its speedups are the k = {k} column" if k in spec.speculative_tokens else f"k = {k} is outside --k-range: add it to compare"
        lines += wrap(f"Your --speculative-config runs k = {k} ({where})")
    lines += wrap(f"Acceptance: {profile.derivation}.")
    lines += wrap("Mean acceptance length this gives (what vLLM would log; the most any k can gain in a closed loop): "
                  + ", ".join(f"k={k}: {v:.2f}" for k, v in entry["acceptance_length_at_k"].items()))
    primary = spec.attention
    lines += wrap(f"Verify cost: {units.attention_label(primary)} ({primary}), {doc['verify_cost']['why']}.")
    if spec.trace:
        workload = f"lengths from {spec.trace}"
    else:
        workload = f"prompts ~{spec.prompt_tokens}, outputs ~{spec.output_tokens} tokens (±{spec.length_spread:.0%}, vllm bench serve's --random-range-ratio)"
    lines += wrap(f"Workload: {workload}; speedup = median TPOT without speculation (the row's base TPOT) / with it, same workload; "
                  f"{spec.requests_per_slot} requests per slot in a closed loop, at least {spec.min_requests}.")
    return lines


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if math.isfinite(seconds) else "n/a"


def table_lines(spec, entry: dict, rows) -> list[str]:
    """Median TPOT speedup by load x k under the primary verify setting, with each load's base,
    the best k and the recommendation's figure; the band's width after it (every bound in --csv)."""
    from simulator.schemas import OVERLOAD_TTFT_GROWTH
    from simulator.util import units

    primary, bounds = spec.attention, [m for m in spec.attention_modes if m != spec.attention]
    fixed = [r for r in rows if r["acceptance"] and fixed_k(r)]
    baselines = {(r["mode"], r["concurrency"] if r["mode"] == "closed_loop" else r["arrival_rate"]): r for r in rows if not r["acceptance"]}
    rec = entry["recommended"]
    lines: list[str] = []
    marked = capped = False
    widest = 0.0
    for mode, xs, unit in (("closed_loop", spec.concurrency, "in flight"), ("poisson", spec.arrival_rates, "req/s")):
        if not xs:
            continue
        ks_all = list(spec.speculative_tokens if mode == "closed_loop" else spec.poisson_k)
        by = {(r["attention"], r["num_speculative_tokens"], r["concurrency"] if mode == "closed_loop" else r["arrival_rate"]): r for r in fixed if r["mode"] == mode}
        comparison = {c["x"]: c for c in entry["comparison"] if c["mode"] == mode}
        title = "Closed loop" if mode == "closed_loop" else "Open loop (Poisson)"
        for start in range(0, len(ks_all), MAX_TABLE_KS):
            ks = ks_all[start:start + MAX_TABLE_KS]
            lines += wrap(f"{title}: median TPOT speedup ({units.attention_label(primary)}) against the row's base (no speculation)"
                          + (f" (k columns {start + 1}–{start + len(ks)} of {len(ks_all)})" if len(ks_all) > MAX_TABLE_KS else ""))
            header = f"{unit:>9} | {'base TPOT':>9} {'base TTFT':>10} | " + " ".join(f"{'k=' + str(k):>6}" for k in ks) + " | best | recommended"
            lines += [header, "-" * len(header)]
            for x in xs:
                base = baselines[(mode, x)]
                cells = []
                for k in ks:
                    row = by[(primary, k, x)]
                    s, ceiling = row["tpot_speedup"], row.get("speedup_ceiling")
                    above = mode == "closed_loop" and ceiling is not None and not math.isnan(ceiling) and s > ceiling
                    capped |= above
                    cells.append(f"{min(s, ceiling) if above else s:5.2f}×" + ("^" if above else " "))
                    for b in bounds:
                        other = by.get((b, k, x))
                        if other is not None and s > 0:
                            widest = max(widest, abs(other["tpot_speedup"] / s - 1))
                c = comparison.get(x)
                best = (str(c["best_fixed_k"]) if c["best_fixed_k"] else "off") if c else "–"
                overloaded = bool(base.get("overloaded"))
                marked |= overloaded
                ttft = _ms(base["ttft_p50_s"]) + ("!" if overloaded else " ")
                lines.append(f"{units.number(x):>9} | {_ms(base['tpot_p50_s']):>9} {ttft:>10} | " + " ".join(cells)
                             + f"| {best:^4} | {_recommended_figure(rec, c)}")
            lines.append("")
    sampled = [r for r in fixed if r["attention"] == primary and r.get("tpot_speedup_high") is not None and r["tpot_speedup"] > 0
               and not math.isnan(r["tpot_speedup_high"])]
    if sampled:
        spread = sorted(r["tpot_speedup_high"] / r["tpot_speedup"] - 1 for r in sampled)
        lines += wrap(f"Sampling: each speedup is good to ±{spread[len(spread) // 2]:.0%} (median; up to ±{spread[-1]:.0%}), the 95% interval of "
                      "its runs' median TPOTs over their requests; two figures closer than that are a tie, and the smaller k wins it "
                      "(more requests per run narrow it: --requests-per-slot, --min-requests).")
    if bounds:
        lines += wrap(f"Band: the other verify-cost bound ({', '.join(units.attention_label(b) for b in bounds)}) moves these speedups by up to {widest:.0%} "
                      "(every run under each bound is in --csv).")
    if capped:
        lines += wrap("^ simulated above the acceptance length at that k, the most a closed loop can gain (a verify step costs at least "
                      "a plain step): sampling luck of a few requests, printed and read at that ceiling (the simulated figure is in --csv).")
    if marked:
        lines += wrap("! " + OVERLOAD_NOTE.format(growth=OVERLOAD_TTFT_GROWTH) + ".")
    return lines


def _recommended_figure(rec: dict, c: Optional[dict]) -> str:
    """The recommended deployment's speedup at one load, with its band's low end for a schedule."""
    if c is None:
        return "–"
    if rec["kind"] == "schedule_up_to" and c["x"] >= rec["from"]:
        return "1.00× (off)"
    if rec["kind"] in ("schedule", "schedule_up_to"):
        return f"{c['schedule_tpot_speedup']:.2f}× ≥{c['band_low']:.2f}"
    if rec["kind"] == "fixed_k":
        return f"{c['fallback_tpot_speedup']:.2f}× (k={rec['num_speculative_tokens']})"
    if rec["kind"] == "adaptive" and "adaptive_tpot_speedup" in c:
        return f"{c['adaptive_tpot_speedup']:.2f}× (adaptive)"
    return "1.00× (off)"


def _from(x: Optional[int], spec) -> str:
    """'from N in flight', saying so when N is the smallest concurrency simulated (it may stop earlier)."""
    if not x:
        return "pays throughout"
    smallest = min(spec.concurrency)
    if x == smallest and smallest > 1:
        return f"from {x} in flight, the smallest concurrency simulated (below {x} was not simulated)"
    return f"from {x} in flight"


def detail_lines(spec, entry: dict, output, version: Optional[str]) -> list[str]:
    """Crossovers, where the schedule stops, the tie rule, and the option not recommended."""
    doc = output.schedules
    primary = spec.attention
    lines: list[str] = []
    crossings = [c for c in output.crossovers if c["attention"] == primary and c["mode"] == "closed_loop"]
    if crossings:
        lines += wrap(f"Where each fixed k stops paying (closed loop, speedup crosses 1×; {primary}): "
                      + "; ".join(f"k={c['num_speculative_tokens']}: {c['crossover']}" for c in crossings))
    off = entry["stops_paying_from"]
    band = ", ".join(f"{b}: {_from(v, spec)}" for b, v in entry["stops_paying_band"].items())
    lines += wrap(f"The k schedule stops speculating: {_from(off, spec) if off else 'never: it pays at every concurrency simulated'} "
                  f"({primary}); band: {band}.")
    lines += wrap(f"Ties: {doc['tie_rule']}.")
    lines.append("")
    lines += _alternatives(spec, entry, doc, version)
    profile = spec.profiles[0]
    lines += wrap(f"Method {profile.kind.vllm_method} ({profile.kind.label}): {profile.kind.vllm_version}.")
    return lines


def _alternatives(spec, entry: dict, doc: dict, version: Optional[str]) -> list[str]:
    """The schedule and the best fixed k, whichever is not the recommendation, for the reader who
    runs another vLLM or another load; the recommendation's reason first."""
    rec = entry["recommended"]
    fallback = entry["fixed_k_fallback"]
    dynamic = _dynamic(version)
    lines = wrap(f"Why this recommendation: {rec['why']}.")
    schedule_lines: list[str] = []
    if entry["speculative_config"]:
        lowest, top = min(spec.concurrency), entry.get("simulated_up_to")
        words = ("The k schedule" if dynamic else f"On vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later, the k schedule") + " (rows [first batch size, last batch size, k]): "
        schedule_lines += wrap(words + json.dumps(entry["num_speculative_tokens_per_batch_size"], separators=(",", ":")))
        if lowest > 1:
            schedule_lines += wrap(f"Its first row starts at batch 1, as vLLM needs, but only from {lowest} in flight was simulated: below that it "
                                   "keeps the first simulated k. Add smaller values to --concurrency to check them.")
        if top and top < spec.batch_size_cap:
            schedule_lines += wrap(f"Its last row runs to --max-num-seqs {spec.batch_size_cap}, but only up to {top} in flight was simulated; "
                                   "above that it keeps the last simulated k. Add larger values to --concurrency to check them.")
        if rec["kind"] not in ("schedule", "schedule_up_to"):
            schedule_lines += ["  " + line for line in shell_lines(entry["serve_command"])]
        schedule_lines += wrap(f"A schedule needs {doc['vllm']['text']} ({', '.join(doc['vllm']['sources'])})")
    k = fallback["num_speculative_tokens"]
    if k:
        losing = fallback["below_1x_at"]
        fixed_lines = wrap(
            (f"For vLLM {version} (no num_speculative_tokens_per_batch_size before {vllm_serve.DYNAMIC_SD_VERSION})" if not dynamic
             else f"On vLLM before {vllm_serve.DYNAMIC_SD_VERSION} (no k schedule)")
            + f": the best fixed k = {k}, {fallback['geomean_tpot_speedup']:.2f}× geometric-mean TPOT speedup over the concurrencies simulated"
            + (f"; below 1× at {', '.join(format(x, 'g') for x in losing)} in flight" if losing else "; at least 1× at every one")
        )
        if rec["kind"] != "fixed_k":
            fixed_lines += ["  " + line for line in shell_lines(fallback["serve_command"])]
    else:
        fixed_lines = wrap(f"{'For vLLM ' + version if not dynamic else 'On vLLM before ' + vllm_serve.DYNAMIC_SD_VERSION}: no fixed k pays on "
                           "average over the concurrencies simulated: run without --speculative-config")
    return lines + (schedule_lines + fixed_lines if dynamic else fixed_lines + schedule_lines)
