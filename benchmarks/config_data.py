"""``bench_structured.py``'s indented records, generated in code: configuration files where the
line that answers sits a few lines below the one naming the question's subject, inside the
same record, so a window can end between them.

- ``configs``: compose-style YAML files of services, each service's fields below its name, the
  asked ``timeout`` at any place among them;
- ``manifests``: Kubernetes Deployments joined by ``---``, the asked memory limit five levels
  below the Deployment's name, after its requests block.

Each is seeded by the generator it is given, so a run is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from promptslim.bench.datasets import BenchItem
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.types import Document

__all__ = ["INDENTED", "configs", "manifests"]

#: documents in each item, and records in each document
DOCUMENTS = 4
SERVICES = 12
DEPLOYMENTS = 3
FIELDS = ("image", "replicas", "cpu", "memory", "port", "owner", "region", "retries")
TEAMS = ("auth", "billing", "media", "search", "ledger")
ROLES = ("api", "worker", "cron", "sync")


def _item(name: str, i: int, texts: list[str], question: str, answer: str) -> BenchItem:
    docs = [Document(id=f"{name}-{d}", text=t) for d, t in enumerate(texts)]
    return BenchItem(f"{name}-{i}", qa_request(NQ_INSTRUCTION, question, docs), (answer,))


def _names(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct service names, alike but for their number."""
    names: dict[str, None] = {}
    while len(names) < n:
        names[f"{rng.choice(TEAMS)}-{rng.choice(ROLES)}-{rng.randrange(1000)}"] = None
    return list(names)


def _service(rng: random.Random, name: str, timeout: int) -> list[str]:
    fields = [
        f"    {f}: {rng.choice(['a1', 'b2', 'eu', 'us'])}-{rng.randrange(99)}" for f in FIELDS
    ]
    fields.insert(rng.randrange(len(fields) + 1), f"    timeout: {timeout}ms")
    return [f"  {name}:", *fields]


def configs(rng: random.Random, i: int) -> BenchItem:
    """Compose-style files of services; the question asks one service's timeout."""
    names = _names(rng, DOCUMENTS * SERVICES)
    timeouts = dict(zip(names, rng.sample(range(100, 9000), len(names)), strict=True))
    target = rng.choice(names)
    texts = []
    for d in range(DOCUMENTS):
        lines = ["services:"]
        for name in names[d * SERVICES : (d + 1) * SERVICES]:
            lines += _service(rng, name, timeouts[name])
        texts.append("\n".join(lines))
    question = f"What is the timeout of the {target} service?"
    return _item("configs", i, texts, question, f"timeout: {timeouts[target]}ms")


def _deployment(rng: random.Random, name: str, memory: int) -> str:
    cpu = rng.randrange(100, 2000)
    return "\n".join(
        [
            "apiVersion: apps/v1",
            "kind: Deployment",
            "metadata:",
            f"  name: {name}",
            f"  namespace: {rng.choice(['prod', 'staging', 'batch'])}",
            "spec:",
            f"  replicas: {rng.randrange(1, 9)}",
            "  template:",
            "    spec:",
            "      containers:",
            f"      - name: {name}",
            f"        image: registry.local/{name}:{rng.randrange(1, 40)}.{rng.randrange(10)}",
            "        env:",
            "        - name: LOG_LEVEL",
            f"          value: {rng.choice(['info', 'debug', 'warn'])}",
            "        resources:",
            "          requests:",
            f"            cpu: {cpu // 2}m",
            f"            memory: {memory // 4 * 2}Mi",
            "          limits:",
            f"            cpu: {cpu}m",
            f"            memory: {memory}Mi",
            "        readinessProbe:",
            "          httpGet:",
            "            path: /healthz",
        ]
    )


def manifests(rng: random.Random, i: int) -> BenchItem:
    """Kubernetes Deployments; the question asks one Deployment's memory limit."""
    names = _names(rng, DOCUMENTS * DEPLOYMENTS)
    # odd limits, even requests: one line answers
    limits = rng.sample(range(129, 4000, 2), len(names))
    memory = dict(zip(names, limits, strict=True))
    target = rng.choice(names)
    texts = [
        "\n---\n".join(
            _deployment(rng, n, memory[n]) for n in names[d * DEPLOYMENTS : (d + 1) * DEPLOYMENTS]
        )
        for d in range(DOCUMENTS)
    ]
    question = f"What is the memory limit of the {target} deployment?"
    return _item("manifests", i, texts, question, f"memory: {memory[target]}Mi")


#: the indented-record shapes by name
INDENTED: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "configs": configs,
    "manifests": manifests,
}
