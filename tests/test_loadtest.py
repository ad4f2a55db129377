"""promptslim loadtest: the client's timing against an in-test streaming server with known
delays (a seam for the client, not a stand-in for a model server), buffering detection, 500
concurrent streams, and a real llama-cpp-python server."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from promptslim.cli import main
from promptslim.errors import ConfigError
from promptslim.loadsim.loadtest import (
    LoadtestOptions,
    PreparedRequest,
    RequestRecord,
    run_loadtest,
    run_stream,
    summarise,
    write_report,
)

from .llama_server import llama_server  # noqa: F401


@dataclass(frozen=True)
class StreamPlan:
    """What the in-test server does per request: wait ``ttft_s``, then ``deltas`` content
    deltas ``itl_s`` apart (or all together when ``buffered``)."""

    ttft_s: float = 0.1
    itl_s: float = 0.02
    deltas: int = 6
    buffered: bool = False


def _chunk(content: str) -> bytes:
    event = {"choices": [{"index": 0, "delta": {"content": content}}]}
    return f"data: {json.dumps(event)}\n\n".encode()


#: per request (its last message's text): perf_counter times the server sent each content delta
SENT: dict[str, list[float]] = {}


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, plan: StreamPlan
) -> None:
    """Minimal HTTP/1.1: read headers and body, answer SSE, close (close-delimited body)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        body = json.loads(await reader.readexactly(length))
        sent = SENT.setdefault(body["messages"][-1]["content"], [])
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Connection: close\r\n\r\n"
        )
        await writer.drain()
        # a role-only delta first: it is not content, so it must not end TTFT
        role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        writer.write(f"data: {json.dumps(role)}\n\n".encode())
        await writer.drain()
        await asyncio.sleep(plan.ttft_s)
        if plan.buffered:
            sent.append(time.perf_counter())
            writer.write(b"".join(_chunk(f"t{i} ") for i in range(plan.deltas)))
        else:
            for i in range(plan.deltas):
                if i:
                    await asyncio.sleep(plan.itl_s)
                sent.append(time.perf_counter())  # before the write: the client may read it at once
                writer.write(_chunk(f"t{i} "))
                await writer.drain()
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@pytest.fixture
def stream_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A streaming server on 127.0.0.1, in its own thread and event loop (so the client's
    loop cannot delay the server's sends); the plan comes from ``@pytest.mark.parametrize``."""
    plan: StreamPlan = getattr(request, "param", StreamPlan())
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        server = await asyncio.start_server(
            lambda r, w: _handle(r, w, plan), "127.0.0.1", 0, backlog=2048
        )
        holder["server"] = server
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    assert ready.wait(10), "in-test server did not start"
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1"
    finally:

        async def stop() -> None:
            server = holder["server"]
            server.close()  # type: ignore[attr-defined]
            # streams still sleeping (the timeout test) end here, while the loop still runs
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _prepared(n: int, tokens: int = 10) -> dict[str, list[PreparedRequest]]:
    run = len(SENT)  # a fresh id per request, so the server's log lines up with our records

    def body(i: int) -> dict[str, object]:
        return {
            "model": "m",
            "messages": [{"role": "user", "content": f"{run}-{i}"}],
            "stream": True,
        }

    return {"baseline": [PreparedRequest(body(i), tokens) for i in range(n)]}


def _run(url: str, n: int, **options: object) -> dict:
    opts = LoadtestOptions(url=url, requests=n, timeout_s=30, time_limit_s=120, **options)  # type: ignore[arg-type]
    return run_loadtest(opts, prepared=_prepared(n))


# ---------------------------------------------------------------- timing against known delays


def test_ttft_and_itl_match_the_servers_delays(stream_server: str) -> None:
    plan = StreamPlan()
    n = 12
    prepared = _prepared(n)
    opts = LoadtestOptions(url=stream_server, requests=n, concurrency=3, timeout_s=30)
    run = run_loadtest(opts, prepared=prepared)["configs"]["baseline"]
    records = run["records"]
    assert all(r["status"] == "ok" and r["output_tokens"] == plan.deltas for r in records)
    # the server's own send times, on the same clock: what the client should have seen
    sent = [SENT[p.body["messages"][-1]["content"]] for p in prepared["baseline"]]  # type: ignore[index]
    first_lag = [r["sent_clock_s"] + r["ttft_s"] - s[0] for r, s in zip(records, sent, strict=True)]
    itl_err = [
        got - (b - a)
        for r, s in zip(records, sent, strict=True)
        for got, a, b in zip(r["itl_s"], s, s[1:], strict=False)
    ]
    # Bounds in units of the server's gap between deltas (itl_s): a client that buffered the
    # stream would see gaps near 0, an error of a whole gap; a loaded machine delays single
    # deltas by a fraction of one, so the median is asserted tightly, the 90th percentile loosely.
    gap = plan.itl_s
    # TTFT: no earlier than the server's wait; the first token seen well within a gap of its send
    assert min(r["ttft_s"] for r in records) >= plan.ttft_s
    assert all(lag >= -0.001 for lag in first_lag)
    assert statistics.median(first_lag) < 0.5 * gap
    # ITL: the server's own gaps, as sent, and the configured one
    assert statistics.median(abs(e) for e in itl_err) < 0.5 * gap
    assert sorted(abs(e) for e in itl_err)[int(0.9 * len(itl_err))] < gap
    assert abs(statistics.median(x for r in records for x in r["itl_s"]) - gap) < 0.5 * gap
    s = run["summary"]
    assert s["ttft_ms"]["p50"] >= plan.ttft_s * 1e3
    assert abs(s["itl_ms"]["p50"] - gap * 1e3) < 0.5 * gap * 1e3
    # phases are ordered: request sent, then first byte (headers), then the first token
    for r in records:
        assert r["request_sent_s"] <= r["first_byte_s"] <= r["ttft_s"] <= r["e2e_s"]
    assert s["buffering"]["buffered"] is False
    assert s["phases_ms"]["connect"]["n"] == 12  # the server closes: every request connects


@pytest.mark.parametrize(
    "stream_server", [StreamPlan(ttft_s=0.2, deltas=8, buffered=True)], indirect=True
)
def test_buffered_stream_is_flagged(stream_server: str, tmp_path: Path) -> None:
    result = _run(stream_server, 4, concurrency=2)
    s = result["configs"]["baseline"]["summary"]
    assert s["completed"] == 4
    assert s["buffering"]["buffered"] is True and s["buffering"]["bunched"] == 4
    paths = write_report(result, tmp_path)
    assert "buffered stream" in paths["md"].read_text()
    assert paths["png"].stat().st_size > 1000


@pytest.mark.parametrize(
    "stream_server", [StreamPlan(ttft_s=0.05, itl_s=0.01, deltas=4)], indirect=True
)
def test_500_concurrent_streams_without_errors(stream_server: str) -> None:
    result = _run(stream_server, 500, concurrency=500)
    run = result["configs"]["baseline"]
    s = run["summary"]
    assert s["completed"] == 500, {r["error"] for r in run["records"] if r["error"]}
    assert s["error_rate"] == 0 and s["timeout_rate"] == 0
    # they ran together: the run took a fraction of 500 streams in a row (80 ms each), and at
    # its peak hundreds were in flight at once
    assert s["duration_s"] < 0.5 * 500 * 0.08
    events = sorted(
        [(r["sent_clock_s"], 1) for r in run["records"]]
        + [(r["sent_clock_s"] + r["e2e_s"], -1) for r in run["records"]]
    )
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak >= 250
    assert "loop_lag_ms" in run["client"] and run["client"]["cpu_s"] > 0


def test_open_loop_rate_follows_the_arrival_times(stream_server: str) -> None:
    result = _run(stream_server, 10, rate=50.0, burstiness=1.0)
    records = result["configs"]["baseline"]["records"]
    assert all(r["status"] == "ok" for r in records)
    due = [r["scheduled_s"] for r in records]
    assert due == sorted(due) and due[-1] > 0
    assert statistics.median(r["sched_delay_s"] for r in records) < 0.02


def test_closed_loop_clients_start_staggered(stream_server: str) -> None:
    result = _run(stream_server, 6, concurrency=3, stagger_s=0.2)
    records = sorted(result["configs"]["baseline"]["records"], key=lambda r: r["index"])
    assert all(r["status"] == "ok" for r in records)
    firsts = records[:3]  # client k's first request is request k
    assert [r["scheduled_s"] for r in firsts] == pytest.approx([0.0, 0.2, 0.4])
    sent = [r["sent_clock_s"] for r in firsts]
    assert all(b - a >= 0.19 for a, b in pairwise(sent))
    assert result["options"]["stagger_s"] == 0.2


@pytest.mark.parametrize("bad", [-0.5, float("inf")])
def test_a_bad_stagger_names_its_field(bad: float) -> None:
    with pytest.raises(ConfigError) as err:
        LoadtestOptions(url="http://127.0.0.1:9/v1", concurrency=2, stagger_s=bad)
    assert err.value.field == "stagger_s"


@pytest.mark.parametrize("stream_server", [StreamPlan(ttft_s=2.0)], indirect=True)
def test_timeouts_and_the_time_limit_stop_the_run(stream_server: str) -> None:
    opts = LoadtestOptions(
        url=stream_server, requests=6, concurrency=2, timeout_s=0.3, time_limit_s=1.0
    )
    result = run_loadtest(opts, prepared=_prepared(6))
    s = result["configs"]["baseline"]["summary"]
    statuses = {r["status"] for r in result["configs"]["baseline"]["records"]}
    assert s["completed"] == 0 and s["timeout_rate"] > 0
    assert statuses <= {"timeout", "cancelled"}
    assert s["duration_s"] < 3.0


@pytest.mark.parametrize("stream_server", [StreamPlan(ttft_s=0.25, deltas=2)], indirect=True)
def test_time_limit_is_shared_by_the_configs_in_turns(stream_server: str) -> None:
    # one after another, the first config used the whole limit and the second sent nothing;
    # in turns, each gets its half: both complete some, neither completes all, and each
    # says what was cut. 12 requests of >= 0.25 s each at concurrency 1 cannot fit in 1.5 s
    base = _prepared(12)["baseline"]
    prepared = {"a": base, "b": _prepared(12)["baseline"]}
    opts = LoadtestOptions(
        url=stream_server, requests=12, concurrency=1, timeout_s=5, time_limit_s=3.0, block=2
    )
    result = run_loadtest(opts, prepared=prepared)
    assert result["block"] == 2
    for label in ("a", "b"):
        run = result["configs"][label]
        s, cut = run["summary"], run["cut"]
        assert 1 <= s["completed"] < 12, label
        assert cut["share_s"] == pytest.approx(1.5)
        assert s["completed"] + cut["cancelled_in_flight"] + cut["not_sent"] == 12
        assert cut["not_sent"] > 0
        assert run["client"]["wall_s"] <= 1.5 + 0.5  # its share, give or take one cut-off
        assert [r["index"] for r in run["records"]] == list(range(12))
    # the turns interleave: a's first block was sent before b's, and b's before a's second
    sent = {label: [r["sent_clock_s"] for r in result["configs"][label]["records"]]
            for label in ("a", "b")}  # fmt: skip
    assert sent["a"][0] < sent["b"][0] < sent["a"][2]


def test_connection_refused_is_an_error_not_a_crash() -> None:
    from .llama_server import free_port

    result = _run(f"http://127.0.0.1:{free_port()}/v1", 3, concurrency=1)
    s = result["configs"]["baseline"]["summary"]
    assert s["error_rate"] == 1.0 and s["completed"] == 0


def test_summary_buckets_by_prompt_length() -> None:
    records = []
    for i, tokens in enumerate([100, 100, 3000]):
        r = RequestRecord(i, "baseline", tokens, status="ok", ttft_s=0.1 * (i + 1), e2e_s=1.0)
        r.delta_times_s = [r.ttft_s, r.ttft_s + 0.02]
        r.output_tokens = 2
        records.append(r)
    s = summarise(records, wall_s=2.0, slo_ttft_ms=150)
    assert set(s["by_prompt_bucket"]) == {"0-255", "2048-4095"}
    assert s["by_prompt_bucket"]["2048-4095"]["ttft_ms"]["p99"] == pytest.approx(300)
    assert s["goodput"] == pytest.approx(0.5) and s["slo_attainment"] == pytest.approx(1 / 3)
    assert s["itl_ms"]["p50"] == pytest.approx(20)


# ---------------------------------------------------------------- the CLI and a real server


def test_cli_loadtest_writes_reports(
    stream_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([
        "loadtest", "--url", stream_server, "--dataset", "builtin:chat", "--concurrency", "2",
        "--requests", "4", "--configs", "baseline,prefix", "--slo-ttft", "500", "--out", str(tmp_path), "--json",
    ])  # fmt: skip
    assert code == 0
    summaries = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summaries) == {"baseline", "prefix"}
    assert all(s["completed"] == 4 for s in summaries.values())
    assert {p.name for p in tmp_path.iterdir()} >= {"loadtest.json", "loadtest.md", "loadtest.png"}


def test_cli_rejects_missing_load(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["loadtest", "--url", "http://127.0.0.1:1/v1", "--requests", "2"]) == 2
    assert "concurrency" in capsys.readouterr().err


@pytest.mark.slow
def test_against_a_real_llama_cpp_server(llama_server: str, tmp_path: Path) -> None:  # noqa: F811
    body = {"model": "m", "max_tokens": 8, "temperature": 0.0, "stream": True}
    prepared = {
        "baseline": [
            PreparedRequest(
                {**body, "messages": [{"role": "user", "content": f"Say hello to number {i}."}]}, 8
            )
            for i in range(6)
        ]
    }
    opts = LoadtestOptions(
        url=llama_server,
        requests=6,
        concurrency=2,
        timeout_s=60,
        time_limit_s=180,
        slo_ttft_ms=60_000,
    )
    result = run_loadtest(opts, prepared=prepared)
    s = result["configs"]["baseline"]["summary"]
    assert s["completed"] == 6 and s["error_rate"] == 0
    assert s["ttft_ms"]["n"] == 6 and s["ttft_ms"]["p50"] > 0
    assert s["e2el_ms"]["p50"] >= s["ttft_ms"]["p50"]
    assert s["output_token_throughput"] > 0 and s["goodput"] > 0
    assert s["buffering"]["buffered"] is False
    # kept alive, as real clients do: one connection per concurrent client and block (each
    # block of the interleaved run has a client of its own), not one per request
    blocks = -(-6 // (2 * 2))  # default_block: two rounds of the concurrency
    assert s["phases_ms"]["connect"]["n"] <= 2 * blocks < 6
    write_report(result, tmp_path)
    assert (tmp_path / "loadtest.md").read_text().count("ttft_ms") == 1


def test_interleaving_needs_streams_of_one_length() -> None:
    from promptslim import ConfigError
    from promptslim.loadsim.interleave import Target, run_interleaved

    one, two = _prepared(1)["baseline"], _prepared(2)["baseline"]
    url = "http://127.0.0.1:1/v1"
    with pytest.raises(ConfigError) as info:
        run_interleaved({"a": Target(url, one), "b": Target(url, two)}, concurrency=1)
    assert info.value.field == "requests"
    with pytest.raises(ConfigError) as info:
        LoadtestOptions(url=url, concurrency=1, block=0)
    assert info.value.field == "block"


def test_each_request_sends_its_own_headers_on_top_of_the_runs() -> None:
    """A mixed stream's requests differ in their priority class: each one's headers go with
    it, over the run's."""
    pytest.importorskip("starlette")
    from .test_serve import Seam, ThreadServer

    seam = Seam()
    body = {"model": "seam", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    reqs = [
        PreparedRequest(body, 1, headers={"X-PromptSlim-Priority": "interactive"}),
        PreparedRequest(body, 1),
    ]
    with ThreadServer(seam.app) as upstream:
        records, _ = asyncio.run(
            run_stream(upstream.url + "/v1", reqs, concurrency=1, headers={"X-Run": "r1"})
        )
    assert [r.status for r in records] == ["ok", "ok"]
    assert [h.get("x-promptslim-priority") for h in seam.headers] == ["interactive", None]
    assert [h.get("x-run") for h in seam.headers] == ["r1", "r1"]
