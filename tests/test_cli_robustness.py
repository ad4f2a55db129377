"""Inputs found by fuzzing the CLI, the simulator and the proxy: each is bad input (exit 2, one
line naming the field, flag or line, never a traceback) or is handled without losing data.

Commands run in this process through ``main`` where they end quickly whatever happens, and in
a subprocess with a timeout where a regression would hang or serve forever."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptslim.cli import main

from .llama_server import free_port

COST = {"a": 0.01, "b": 0.001, "decode_step_s": 0.02}
SIM = ["--requests", "3", "--concurrency", "1"]


def run_cli(*args: str, stdin: bytes | None = None, timeout: float = 60) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "promptslim", *args], input=stdin, capture_output=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def bad_input(code: int, err: str, needle: str) -> None:
    """Exit 2, one line on stderr naming ``needle``, no traceback."""
    assert code == 2, err
    assert needle in err, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def write(path: Path, data: str | bytes) -> str:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


def nq_lines(n: int) -> list[str]:
    return [
        json.dumps({"question": f"q{i}", "answers": ["a"], "ctxs": [{"text": f"passage {i}"}]})
        for i in range(n)
    ]


# ---------------------------------------------------------------- 1. cost models


@pytest.mark.parametrize("text", ['{"a":NaN,"b":0.001}', '{"points":[[256,NaN],[512,0.9]]}'])
def test_nan_cost_model_is_rejected_instead_of_hanging(tmp_path: Path, text: str) -> None:
    cost = write(tmp_path / "c.json", text)
    proc = run_cli("simulate", "--cost-model", cost, *SIM)
    bad_input(proc.returncode, proc.stderr.decode(), "expected a finite number")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"a":Infinity,"b":0.001}', "a:"),
        ('{"a":"abc","b":0.001}', "a:"),
        ('{"a":null,"b":0.001}', "a:"),
        ('{"a":[1],"b":0.001}', "a:"),
        ('{"a":true,"b":0.001}', "a:"),
        ('{"b":0.001,"decode_step_s":"fast"}', "decode_step_s:"),
        ('{"points":[[-256,0.4],[512,0.9]]}', "points[0]"),
        ('{"points":[[0,0],[512,0.9]]}', "points[0]"),
        ('{"points":[[256,0.4],[512,-0.9]]}', "points[1]"),
        ('{"points":[["256","0.4"],[512,0.9]]}', "points[0]"),
        ("{}", "cost_model: no prefill cost"),
        ('{"decode_step_s": 0.02}', "cost_model: no prefill cost"),
    ],
)
def test_bad_cost_model_values_name_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str
) -> None:
    cost = write(tmp_path / "c.json", text)
    bad_input(main(["simulate", "--cost-model", cost, *SIM]), capsys.readouterr().err, field)


def test_plan_rejects_an_infinite_cost_model_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = write(tmp_path / "c.json", '{"a":Infinity,"b":0.001}')
    out = tmp_path / "plan.json"
    code = main(["plan", "--cost-model", cost, "--ttft-p99", "5", *SIM, "-o", str(out)])
    bad_input(code, capsys.readouterr().err, "a:")
    assert not out.exists()


def test_cost_model_file_encoding_and_nesting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_utf8 = write(tmp_path / "bin.json", b"\xff\xfe{}")
    bad_input(main(["simulate", "--cost-model", not_utf8, *SIM]), capsys.readouterr().err, "UTF-8")
    deep = write(tmp_path / "deep.json", "[" * 5000 + "]" * 5000)
    bad_input(main(["simulate", "--cost-model", deep, *SIM]), capsys.readouterr().err, "deep")
    # a BOM an editor left is not an error
    bom = write(tmp_path / "bom.json", b"\xef\xbb\xbf" + json.dumps(COST).encode())
    assert main(["simulate", "--cost-model", bom, *SIM, "--json"]) == 0


def test_coefficients_that_overflow_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = write(tmp_path / "c.json", '{"b": 1e308}')
    bad_input(main(["simulate", "--cost-model", cost, *SIM]), capsys.readouterr().err, "cost_model")


# ---------------------------------------------------------------- 2. surrogates, deep nesting


LONE_SURROGATE = b'{"messages": [{"role": "user", "content": "hi \\ud800 there"}]}'


def test_compress_keeps_a_lone_surrogate_as_an_escape(tmp_path: Path) -> None:
    source = write(tmp_path / "in.json", LONE_SURROGATE)
    out = tmp_path / "out.json"
    for args in (["-o", str(out)], []):
        proc = run_cli("compress", source, "--report", "none", *args)
        assert proc.returncode == 0, proc.stderr.decode()
    for text in (out.read_text(encoding="utf-8"), proc.stdout.decode()):
        assert "\\ud800" in text
        assert json.loads(text)["messages"][0]["content"] == "hi \ud800 there"


def test_deeply_nested_json_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = write(tmp_path / "deep.json", "[" * 5000 + "]" * 5000)
    for command in (["compress", deep], ["lint", deep]):
        bad_input(main(command), capsys.readouterr().err, "nested too deeply")


@pytest.fixture(scope="module")
def proxy_on_seam() -> Iterator[tuple[str, Any]]:
    """The proxy, with a pipeline, in front of the in-test upstream of ``test_serve``."""
    from promptslim import Pipeline

    from .test_serve import Seam, ThreadServer, proxy

    seam = Seam()
    pipeline = Pipeline.from_config({"stages": [{"name": "passthrough"}]})
    with (
        ThreadServer(seam.app) as upstream,
        proxy(upstream.url + "/v1", pipeline=pipeline, warm_up=False) as (url, _),
    ):
        yield url, seam


def test_proxy_forwards_a_lone_surrogate_and_rejects_deep_nesting(
    proxy_on_seam: tuple[str, Any],
) -> None:
    httpx = pytest.importorskip("httpx")
    url, seam = proxy_on_seam
    chat = url + "/v1/chat/completions"
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=30) as client:
        surrogate = client.post(chat, content=LONE_SURROGATE, headers=headers)
        deep = client.post(chat, content=b"[" * 5000 + b"]" * 5000, headers=headers)
    assert surrogate.status_code == 200, surrogate.text
    forwarded = json.loads(seam.bodies[-1])
    assert forwarded["messages"][0]["content"] == "hi \ud800 there"
    assert deep.status_code == 400 and deep.json()["error"]["code"] == "invalid_json"


# ---------------------------------------------------------------- 3. output paths


def test_unwritable_outputs_name_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = write(tmp_path / "c.json", json.dumps(COST))
    folder = tmp_path / "folder"
    folder.mkdir()
    missing = str(tmp_path / "missing" / "x.json")
    a_file = write(tmp_path / "file", "x")
    simulate = ["simulate", "--cost-model", cost, *SIM]
    bench = ["bench", "--model", "openai:http://127.0.0.1:9/v1", "--limit", "1"]
    loadtest = ["loadtest", "--url", "http://127.0.0.1:9/v1", "--requests", "1"]
    cases = [
        (["compress", "--example", "-o", str(folder)], "-o"),
        (["compress", "--example", "-o", missing], "-o"),
        (["plan", "--cost-model", cost, "--ttft-p99", "5", *SIM, "-o", str(folder)], "-o"),
        (["plan", "--cost-model", cost, "--ttft-p99", "5", *SIM, "-o", missing], "-o"),
        ([*simulate, "--out", str(folder)], "--out"),
        ([*simulate, "--out", missing], "--out"),
        ([*simulate, "--plot", str(folder)], "--plot"),
        ([*bench, "--out", a_file], "--out"),
        ([*loadtest, "--concurrency", "1", "--out", a_file], "--out"),
    ]
    for args, flag in cases:
        bad_input(main(args), capsys.readouterr().err, f"{flag}: ")
    # a folder is never written beside the name given
    assert not (tmp_path / "folder.png").exists()


def test_plot_is_written_at_the_name_given(tmp_path: Path) -> None:
    cost = write(tmp_path / "c.json", json.dumps(COST))
    plot = tmp_path / "sweep"  # no suffix: matplotlib would have written sweep.png
    code = main(["simulate", "--cost-model", cost, *SIM, "--sweep", "1,2", "--plot", str(plot)])
    assert code == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


# ---------------------------------------------------------------- 4. --sweep


@pytest.mark.parametrize("sweep", ["1,x", ",", "0,2", "-1"])
def test_bad_sweep_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: str
) -> None:
    cost = write(tmp_path / "c.json", json.dumps(COST))
    code = main(["simulate", "--cost-model", cost, *SIM, f"--sweep={sweep}"])
    bad_input(code, capsys.readouterr().err, "--sweep")


def test_a_negative_seed_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = write(tmp_path / "c.json", json.dumps(COST))
    code = main(["simulate", "--cost-model", cost, *SIM, "--seed", "-1"])
    bad_input(code, capsys.readouterr().err, "--seed")


@pytest.mark.parametrize("command", ["simulate", "plan"])
@pytest.mark.parametrize("flag", ["--output-tokens", "--requests"])
def test_zero_counts_name_their_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, flag: str
) -> None:
    cost = write(tmp_path / "c.json", json.dumps(COST))
    plan = ["--ttft-p99", "1", "--concurrency", "4", "-o", str(tmp_path / "plan.json")]
    extra = plan if command == "plan" else []
    code = main([command, "--cost-model", cost, "--dataset", "builtin:rag", *extra, flag, "0"])
    bad_input(code, capsys.readouterr().err, f"{flag}: ")


# ---------------------------------------------------------------- 5. serve ports


def test_serve_rejects_ports_out_of_range() -> None:
    base = ["serve", "--no-pipeline", "--no-warm-up"]
    port = str(free_port())
    for args, needle in (
        (["--upstream", "http://127.0.0.1:9/v1", "--port", "70000"], "port"),
        (["--upstream", "http://127.0.0.1:99999/v1", "--port", port], "upstream"),
        (["--upstream", "http://127.0.0.1:0/v1", "--port", port], "upstream"),
    ):
        proc = run_cli(*base, *args, timeout=60)
        bad_input(proc.returncode, proc.stderr.decode(), needle)


def test_serve_on_a_busy_port_is_not_budget_infeasible() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for workers in ("1", "2"):
            proc = run_cli(
                "serve", "--upstream", "http://127.0.0.1:9/v1", "--no-pipeline", "--no-warm-up",
                "--port", port, "--workers", workers,
            )  # fmt: skip
            bad_input(proc.returncode, proc.stderr.decode(), "port")
            assert "in use" in proc.stderr.decode()


# ---------------------------------------------------------------- 6. loadtest


def test_loadtest_validates_its_url_port_and_slo(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["loadtest", "--requests", "1", "--concurrency", "1"]
    code = main([*base, "--url", "http://127.0.0.1:99999/v1"])
    bad_input(code, capsys.readouterr().err, "url")
    code = main([*base, "--url", "http://127.0.0.1:9/v1", "--slo-ttft", "-5"])
    bad_input(code, capsys.readouterr().err, "slo_ttft")


class _BadUsageHandler(http.server.BaseHTTPRequestHandler):
    """An upstream whose stream reports usage as a string: not an httpx error, and once the
    end of the client that met it (the rest of its requests went as "cancelled")."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
        usage = {"choices": [], "usage": {"prompt_tokens": "many", "completion_tokens": 1}}
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in (chunk, usage)) + "data: [DONE]\n\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_unexpected_failure_is_that_requests_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BadUsageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        code = main([
            "loadtest", "--url", f"http://127.0.0.1:{server.server_address[1]}/v1",
            "--requests", "3", "--concurrency", "1", "--timeout", "10", "--time-limit", "60",
            "--out", str(tmp_path / "lt"), "--json",
        ])  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "never retrieved" not in captured.err
    summary = json.loads(captured.out)["baseline"]
    assert summary["cancelled"] == 0 and summary["error_rate"] == 1.0
    records = json.loads((tmp_path / "lt" / "loadtest.json").read_text())
    errors = {r["error"] for r in records["configs"]["baseline"]["records"]}
    assert all(e and e.startswith("ValueError") for e in errors), errors


