"""The pays-off page's answer for one deployment, in words: what the recommended schedule gives
and where it stops paying.

A module of its own because the answer a reader deploys is the *schedule*, simulated under the
primary verify cost and under each bound (the grey band on the chart).  The recorded
``stops_paying_from`` / ``stops_paying_band`` fields answer a different question (from which
batch size no *fixed* k pays any more); a card built from them said "pays throughout" beside a
band that fell to 0.92× (issue 26).  Everything here reads the schedule's own simulated speedups
in the entry's ``comparison`` rows, so the words and the band agree by construction.
"""

from __future__ import annotations

from typing import Optional

from simulator.util import units
from simulator.website import names


def setting_label(attention: str) -> str:
    """A verify-cost setting in words: "per-token cost (upper bound)"."""
    return names.setting_with_role(attention)


def closed_points(entry: dict) -> list[dict]:
    """The schedule's closed-loop speedups in load order: {"x", "speedups": {setting: speedup}}."""
    points = []
    for c in sorted((c for c in entry["comparison"] if c["mode"] == "closed_loop"), key=lambda c: c["x"]):
        speedups = {entry["attention"]: c["schedule_tpot_speedup"], **c.get("band", {})}
        points.append({"x": c["x"], "speedups": speedups})
    return points


def stops_paying(points: list[dict], setting: str) -> Optional[dict]:
    """The first simulated concurrency at which the schedule under ``setting`` is below 1×, with
    the last one before it (None: it pays at every concurrency simulated)."""
    before = None
    for p in points:
        value = p["speedups"].get(setting)
        if value is None:
            continue
        if value < 1:
            return {"x": p["x"], "speedup": value, "before": before}
        before = {"x": p["x"], "speedup": value}
    return None


def _in_flight(x) -> str:
    return f"{int(x)} in flight"


def setting_verdict(points: list[dict], setting: str) -> str:
    """What the schedule does under one setting, with its numbers."""
    stop = stops_paying(points, setting)
    if stop is None:
        last = points[-1]
        value = last["speedups"][setting]
        if units.breaks_even(value):  # 0.996x pays in the sign only: say so (issue 33)
            return f"pays at every concurrency simulated, down to break-even at {_in_flight(last['x'])} ({units.speedup(value)})"
        return f"pays at every concurrency simulated ({units.speedup(value)} at {_in_flight(last['x'])})"
    text = f"below 1× from {_in_flight(stop['x'])} ({units.speedup(stop['speedup'])}"
    if stop["before"] is not None:
        text += f"; {units.speedup(stop['before']['speedup'])} at {_in_flight(stop['before']['x'])}"
    return text + ")"


def error_words(entry: dict) -> str:
    """The check rows' error bar over the closed-loop loads, in one sentence ("" without rows)."""
    from simulator.sweep import error_bar

    bars = [c["error_bar"] for c in entry["comparison"] if c["mode"] == "closed_loop" and c.get("error_bar")]
    return f"Error on speedup the schedule was chosen with: {error_bar.summary(bars)}." if bars else ""


def switched_off_words(entry: dict) -> str:
    """Where the error bar switched speculation off, and why ("" where it did not)."""
    off = [c for c in entry["comparison"] if c["mode"] == "closed_loop" and c.get("guarded_best_k") == 0 and c["best_fixed_k"] > 0]
    if not off:
        return ""
    parts = ", ".join(f"{_in_flight(c['x'])} (k = {c['best_fixed_k']}: {units.speedup(c['best_fixed_tpot_speedup'])} simulated)" for c in off)
    why = ("not once the check rows' largest error is taken off its band" if any(c.get("error_bar") for c in off)
           else "its band (the verify-cost bounds) reaches below 1×")
    return f"Switched off at {parts}: it pays in simulation, but {why}."


def idle_words(entry: dict) -> str:
    """What the schedule's k = 0 rows cost where they run ("" where the schedule never speculates)."""
    schedule = entry.get("num_speculative_tokens_per_batch_size") or []
    idle = [c for c in entry["comparison"] if c["mode"] == "closed_loop" and c.get("guarded_best_k") == 0 and c["schedule_tpot_speedup"] < 1]
    if not idle or not any(k for _, _, k in schedule):
        return ""
    lo, hi = min(c["schedule_tpot_speedup"] for c in idle), max(c["schedule_tpot_speedup"] for c in idle)
    where = ", ".join(_in_flight(c["x"]) for c in idle)
    return (f"Where it runs k = 0 ({where}) vLLM still drafts (Model Runner V2 the full k, the V1 runner a first pass) and a V1-runner "
            "schedule runs piecewise CUDA graphs: "
            f"{units.speedup(lo)}–{units.speedup(hi)} against serving without speculation.")


