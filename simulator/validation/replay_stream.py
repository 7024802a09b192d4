"""One replayed request: send it, time its stream, and turn what came back into a record.

Timing follows ``vllm bench serve`` (TTFT, E2E and TPOT from the content chunks on the client's
clock); every failure becomes a record with a status (:data:`replay_files.STATUSES`), never an
exception, so the client loop (:mod:`replay`) only schedules requests and writes records.
"""

from __future__ import annotations

import json
from typing import Optional

import httpx
from httpx_sse import SSEError, aconnect_sse

from simulator.validation.workload import Request


async def stream_one(client: httpx.AsyncClient, request: Request, body: dict, clock, scheduled_s: float, t0: float, endpoint: str = "/v1/completions") -> dict:
    """Send one request and time its stream; every failure becomes a record, never an exception."""
    send = clock()
    record = {
        "request_id": request.request_id,
        "status": "ok",
        "error": None,
        "http_status": None,
        "expected_output_tokens": request.output_tokens,
        "scheduled_s": round(scheduled_s, 6),
        "send_s": round(send - t0, 6),
        "send_lag_s": round(send - t0 - scheduled_s, 6),
        "chunks": [],  # [seconds after send, tokens in the chunk or null]
        "completion_tokens": None,
        "streamed_tokens": None,
        "length_mismatch": None,
        "ttft_s": None,
        "e2e_s": None,
        "tpot_s": None,
        "done_s": None,
        "finish_reason": None,  # the last one the stream gave ("length": max_tokens reached)
        "client_handling_s": 0.0,
    }
    handling = 0.0
    finished = False
    try:
        async with aconnect_sse(client, "POST", endpoint, json=body) as source:
            response = source.response
            record["http_status"] = response.status_code
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", errors="replace")
                return _failed(record, "http_error", f"HTTP {response.status_code}: {text[:200]}")
            async for event in source.aiter_sse():
                arrived = clock()
                if event.data.strip() == "[DONE]":
                    record["done_s"] = round(arrived - send, 6)
                    finished = True
                    break
                problem = _take_chunk(record, event.data, arrived - send)
                handling += clock() - arrived
                if problem:
                    return _failed(record, *problem)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as err:
        # Before TimeoutException, whose subclasses ConnectTimeout and PoolTimeout are: the
        # request never reached the server, so it is resent (connection_error).
        return _failed(record, "connection_error", f"{type(err).__name__}: could not connect ({err or 'timed out'})")
    except httpx.TimeoutException as err:
        return _failed(record, "timeout", f"{type(err).__name__}: no data for longer than the client timeout")
    except (httpx.RemoteProtocolError, httpx.ReadError) as err:
        return _failed(record, "dropped_stream", f"{type(err).__name__}: {err}")
    except SSEError as err:
        return _failed(record, "malformed_sse", str(err))
    except httpx.HTTPError as err:
        return _failed(record, "dropped_stream", f"{type(err).__name__}: {err}")
    finally:
        record["client_handling_s"] = round(handling, 9)
    if not record["chunks"]:
        return _failed(record, "stream_error", "the stream carried no tokens" + ("" if finished else " and ended without data: [DONE]"))
    if not finished:
        # vllm bench serve's rule: a stream that closed cleanly after a content chunk is a
        # success, [DONE] or not; a cut connection raised above and is a failure.  The length
        # check below still makes a stream that stopped short a failure ("short").
        record["note"] = "the stream ended without data: [DONE]"
    _derive_latencies(record)
    return record


