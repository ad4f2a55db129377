"""A kept window of an indented record (a YAML service, a function) keeps the rest of the
record: the line that answers is often a few lines below the one naming the subject."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_options import DEFAULT_WINDOW_CHARS
from promptslim.stages.window_select import select_units, selected_text
from promptslim.stages.windows import Window, Windowed, split_windows
from promptslim.types import Document, Message, Request

FIELDS = ("image", "replicas", "cpu", "memory", "port", "owner", "region", "retries")


def _services(rng: random.Random, names: list[str], timeouts: dict[str, int]) -> str:
    """A compose-like YAML file: each service's fields below it, the timeout among them."""
    lines = ["services:"]
    for name in names:
        fields = [
            f"    {f}: {rng.choice(['a1', 'b2', 'eu', 'us'])}-{rng.randrange(99)}" for f in FIELDS
        ]
        fields.insert(rng.randrange(len(fields) + 1), f"    timeout: {timeouts[name]}ms")
        lines += [f"  {name}:", *fields]
    return "\n".join(lines)


def _windowed(text: str, size: int = 200) -> Windowed:
    return split_windows([text], [None], window_chars=size, overlap=0, max_windows=256)


def _kept_with_best(text: str, marker: str, size: int = 200) -> str:
    """The text kept when the window holding ``marker`` is the only one chosen."""
    windowed = _windowed(text, size)
    scores = [1.0 if marker in w.text else 0.0 for w in windowed.windows]
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=1, text=text)
    assert keep is not None
    return selected_text(text, windowed.units[0], keep)


def test_a_window_cut_inside_a_service_keeps_its_remaining_fields() -> None:
    rng = random.Random(1)
    names = [f"svc-{i}" for i in range(12)]
    timeouts = {n: 1000 + i for i, n in enumerate(names)}
    text = _services(rng, names, timeouts)
    windowed = _windowed(text)
    for name in names:
        kept = _kept_with_best(text, f"  {name}:")
        assert f"timeout: {timeouts[name]}ms" in kept, name
        # the rest of that service, not the rest of the file: at most the next service's head
        later = names[names.index(name) + 2 :]
        assert not any(f"  {n}:" in kept for n in later)
    assert len(windowed.windows) > 4  # the services were cut into several windows


def test_flat_rows_and_blank_lines_end_a_record() -> None:
    # rows at one indent are records of their own, as before: the window alone
    rows = "".join(f"host-{i:02d} runs in eu-west-{i % 3} on port 80{i:02d}.\n" for i in range(12))
    windowed = _windowed(rows, size=100)
    scores = [0.0] * len(windowed.windows)
    scores[1] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=1, text=rows)
    assert keep is not None
    assert sum(keep) == windowed.windows[1].last - windowed.windows[1].first
    # a function's body below its name, up to the blank line after it
    code = "\n\n".join(
        f'def job_{i}(client):\n    """Run job {i}."""\n    session = client.open(retries=3)\n'
        f'    rows = session.fetch("jobs/{i}", page_size=50)\n    for row in rows:\n'
        f"        row.check()\n    return {i * 7}"
        for i in range(8)
    )
    kept = _kept_with_best(code, "def job_3(", size=120)
    assert "return 21" in kept and "def job_4(" not in kept


def _manifest(name: str, memory: int) -> str:
    """A Kubernetes Deployment: its memory limit four levels below its name, after the
    requests block."""
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n"
        f"  template:\n    spec:\n      containers:\n      - name: {name}\n"
        f"        image: registry.local/{name}:1.4\n        resources:\n          requests:\n"
        f"            cpu: 250m\n            memory: {memory // 2}Mi\n          limits:\n"
        f"            cpu: 500m\n            memory: {memory}Mi\n        readinessProbe:\n"
        "          httpGet:\n            path: /healthz"
    )


def _kept_after(text: str, last: str, limit: int = 600) -> str:
    """The text kept of a window from the document's start to the line holding ``last``
    (``limit``: the characters the record's rest may add)."""
    units = _windowed(text, size=40).units[0]  # a line a unit
    end = next(u for u, span in enumerate(units) if last in text[span.start : span.end]) + 1
    windows = [Window(0, 0, end, ""), Window(0, end, len(units), "")]
    windowed = Windowed(units=[units], windows=windows, window_chars=limit)
    keep = select_units(windowed, 0, [1.0, 0.0], 0.5, context=0, first=False, text=text)
    assert keep is not None
    return selected_text(text, units, keep)