def recommendation_words(entry: dict) -> str:
    """What to deploy where it is not the schedule, and why ("" where the schedule is the answer):
    the recommendation is never worse than its fallback (the best fixed k, or no speculation), and
    a schedule can lose to it (its k = 0 rows still draft)."""
    rec = entry.get("recommended")
    if not rec or rec["kind"] == "schedule":
        return ""
    k = rec["num_speculative_tokens"]
    head = {"fixed_k": f"Deploy the fixed k = {k}, not the schedule", "none": "Deploy without speculation",
            "schedule_up_to": f"Deploy the schedule below {rec.get('from', 0):g} in flight, without speculation from there",
            "adaptive": f"Deploy adaptive verification at k = {k}, not the schedule"}[rec["kind"]]
    return f"{head}: {rec['why']}."


def serve_command(entry: dict) -> str:
    """The vllm serve line of what the answer recommends (the schedule's, before recommendations were recorded)."""
    rec = entry.get("recommended")
    return rec["serve_command"] if rec else entry.get("serve_command", "")


def answer(entry: dict, bounds: list[str]) -> dict:
    """The card's lead sentence and its "stops paying" facts, from the schedule's simulated speedups;
    the recommendation where that is not the schedule; the serve line of what is recommended."""
    result = _answer(entry, bounds)
    extra = " ".join(part for part in (switched_off_words(entry), idle_words(entry), error_words(entry)) if part)
    if extra:
        result["lead"] = f"{result['lead']} {extra}".strip()
    result["recommendation"] = recommendation_words(entry)  # the card's next line, where it is not the schedule
    result["serve_command"] = serve_command(entry)
    return result


def _still_pays(label: str, x, value: float) -> str:
    """The bound's clause where the schedule never falls below 1x: "still pays", or "breaks even"
    where its last speedup prints as 1.00x (a 0.4 % gain is no reason to deploy)."""
    if units.breaks_even(value):
        return f"under the {label} it only breaks even at {_in_flight(x)} ({units.speedup(value)})"
    return f"under the {label} it still pays at {_in_flight(x)} ({units.speedup(value)})"


def _answer(entry: dict, bounds: list[str]) -> dict:
    points = closed_points(entry)
    primary = entry["attention"]
    if not points:
        return {"lead": entry.get("note", ""), "verdicts": [], "speculates": False, "stops": {}}
    schedule = entry.get("num_speculative_tokens_per_batch_size") or []
    speculates = any(k for _, _, k in schedule)
    first, last = points[0], points[-1]
    settings = [primary] + [b for b in bounds if b != primary]
    verdicts = [{"setting": s, "label": setting_label(s), "text": setting_verdict(points, s), "primary": s == primary} for s in settings]
    stops = {s: stops_paying(points, s) for s in settings}
    if not speculates and any(c["best_fixed_k"] > 0 for c in entry["comparison"] if c["mode"] == "closed_loop"):
        lead = (f"Do not speculate here: at no concurrency from {_in_flight(first['x'])} to {_in_flight(last['x'])} does a k stay at or "
                "above 1× once the check rows' error is taken off its band.")
    elif not speculates:
        lead = f"Do not speculate here: no k beats running without it at any concurrency from {_in_flight(first['x'])} to {_in_flight(last['x'])}."
    else:
        lead = (
            f"{units.speedup(first['speedups'][primary])} at {_in_flight(first['x'])}, "
            f"{units.speedup(last['speedups'][primary])} at {_in_flight(last['x'])} "
            f"with the recommended schedule ({units.schedule_words(schedule)})"
        )
        under = []
        for b in settings[1:]:
            stop = stops[b]
            if stop is None:
                under.append(_still_pays(setting_label(b), last["x"], last["speedups"][b]))
            else:
                under.append(f"under the {setting_label(b)} it falls below 1× from {_in_flight(stop['x'])} ({units.speedup(stop['speedup'])})")
        if stops[primary] is not None:
            lead += f"; under {setting_label(primary)} it falls below 1× from {_in_flight(stops[primary]['x'])}"
        lead += ("; " + "; ".join(under) if under else "") + "."
    return {"lead": lead, "verdicts": verdicts, "speculates": speculates, "stops": stops}
