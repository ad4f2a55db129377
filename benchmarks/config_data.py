"""``bench_structured.py``'s indented records, generated in code: configuration files where the
line that answers sits a few lines below the one naming the question's subject, inside the
same record, so a window can end between them.

- ``configs``: compose-style YAML files of services, each service's fields below its name
  (image, replicas, timeout, memory), the question asking one service's timeout;
- ``manifests``: Kubernetes Deployments joined by ``---``, the asked memory limit five levels
  below the Deployment's name, after its requests block;
- ``toml_tables`` (``SECTIONED``, in ``bench_tools`` only): TOML files of service tables, the
  asked timeout five lines below the ``[services.NAME]`` header, with no indentation.

Each is seeded by the generator it is given, so a run is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from promptslim.bench.datasets import BenchItem
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.types import Document

__all__ = ["INDENTED", "SECTIONED", "configs", "manifests", "tables"]

#: documents in each item, and records in each document
DOCUMENTS = 5
SERVICES = 12
DEPLOYMENTS = 3
#: the files of Deployments in each ``manifests`` item
MANIFEST_FILES = 4
TEAMS = ("auth", "search", "billing", "media", "queue")
ROLES = ("api", "worker", "cron")


def _item(name: str, i: int, texts: list[str], question: str, answer: str) -> BenchItem:
    docs = [Document(id=f"{name}-{d}", text=t) for d, t in enumerate(texts)]
    return BenchItem(f"{name}-{i}", qa_request(NQ_INSTRUCTION, question, docs), (answer,))


def _other(rng: random.Random, target: str) -> str:
    """A service name like the target's, not it."""
    while (name := f"{rng.choice(TEAMS)}-{rng.choice(ROLES)}-{rng.randrange(1000)}") == target:
        pass
    return name


def configs(rng: random.Random, i: int) -> BenchItem:
    """Compose-style files of services (image, replicas, timeout, memory); the question asks
    one service's timeout."""
    target = f"billing-worker-{i}"
    where = (rng.randrange(DOCUMENTS), rng.randrange(SERVICES))
    timeouts = rng.sample(range(100, 9000), DOCUMENTS * SERVICES)  # distinct: one line answers
    texts = []
    for d in range(DOCUMENTS):
        lines = ["services:"]
        for r in range(SERVICES):
            name = target if (d, r) == where else _other(rng, target)
            lines += [
                f"  {name}:",
                f"    image: registry.local/{name}:1.{rng.randrange(30)}",
                f"    replicas: {rng.randrange(1, 9)}",
                f"    timeout: {timeouts[d * SERVICES + r]}ms",
                f"    memory: {rng.choice([256, 512, 1024])}Mi",
            ]
        texts.append("\n".join(lines))
    answer = f"timeout: {timeouts[where[0] * SERVICES + where[1]]}ms"
    return _item("configs", i, texts, f"What is the timeout of the {target} service?", answer)


def _deployment(rng: random.Random, name: str, memory: int) -> str:
    cpu = rng.randrange(100, 2000)
    team = rng.choice(["payments", "search", "growth"])
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {rng.choice(["prod", "staging", "batch"])}
  labels:
    app: {name}
    team: {team}
spec:
  replicas: {rng.randrange(1, 9)}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: {name}
        image: registry.local/{name}:{rng.randrange(1, 40)}.{rng.randrange(10)}
        ports:
        - containerPort: {rng.choice([80, 8080, 9000])}
        env:
        - name: LOG_LEVEL
          value: {rng.choice(["info", "debug", "warn"])}
        resources:
          requests:
            cpu: {cpu // 2}m
            memory: {memory // 4 * 2}Mi
          limits:
            cpu: {cpu}m
            memory: {memory}Mi
        readinessProbe:
          httpGet:
            path: /healthz
            port: 8080"""


def manifests(rng: random.Random, i: int) -> BenchItem:
    """Kubernetes Deployments; the question asks one Deployment's memory limit."""
    names: dict[str, None] = {}
    while len(names) < MANIFEST_FILES * DEPLOYMENTS:
        team = rng.choice(["orders", "users", "ledger", "mailer", "search"])
        names[f"{team}-{rng.choice(['api', 'worker', 'sync'])}-{rng.randrange(999)}"] = None
    # odd limits, even requests: one line answers
    memory = dict(zip(names, rng.sample(range(129, 4000, 2), len(names)), strict=True))
    target = rng.choice(list(names))
    texts = [
        "\n---\n".join(_deployment(rng, n, memory[n]) for n in list(names)[d::MANIFEST_FILES])
        for d in range(MANIFEST_FILES)
    ]
    question = f"What is the memory limit of the {target} deployment?"
    return _item("manifests", i, texts, question, f"memory: {memory[target]}Mi")


def tables(rng: random.Random, i: int) -> BenchItem:
    """TOML files of service tables, flat keys under each ``[services.NAME]`` header (no
    indentation tells a record); the question asks one service's timeout."""
    target = f"billing-worker-{i}"
    where = (rng.randrange(DOCUMENTS), rng.randrange(SERVICES))
    timeouts = rng.sample(range(100, 9000), DOCUMENTS * SERVICES)
    texts = []
    for d in range(DOCUMENTS):
        blocks = []
        for r in range(SERVICES):
            name = target if (d, r) == where else _other(rng, target)
            blocks.append(
                f"[services.{name}]\n"
                f'image = "registry.local/{name}:1.{rng.randrange(30)}"\n'
                f"replicas = {rng.randrange(1, 9)}\n"
                f"port = {rng.randrange(8000, 9000)}\n"
                f'restart = "{rng.choice(["always", "on-failure"])}"\n'
                f'timeout = "{timeouts[d * SERVICES + r]}ms"\n'
                f'memory = "{rng.choice([256, 512, 1024])}Mi"'
            )
        texts.append("\n\n".join(blocks))
    answer = f'timeout = "{timeouts[where[0] * SERVICES + where[1]]}ms"'
    return _item("tables", i, texts, f"What is the timeout of the {target} service?", answer)


#: the indented-record shapes by name
INDENTED: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "configs": configs,
    "manifests": manifests,
}
#: the flat, sectioned ones (TOML tables), which ``bench_tools`` reads as a tool result
SECTIONED: dict[str, Callable[[random.Random, int], BenchItem]] = {"toml_tables": tables}