def test_a_nested_record_keeps_its_outer_blocks_rest() -> None:
    text = "\n---\n".join(_manifest(f"ledger-{i}", 300 + 7 * i) for i in range(3))
    kept = _kept_after(text, "memory: 150Mi")  # the window ends inside the requests block
    assert "memory: 300Mi" in kept and "path: /healthz" in kept  # the Deployment's rest
    assert "ledger-1" not in kept
    # the same with Windows line ends, and indented by tabs
    assert "memory: 300Mi" in _kept_after(text.replace("\n", "\r\n"), "memory: 150Mi")
    assert "memory: 300Mi" in _kept_after(text.replace("  ", "\t"), "memory: 150Mi")
    # the requests block ends there, and the blocks around it run past a shorter limit
    assert _kept_after(text, "memory: 150Mi", limit=80).endswith("memory: 150Mi")
    # a record longer than the limit: the innermost one's rest, cut at the limit
    kept = _kept_after(text, "requests:", limit=30)
    assert kept.endswith("cpu: 250m") and "memory: 150Mi" not in kept


def test_a_root_block_is_the_document_not_a_record() -> None:
    # a compose file's services are one block under its first line, and the rest of that
    # block is the rest of the file
    services = "services:\n" + "".join(f"  svc-{i}:\n    port: {8000 + i}\n" for i in range(4))
    kept = _kept_after(services.rstrip(), "port: 8000")
    assert kept.endswith("port: 8000")
    assert _kept_after(services.rstrip(), "svc-2:").endswith("port: 8002")  # its children


@settings(max_examples=60, deadline=None)
@given(
    depths=st.lists(st.integers(0, 3), min_size=2, max_size=60),
    blanks=st.lists(st.booleans(), min_size=60, max_size=60),
    chosen=st.integers(0, 200),
)
def test_the_record_rest_only_adds_deeper_lines_after_a_window(
    depths: list[int], blanks: list[bool], chosen: int
) -> None:
    lines = [f"{'  ' * d}key_{i}: value {i}" for i, d in enumerate(depths)]
    text = "".join(line + ("\n\n" if blanks[i] else "\n") for i, line in enumerate(lines)).rstrip()
    windowed = _windowed(text, size=60)
    if len(windowed.windows) < 2:
        return
    best = chosen % len(windowed.windows)
    scores = [1.0 if w == best else 0.0 for w in range(len(windowed.windows))]
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=0, text=text)
    assert keep is not None
    window = windowed.windows[best]
    units = windowed.units[0]
    kept = [u for u, k in enumerate(keep) if k]
    assert kept[0] == window.first and kept == list(range(kept[0], kept[-1] + 1))
    added = units[window.last : kept[-1] + 1]
    if added:  # the record's rest: deeper lines, no blank line, at most a window's characters
        tail = text[units[window.last - 1].end : added[-1].end]
        assert "\n\n" not in tail and len(tail) <= 60
        assert all(line.startswith(" ") for line in tail.split("\n")[1:])


def _split_services(text: str) -> list[str]:
    """The services of ``text`` whose timeout line is in no window with their name line, at
    the stage's default window size: the ones a window cut inside."""
    windowed = split_windows(
        [text], [None], window_chars=DEFAULT_WINDOW_CHARS, overlap=1, max_windows=256
    )
    names = [
        line.strip(" :")
        for line in text.split("\n")
        if line.startswith("  ") and line.endswith(":") and not line.startswith("    ")
    ]
    out = []
    for name in names:
        record = text[text.index(f"  {name}:") :]
        timeout = record[: record.index("ms") + 2].rsplit("\n", 1)[1].strip()
        if not any(f"  {name}:" in w.text and timeout in w.text for w in windowed.windows):
            out.append(name)
    return out


def test_the_default_stage_keeps_the_timeout_of_a_service_a_window_cut() -> None:
    rng = random.Random(7)
    stages = {"on": RetrievalStage(), "off": RetrievalStage(record_rest=False)}
    kept = {"on": 0, "off": 0}
    asked = 0
    for _ in range(8):
        names = list(dict.fromkeys(f"worker-{rng.randrange(9999)}" for _ in range(48)))
        timeouts = {n: rng.randrange(100, 9000) for n in names}
        files = [_services(rng, names[k::4], timeouts) for k in range(4)]
        cut = [n for text in files for n in _split_services(text)]
        if not cut:
            continue
        target = rng.choice(cut)
        question = f"What is the timeout of the {target} service?"
        request = Request(
            messages=[Message(role="user", content=question)],
            documents=[Document(id=f"compose-{k}", text=t) for k, t in enumerate(files)],
        )
        asked += 1
        for label, stage in stages.items():
            out = Pipeline([stage]).run(request).request
            assert sum(len(d.text) for d in out.documents) < sum(len(t) for t in files)
            kept[label] += f"timeout: {timeouts[target]}ms" in "\n".join(
                d.text for d in out.documents
            )
    assert asked >= 6
    assert kept["on"] == asked and kept["off"] < asked  # record_rest=False: the window alone