# ---------------------------------------------------------------- 7. skipped dataset lines


def test_simulate_plan_and_loadtest_report_skipped_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = nq_lines(3)
    lines[1] = "{bad"
    dataset = "nq:" + write(tmp_path / "nq.jsonl", "\n".join(lines) + "\n")
    cost = write(tmp_path / "c.json", json.dumps(COST))
    server = ["--cost-model", cost, "--dataset", dataset, *SIM]
    assert main(["simulate", *server]) == 0
    assert "nq.jsonl:2" in capsys.readouterr().err
    assert main(["plan", *server, "--ttft-p99", "5", "-o", str(tmp_path / "p.json")]) == 0
    assert "nq.jsonl:2" in capsys.readouterr().err
    main(["loadtest", "--url", "http://127.0.0.1:9/v1", "--dataset", dataset, "--requests", "3",
          "--concurrency", "1", "--timeout", "2", "--out", str(tmp_path / "lt")])  # fmt: skip
    assert "nq.jsonl:2" in capsys.readouterr().err


def test_a_bom_on_a_jsonl_dataset_is_not_a_bad_first_line(tmp_path: Path) -> None:
    from promptslim.bench.datasets import load_dataset

    path = write(tmp_path / "nq.jsonl", b"\xef\xbb\xbf" + "\n".join(nq_lines(3)).encode())
    loaded = load_dataset(f"nq:{path}")
    assert not loaded.errors and len(loaded.items) == 3


