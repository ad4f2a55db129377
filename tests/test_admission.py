"""``promptslim serve``'s admission: priority classes, shortest prompt first within a class,
per-tenant concurrency caps and per-class queue-wait budgets; on a real event loop, then
through the proxy on real sockets (the in-test upstream of test_serve records the order in
which requests reached it)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from promptslim import ConfigError, Pipeline
from promptslim.cli import main
from promptslim.serve import ServeConfig
from promptslim.serve.admission import Admission, AdmissionPolicy, Overloaded, Ticket

from .test_serve import Seam, ThreadServer, proxy

CLASSES = ("interactive", "batch")


def _ticket(policy: AdmissionPolicy, key: str, *, klass: str = "", tenant: str = "") -> Ticket:
    headers = {"x-promptslim-priority": klass, "x-promptslim-tenant": tenant}
    return policy.ticket({k: v for k, v in headers.items() if v}, key=key)


async def _wait_queued(admission: Admission, n: int) -> None:
    for _ in range(500):  # bounded: until n requests wait
        if admission.queued == n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{admission.queued} queued, expected {n}")


# ---------------------------------------------------------------- the queue itself


@pytest.mark.asyncio
async def test_higher_class_first_then_shortest_prompt() -> None:
    policy = AdmissionPolicy(classes=CLASSES, shortest_first=True)
    admission = Admission(limit=1, max_queue=10, policy=policy)
    await admission.acquire(timeout_s=1, ticket=_ticket(policy, "hold"))
    order: list[str] = []

    async def ask(key: str, klass: str, tokens: int) -> None:
        ticket = _ticket(policy, key, klass=klass)
        ticket.tokens = tokens
        await admission.acquire(timeout_s=5, ticket=ticket)
        order.append(key)
        admission.release(key)

    tasks = []
    for key, klass, tokens in [("b-short", "batch", 10), ("i-long", "interactive", 900),
                               ("i-short", "interactive", 40), ("none", "", 5)]:  # fmt: skip
        tasks.append(asyncio.create_task(ask(key, klass, tokens)))
        await _wait_queued(admission, len(tasks))
    admission.release("hold")
    await asyncio.gather(*tasks)
    # a request naming no class gets the lowest; within batch, 5 tokens before 10
    assert order == ["i-short", "i-long", "none", "b-short"]
    assert admission.active == 0 and admission.queued == 0


@pytest.mark.asyncio
async def test_fifo_within_a_class_without_shortest_first() -> None:
    policy = AdmissionPolicy(classes=CLASSES)
    admission = Admission(limit=1, max_queue=10, policy=policy)
    await admission.acquire(timeout_s=1, ticket=_ticket(policy, "hold"))
    order: list[str] = []

    async def ask(key: str, tokens: int) -> None:
        ticket = _ticket(policy, key, klass="batch")
        ticket.tokens = tokens
        await admission.acquire(timeout_s=5, ticket=ticket)
        order.append(key)
        admission.release(key)

    tasks = []
    for key, tokens in [("first", 900), ("second", 10)]:
        tasks.append(asyncio.create_task(ask(key, tokens)))
        await _wait_queued(admission, len(tasks))
    admission.release("hold")
    await asyncio.gather(*tasks)
    assert order == ["first", "second"]


@pytest.mark.asyncio
async def test_a_tenant_at_its_cap_waits_while_others_go_on() -> None:
    policy = AdmissionPolicy(tenant_limit=1)
    admission = Admission(limit=3, max_queue=10, policy=policy)
    await admission.acquire(timeout_s=1, ticket=_ticket(policy, "a1", tenant="a"))
    second = asyncio.create_task(
        admission.acquire(timeout_s=5, ticket=_ticket(policy, "a2", tenant="a"))
    )
    await _wait_queued(admission, 1)
    # a free slot, but tenant a is at its cap: b goes past it at once
    await asyncio.wait_for(
        admission.acquire(timeout_s=5, ticket=_ticket(policy, "b1", tenant="b")), 1
    )
    assert not second.done() and admission.active == 2
    admission.release("a1")
    await asyncio.wait_for(second, 1)
    assert admission.active == 2 and admission.queued == 0
    admission.release("a2")
    admission.release("b1")
    assert admission.active == 0


@pytest.mark.asyncio
async def test_each_class_has_its_own_queue_budget() -> None:
    policy = AdmissionPolicy(classes=CLASSES, queue_budget_s={"batch": 0.05})
    admission = Admission(limit=1, max_queue=10, policy=policy)
    await admission.acquire(timeout_s=1, ticket=_ticket(policy, "hold"))
    batch = _ticket(policy, "b", klass="batch")
    interactive = _ticket(policy, "i", klass="interactive")
    waiting = asyncio.create_task(
        admission.acquire(timeout_s=admission.budget_s(interactive, 5.0), ticket=interactive)
    )
    with pytest.raises(Overloaded, match="batch"):
        await admission.acquire(timeout_s=admission.budget_s(batch, 5.0), ticket=batch)
    assert not waiting.done()  # the interactive one still waits, on its own budget
    admission.release("hold")
    await asyncio.wait_for(waiting, 1)
    admission.release("i")


def test_authorization_is_a_tenant_never_written_out() -> None:
    policy = AdmissionPolicy(tenant_limit=2)
    ticket = policy.ticket({"authorization": "Bearer sk-secret"}, key="k")
    assert ticket.tenant is not None and "secret" not in ticket.tenant
    assert policy.ticket({"authorization": "Bearer sk-other"}).tenant != ticket.tenant
    assert policy.ticket({"x-promptslim-priority": "root"}).klass == "default"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"priority_classes": ("a", "a")}, "priority_classes"),
        ({"priority_classes": ("a", "b"), "default_priority": "c"}, "default_class"),
        ({"tenant_max_concurrency": 0}, "tenant_max_concurrency"),
        ({"priority_classes": ("a",), "queue_budget_s": {"b": 1.0}}, "queue_budget"),
        ({"queue_budget_s": {"default": 0.0}}, "queue_budget"),
    ],
)
def test_bad_admission_settings_name_their_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ServeConfig(upstream="http://127.0.0.1:1/v1", **options)
    assert info.value.field == field


def test_cli_rejects_a_malformed_queue_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--upstream", "http://127.0.0.1:1/v1", "--queue-budget", "batch"])
    assert code == 2
    assert "--queue-budget" in capsys.readouterr().err


# ---------------------------------------------------------------- through the proxy


BODY = {"model": "seam", "messages": [{"role": "user", "content": "Hi"}]}


def _body(words: int) -> dict[str, Any]:
    text = "Tell me about " + " ".join(f"w{i}" for i in range(words))
    return {**BODY, "messages": [{"role": "user", "content": text}]}


@pytest.mark.asyncio
async def test_proxy_admits_by_class_then_slimmed_size_on_real_sockets() -> None:
    seam = Seam()
    with ThreadServer(seam.app) as upstream, proxy(
        upstream.url + "/v1", pipeline=Pipeline.default(), max_concurrency=1,
        priority_classes=CLASSES, shortest_first=True,
    ) as (url, state):  # fmt: skip
        async with httpx.AsyncClient(timeout=20) as client:

            async def post(tag: str, klass: str, words: int) -> int:
                headers = {"x-seam": "hold", "x-seam-delay": "0.3", "x-tag": tag}
                if klass:
                    headers["x-promptslim-priority"] = klass
                r = await client.post(
                    url + "/v1/chat/completions", json=_body(words), headers=headers
                )
                return r.status_code

            tasks = [asyncio.create_task(post("first", "batch", 5))]
            await _wait_active(state.admission)
            for tag, klass, words in [("b-short", "batch", 5), ("i-long", "interactive", 400),
                                      ("i-short", "interactive", 20)]:  # fmt: skip
                tasks.append(asyncio.create_task(post(tag, klass, words)))
                await _wait_queued(state.admission, len(tasks) - 1)
            assert await asyncio.gather(*tasks) == [200] * 4
    order = [h["x-tag"] for h in seam.headers]
    assert order == ["first", "i-short", "i-long", "b-short"]


@pytest.mark.asyncio
async def test_proxy_caps_a_tenant_on_real_sockets() -> None:
    seam = Seam()
    with ThreadServer(seam.app) as upstream, proxy(
        upstream.url + "/v1", default=False, max_concurrency=4, tenant_max_concurrency=1
    ) as (url, state):  # fmt: skip
        async with httpx.AsyncClient(timeout=20) as client:

            async def post(tenant: str) -> int:
                headers = {"x-seam": "hold", "x-seam-delay": "0.3", "x-tag": tenant,
                           "x-promptslim-tenant": tenant}  # fmt: skip
                r = await client.post(url + "/v1/chat/completions", json=BODY, headers=headers)
                return r.status_code

            greedy = [asyncio.create_task(post("a")) for _ in range(3)]
            await _wait_queued(state.admission, 2)
            assert state.admission.active == 1  # three slots free, but a is at its cap
            other = await post("b")  # not behind a's queue
            assert other == 200
            assert await asyncio.gather(*greedy) == [200] * 3
    order = [h["x-tag"] for h in seam.headers]
    assert order.index("b") < 2  # b reached the upstream before a's queued ones


async def _wait_active(admission: Admission) -> None:
    for _ in range(500):
        if admission.active == 1:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the first request was not admitted")


def _pipeline_runs(metrics: str) -> float:
    line = next(
        x for x in metrics.splitlines() if x.startswith("promptslim_pipeline_seconds_count")
    )
    return float(line.split()[-1])


FILLER = "The harbour ledger noted wind, swell and the colour of the sky every hour. " * 6


@pytest.mark.asyncio
async def test_a_request_that_must_wait_is_slimmed_before_it_queues() -> None:
    """First come first served, the limit at the upstream's slots (here one): the waiting
    request's pipeline has run while it waits, so once admitted it holds the upstream's slot
    for the exchange alone; what reaches the upstream is the same slimmed body as for a
    request that did not wait."""
    docs = [{"id": f"d{k}", "text": f"Note {k}. {FILLER}"} for k in range(12)]
    body = {**_body(3), "documents": docs}
    seam = Seam()
    with ThreadServer(seam.app) as upstream, proxy(
        upstream.url + "/v1", pipeline=Pipeline.default(), max_concurrency=1
    ) as (url, state):  # fmt: skip
        async with httpx.AsyncClient(timeout=20) as client:

            async def post(tag: str) -> int:
                headers = {"x-seam": "hold", "x-seam-delay": "3", "x-tag": tag}
                r = await client.post(url + "/v1/chat/completions", json=body, headers=headers)
                return r.status_code

            first = asyncio.create_task(post("first"))
            for _ in range(500):  # bounded: until the first has reached the upstream
                if seam.bodies:
                    break
                await asyncio.sleep(0.01)
            before = _pipeline_runs((await client.get(url + "/metrics")).text)
            second = asyncio.create_task(post("second"))
            await _wait_queued(state.admission, 1)
            during = _pipeline_runs((await client.get(url + "/metrics")).text)
            assert state.admission.queued == 1  # read while the second still waited
            assert during == before + 1
            assert await asyncio.gather(first, second) == [200, 200]
    assert [h["x-tag"] for h in seam.headers] == ["first", "second"]
    assert seam.bodies[1] == seam.bodies[0]
    assert len(seam.bodies[1]) < len(json.dumps(body)) and b"documents" not in seam.bodies[1]
