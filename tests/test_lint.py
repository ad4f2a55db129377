"""``promptslim lint``: exit codes, what it reports, hit rates before and after."""

from __future__ import annotations

import json

from promptslim.cli import main

POLICY = "Follow the refund policy exactly. " * 200


def stream(vary: bool) -> str:
    lines = []
    for i in range(4):
        stamp = f"Today is 2024-05-0{i + 1 if vary else 1}. Request id 123e4567-e89b-12d3-a456-42661417400{i if vary else 0}."
        body = {
            "model": "m",
            "messages": [
                {"role": "system", "content": stamp + "\n" + POLICY},
                {"role": "user", "content": f"question {i}"},
            ],
        }
        lines.append(json.dumps(body))
    return "\n".join(lines) + "\n"


def test_varying_prefix_exits_1_and_after_beats_before(tmp_path, capsys) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(stream(vary=True))
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr().out
    assert "iso_datetime '2024-05-02'" in out and "uuid" in out
    assert f"{path}:3: stable-prefix fingerprint" in out
    assert main(["lint", "--json", str(path)]) == 1
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["prefix_varies"] is True and summary["requests"] == 4
    before, after = summary["hit_rate"]["before"], summary["hit_rate"]["after"]
    assert before["vllm"] < 0.05  # the date is in the first block: nothing is reusable
    assert after["vllm"] > 0.6 and after["openai"] > 0.6 and after["anthropic"] > 0.6


def test_stable_prefix_exits_0(tmp_path, capsys) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([json.loads(line) for line in stream(vary=False).splitlines()]))
    assert main(["lint", str(path)]) == 0
    assert "is identical" in capsys.readouterr().out


def test_unreadable_line_exits_2_naming_the_line(tmp_path, capsys) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(stream(vary=False) + "{not json\n")
    assert main(["lint", str(path)]) == 2
    assert f"{path}:5: invalid JSON" in capsys.readouterr().err
    path.write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": 3}\n')
    assert main(["lint", str(path)]) == 2
    assert ":2: " in capsys.readouterr().err
    assert main(["lint", str(tmp_path / "missing.jsonl")]) == 2