def _take_chunk(record: dict, data: str, since_send: float) -> Optional[tuple[str, str]]:
    """Record one SSE event; returns (status, message) when the event is a failure."""
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        return "malformed_sse", f"event data is not JSON: {data[:80]!r}"
    if not isinstance(payload, dict):
        return "malformed_sse", f"event data is not a JSON object: {data[:80]!r}"
    if payload.get("error") is not None:
        return "stream_error", f"server error in stream: {json.dumps(payload['error'])[:200]}"
    choices = payload.get("choices")
    if choices:
        choice = choices[0] if isinstance(choices[0], dict) else {}
        ids = choice.get("token_ids")
        record["chunks"].append([round(since_send, 6), len(ids) if isinstance(ids, list) else None])
        if choice.get("finish_reason") is not None:
            record["finish_reason"] = str(choice["finish_reason"])
    usage = payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        record["completion_tokens"] = usage["completion_tokens"]
    return None


def _derive_latencies(record: dict) -> None:
    """vllm bench serve's definitions: TTFT = first content chunk, E2E = last content chunk,
    TPOT = (E2E - TTFT) / (tokens - 1) with tokens from ``usage.completion_tokens``.

    A stream that delivered fewer tokens than asked (by its token ids or its usage) and closed
    without an error is recorded as ``short``, a failure: the workload fixes every length
    (``min_tokens`` = ``max_tokens``, EOS ignored), so a shorter answer is not the request that
    was measured or simulated.  vllm bench serve counts such a stream successful once a chunk
    arrived; the harness does not, so it is resent with ``--retry-failed``, left out of every
    statistic and of the comparison, and makes replay exit 3."""
    chunks = record["chunks"]
    counts = [c[1] for c in chunks]
    record["streamed_tokens"] = sum(counts) if all(c is not None for c in counts) else None
    tokens = record["completion_tokens"] if record["completion_tokens"] is not None else record["streamed_tokens"]
    expected = record["expected_output_tokens"]
    known = [n for n in (record["streamed_tokens"], record["completion_tokens"]) if n is not None]
    mismatch = []
    if not known:
        mismatch.append("the server reported no usage and no token ids, so the length is unverified")
    elif tokens != expected and min(known) >= expected:
        mismatch.append(f"generated {tokens} tokens, asked for {expected}")
    if record["completion_tokens"] is not None and record["streamed_tokens"] is not None and record["completion_tokens"] != record["streamed_tokens"]:
        mismatch.append(f"usage says {record['completion_tokens']} tokens but the chunks carried {record['streamed_tokens']}")
    record["length_mismatch"] = bool(mismatch)
    if mismatch:
        record["error"] = "; ".join(mismatch)
    record["ttft_s"] = chunks[0][0]
    record["e2e_s"] = chunks[-1][0]
    record["tpot_s"] = round((chunks[-1][0] - chunks[0][0]) / (tokens - 1), 9) if tokens and tokens > 1 else None
    short = _short_by(record, known, expected)
    if short:
        record["status"] = "short"
        record["error"] = short + (f"; {record['error']}" if mismatch else "")


def _short_by(record: dict, known: list, expected: int) -> Optional[str]:
    """Why a stream that closed cleanly stopped before the asked length, or None.

    With a token count (token ids or usage) the count decides.  Without one (``--no-token-ids``
    and no usage: a stream cut off before its usage chunk) only ``finish_reason`` can tell: the
    workload asks for exactly ``max_tokens`` (``min_tokens`` = ``max_tokens``, EOS ignored), so
    a complete answer ends with ``finish_reason`` ``"length"``, and a stream without it is short:
    whatever the chunks held, it is not the request that was measured or simulated."""
    how = "" if record.get("done_s") is not None else (" without usage or data: [DONE]" if record["completion_tokens"] is None else " without data: [DONE]")
    if known:
        return f"the stream ended cleanly after {min(known)} of the {expected} tokens asked for{how}" if min(known) < expected else None
    if record.get("finish_reason") == "length":
        return None
    return (
        f"the stream ended cleanly after {len(record['chunks'])} content chunk(s){how}, without a token count (no usage, no token ids) "
        f"and without finish_reason 'length', so it stopped before the {expected} tokens asked for"
    )


def _failed(record: dict, status: str, message: str) -> dict:
    record["status"] = status
    record["error"] = message
    return record