"""``bench_structured.py``'s and ``bench_tools.py``'s records, generated in code: configuration
files where the line that answers sits a few lines below the one naming the question's subject,
inside the same record, so a window can end between them, and a log of multi-line records.

- ``configs``: compose-style YAML files of services, each service's fields below its name
  (image, replicas, timeout, memory), the question asking one service's timeout;
- ``manifests``: Kubernetes Deployments joined by ``---``, the asked memory limit five levels
  below the Deployment's name, after its requests block;
- ``toml_tables`` (``TOOL_ONLY``, read by ``bench_tools`` as a tool result): TOML files of
  service tables, the asked timeout five lines below the ``[services.NAME]`` header, with no
  indentation;
- ``git_log`` (``TOOL_ONLY``): ``git log`` output, the question naming what one commit did (its
  indented message) and asking who made it (the header above);
- ``terraform_plan`` (``TOOL_ONLY``): a ``terraform plan``, each resource's block under a
  comment naming it, the asked root volume size one block deeper.

Each is seeded by the generator it is given, so a run is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from promptslim.bench.datasets import BenchItem
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.types import Document

__all__ = [
    "INDENTED",
    "TOOL_ONLY",
    "config_item",
    "configs",
    "git_log",
    "manifests",
    "other_service",
    "tables",
    "terraform_plan",
]

#: documents in each item, and records in each document
DOCUMENTS = 5
SERVICES = 12
DEPLOYMENTS = 3
#: the files of Deployments in each ``manifests`` item
MANIFEST_FILES = 4
TEAMS = ("auth", "search", "billing", "media", "queue")
ROLES = ("api", "worker", "cron")


def config_item(name: str, i: int, texts: list[str], question: str, answer: str) -> BenchItem:
    """A question over ``texts`` as the item's documents, ``answer`` its evidence."""
    docs = [Document(id=f"{name}-{d}", text=t) for d, t in enumerate(texts)]
    return BenchItem(f"{name}-{i}", qa_request(NQ_INSTRUCTION, question, docs), (answer,))


def other_service(rng: random.Random, target: str) -> str:
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
            name = target if (d, r) == where else other_service(rng, target)
            lines += [
                f"  {name}:",
                f"    image: registry.local/{name}:1.{rng.randrange(30)}",
                f"    replicas: {rng.randrange(1, 9)}",
                f"    timeout: {timeouts[d * SERVICES + r]}ms",
                f"    memory: {rng.choice([256, 512, 1024])}Mi",
            ]
        texts.append("\n".join(lines))
    answer = f"timeout: {timeouts[where[0] * SERVICES + where[1]]}ms"
    return config_item("configs", i, texts, f"What is the timeout of the {target} service?", answer)


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
    return config_item("manifests", i, texts, question, f"memory: {memory[target]}Mi")


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
            name = target if (d, r) == where else other_service(rng, target)
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
    return config_item("tables", i, texts, f"What is the timeout of the {target} service?", answer)


#: the indented-record shapes by name
INDENTED: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "configs": configs,
    "manifests": manifests,
}
FIRST = ("Ana", "Bo", "Cyd", "Dee", "Eli", "Fay", "Gus", "Ivy")
LAST = ("Lima", "Chen", "Park", "Roy", "Cohen", "Wong", "Hale", "Moss")
COMMITS = 60


def git_log(rng: random.Random, i: int) -> BenchItem:
    """``git log`` output: the question names what one commit did (in its indented message)
    and asks who made it (in the header above); no one else in the log made a commit."""
    target, where = f"ledger-cache-{i}", rng.randrange(COMMITS)
    author = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    entries = []
    for k in range(COMMITS):
        who = author
        while k != where and who == author:
            who = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        part = f"{rng.choice(TEAMS)}-{rng.choice(['cache', 'queue', 'api'])}-{rng.randrange(999)}"
        message = f"Fix memory leak in {target}" if k == where else f"Speed up {part}"
        entries.append(
            f"commit {rng.getrandbits(160):040x}\n"
            f"Author: {who} <{who.split()[0].lower()}@example.com>\n"
            f"Date:   Mon Nov {1 + k % 28} 10:{k:02d}:00 2026 +0000\n\n    {message}\n"
        )
    question = f"Who made the commit that fixed the memory leak in {target}?"
    return config_item("git_log", i, ["\n".join(entries)], question, f"Author: {author} <")


INSTANCE_TYPES = ("t3.micro", "t3.small", "m5.large", "c5.xlarge")
RESOURCES = 25


def _resource(rng: random.Random, name: str, disk: int) -> str:
    return (
        f"  # aws_instance.{name} will be created\n"
        f'  + resource "aws_instance" "{name}" {{\n'
        f'      + ami                         = "ami-{rng.getrandbits(32):08x}"\n'
        "      + arn                         = (known after apply)\n"
        f'      + instance_type               = "{rng.choice(INSTANCE_TYPES)}"\n'
        "      + private_ip                  = (known after apply)\n"
        "      + root_block_device {\n"
        f"          + volume_size           = {disk}\n"
        '          + volume_type           = "gp3"\n'
        "        }\n"
        f'      + tags                        = {{ "Name" = "{name}" }}\n'
        "    }\n"
    )


def terraform_plan(rng: random.Random, i: int) -> BenchItem:
    """``terraform plan`` output: each resource's block under a comment naming it, the asked
    root volume size one block deeper, five lines below the comment."""
    target, where = f"ledger-{i}", rng.randrange(RESOURCES)
    disks = rng.sample(range(20, 2000), RESOURCES)
    blocks = [
        _resource(rng, target if k == where else other_service(rng, target), disks[k])
        for k in range(RESOURCES)
    ]
    text = "Terraform will perform the following actions:\n\n" + "\n".join(blocks)
    question = f"What root volume size will aws_instance.{target} get?"
    answer = f"volume_size           = {disks[where]}\n"
    return config_item("terraform_plan", i, [text], question, answer)


#: the shapes only ``bench_tools`` reads, as a tool result: flat, sectioned TOML tables, a log
#: of multi-line records, and a plan whose blocks a comment names
TOOL_ONLY: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "toml_tables": tables,
    "git_log": git_log,
    "terraform_plan": terraform_plan,
}
