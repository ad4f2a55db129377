import json
import subprocess
import sys

from promptslim.cli import main

from .conftest import chat_body


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "promptslim", *args], input=stdin, capture_output=True, timeout=120,
        check=False,
    )


def test_compress_example_writes_body_and_report(tmp_path) -> None:
    out = tmp_path / "out.json"
    proc = run_cli("compress", "--example", "-o", str(out), "--report", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    body = json.loads(out.read_text())
    assert body["messages"][-1]["role"] == "user"
    report = json.loads(proc.stdout)
    assert report["tokens_in"] > 0 and report["stages"]


def test_compress_stdin_to_stdout(tmp_path) -> None:
    body = chat_body(2)
    proc = run_cli("compress", "-", "--report", "table", stdin=json.dumps(body).encode())
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["messages"][-1] == body["messages"][-1]
    assert b"tokens in" in proc.stderr


def test_bad_input_exits_2_with_one_line_naming_the_field(tmp_path) -> None:
    cases = {
        b'{"messages": [{"role": "wizard", "content": "x"}]}': b"messages[0].role",
        b'{"messages": [': b"invalid JSON at line",
        b"\x00\xff\xfe": b"not UTF-8",
        b'[1, 2]': b"body",
    }
    for data, needle in cases.items():
        proc = run_cli("compress", "-", stdin=data)
        assert proc.returncode == 2, (data, proc.stderr)
        assert needle in proc.stderr
        assert b"Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_file_and_bad_config(tmp_path, capsys) -> None:
    assert main(["compress", str(tmp_path / "missing.json")]) == 2
    request = tmp_path / "r.json"
    request.write_text(json.dumps(chat_body(1)))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"stages": [{"name": "nope"}]}))
    assert main(["compress", str(request), "--config", str(config), "-o", str(tmp_path / "o.json")]) == 2
    assert "stages[0].name" in capsys.readouterr().err


def test_infeasible_budget_exits_3(tmp_path) -> None:
    request = tmp_path / "r.json"
    request.write_text(json.dumps(chat_body(1)))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"budget": {"total": 5}, "stages": [{"name": "passthrough"}]}))
    assert main(["compress", str(request), "--config", str(config), "-o", str(tmp_path / "o.json")]) == 3


def test_budget_flag_sets_the_total_and_keeps_the_config_caps(tmp_path, capsys) -> None:
    request = tmp_path / "r.json"
    request.write_text(json.dumps(chat_body(40)))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"budget": {"total": 100_000, "history": 90},
                                  "stages": [{"name": "history", "strategy": "last"}]}))
    args = ["compress", str(request), "--config", str(config), "--report", "json"]

    def run(*extra: str) -> tuple[int, dict]:
        code = main([*args, *extra, "-o", str(tmp_path / "out.json")])
        report = json.loads(capsys.readouterr().out) if code == 0 else {}
        return code, report

    _, as_configured = run()
    # a loose total: the config's history cap (90) still binds, so nothing changes
    assert run("--budget", "5000")[1]["tokens_out"] == as_configured["tokens_out"]
    # a tight total binds instead
    _, tight = run("--budget", "60")
    assert tight["tokens_out"] <= 60 < as_configured["tokens_out"]
    body = json.loads((tmp_path / "out.json").read_text())
    assert body["messages"][-1] == chat_body(40)["messages"][-1]
    # infeasible and invalid budgets: exit 3 and exit 2 (one line naming the flag)
    assert run("--budget", "5")[0] == 3
    capsys.readouterr()
    assert run("--budget", "0")[0] == 2
    assert "--budget" in capsys.readouterr().err


def test_serve_budget_flag_reaches_the_pipeline_and_its_workers(
    tmp_path, monkeypatch, capsys
) -> None:
    import promptslim.serve as serve_module
    from promptslim.serve.server import _describable

    handed: list = []  # what cmd_serve hands to the server, instead of serving

    def keep(config, *, pipeline, log_level) -> None:
        handed.append(pipeline)

    monkeypatch.setattr(serve_module, "serve", keep)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"budget": {"total": 9000, "history": 90},
                                  "stages": [{"name": "history"}]}))
    base = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--config", str(config)]
    assert main([*base, "--budget", "700"]) == 0
    assert main(base) == 0
    flagged, as_configured = handed
    assert (flagged.budget.total, flagged.budget.history) == (700, 90)
    assert as_configured.budget.total == 9000
    # workers rebuild the pipeline from its config: the flag's total goes with it
    assert _describable(flagged)["budget"] == {"total": 700, "history": 90}
    for bad in (["--budget", "0"], ["--no-pipeline", "--budget", "700"]):
        assert main([*base, *bad]) == 2
        assert "--budget" in capsys.readouterr().err
    assert len(handed) == 2


def test_version(capsys) -> None:
    import pytest

    import promptslim

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"promptslim {promptslim.__version__}"