# ---------------------------------------------------------------- 8. JSONL line ends


SEPARATORS = "a\u2028b\u2029c\x85d"


def test_lint_splits_jsonl_at_newlines_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"messages": [{"role": "system", "content": SEPARATORS},
                         {"role": "user", "content": "q"}]}  # fmt: skip
    line = json.dumps(body, ensure_ascii=False)
    path = write(tmp_path / "r.jsonl", f"{line}\r\n{line}\n")
    assert main(["lint", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2


def test_bench_rows_with_line_separators_read_back(tmp_path: Path) -> None:
    from promptslim.bench.report import read_rows, row_line
    from promptslim.bench.runner import ItemResult

    rows = [ItemResult("baseline", f"i{i}", prediction=SEPARATORS) for i in range(2)]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(row_line(r) for r in rows), encoding="utf-8")
    assert [r.prediction for r in read_rows(path)] == [SEPARATORS] * 2


def test_llama_perf_lines_split_at_newlines_only() -> None:
    from promptslim.loadsim.calibrate import parse_llama_perf

    log = "prompt eval time =\x85 10.00 ms / 5 tokens\n       eval time = 8.00 ms / 4 runs\n"
    assert len(parse_llama_perf(log)) == 1


# ---------------------------------------------------------------- 9. lint line numbers


def test_lint_reports_the_real_line_of_a_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretty = '{\n  "messages": [\n    {"role": "user", "content": "hi"},\n  ]\n}\n'
    path = write(tmp_path / "r.json", pretty)
    bad_input(main(["lint", path]), capsys.readouterr().err, "r.json:4: invalid JSON at column 3")
    line = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    path = write(tmp_path / "r.jsonl", f"{line}\n{{bad\n")
    bad_input(main(["lint", path]), capsys.readouterr().err, "r.jsonl:2: invalid JSON")


# ---------------------------------------------------------------- 10. bench counts


BAD_COUNTS = [("--limit", "0"), ("--limit", "-1"), ("--max-new-tokens", "0"),
              ("--max-new-tokens", "-3"), ("--repeats", "0")]  # fmt: skip


@pytest.mark.parametrize(("flag", "value"), BAD_COUNTS)
def test_bench_counts_must_be_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    code = main([
        "bench", "--model", "openai:http://127.0.0.1:9/v1", "--configs", "baseline",
        "--out", str(tmp_path / "out"), flag, value, *(["--limit", "1"] if flag != "--limit" else []),
    ])  # fmt: skip
    bad_input(code, capsys.readouterr().err, flag)


# ---------------------------------------------------------------- 11. compress IN --example


def test_compress_input_and_example_are_exclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "in.json", LONE_SURROGATE)
    code = main(["compress", source, "--example", "-o", str(tmp_path / "o.json")])
    bad_input(code, capsys.readouterr().err, "--example")
    assert not (tmp_path / "o.json").exists()
