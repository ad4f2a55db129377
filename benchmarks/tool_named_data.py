"""``bench_tools.py``'s records the turn names among many alike, generated in code, each sent
as one tool result: a field every record has, asked of one; a worker's one line among a job's
hundreds; records named by plain words, which are no literals of the question.

- ``server_fields``: ``nginx -T`` output of 50 servers, each setting ``client_max_body_size``;
  the question names a server by its host and asks that field (an identifier, so a literal of
  the question on every server's line of it), five lines below the ``server_name`` line;
- ``worker_log``: a scheduler's log of 1,000 lines, a job's name on every fourth; the question
  names the job and one worker, on one line of its own, and asks the rows it wrote there;
- ``word_services`` / ``word_deployments`` / ``word_resources``: a compose file of 20
  services, a manifest of 12 Kubernetes Deployments and a Terraform file of 15 resources, each
  named by a plain word (``billing``, ``search``: no digit or hyphen, so not a literal of the
  question, only a query word); the question asks one service's timeout, six lines below its
  name, one Deployment's memory limit, or one instance's root volume size, in a nested block
  seven lines below the ``resource`` line;
- ``word_units``: ``systemctl cat`` of 12 services named by plain words, each unit file's
  ``[Unit]``, ``[Service]`` and ``[Install]`` sections under a ``# /etc/systemd/system/NAME``
  comment; the question asks one unit's start timeout, in its ``[Service]`` section;
- ``word_items``: a JSON array of 20 services, each ``{"name": WORD, ...}``; the question asks
  one's memory limit;
- ``word_tasks``: ``ansible-playbook`` output, a task per service named by a plain word, a
  line per host below it; the question asks which host the named task changed (its
  ``changed:`` line, each with a process id of its own).
- ``camel_fields``: one Deployment as ``kubectl get deployment NAME -o yaml`` prints it, with
  two probes, a rollout strategy and its status; the question asks a field in plain words
  ("What is the initial delay of the liveness probe?"), and the field's key is camelCase
  (``initialDelaySeconds`` under ``livenessProbe``);
- ``env_keys`` / ``configmap_keys``: a container's environment (``printenv``, in no order) and
  the same keys as a ConfigMap's ``data``, every key a service's word and a setting's words
  (``LEDGER_DB_PORT``); the question asks one setting of one service in plain words ("Which DB
  port does ledger use?"), so its words are only parts of the key that answers it.

Each is seeded by the generator it is given, so a run is reproducible.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from config_data import config_item, other_service

from promptslim.bench.datasets import BenchItem

__all__ = [
    "NAMED_RECORDS",
    "camel_fields",
    "configmap_keys",
    "env_keys",
    "server_fields",
    "word_deployments",
    "word_items",
    "word_resources",
    "word_services",
    "word_tasks",
    "word_units",
    "worker_log",
]

SERVERS = 50
LOG_LINES = 1000
#: plain words that name services, as compose files and manifests often do
NAMES = (
    "billing", "search", "auth", "media", "queue", "ledger", "mailer", "gateway", "reports",
    "checkout", "inventory", "payments", "notifier", "scheduler", "catalog", "profile",
    "frontend", "analytics", "webhooks", "exporter",
)  # fmt: skip


def server_fields(rng: random.Random, i: int) -> BenchItem:
    """``nginx -T`` of many servers; the question asks one field of the server it names."""
    target, where = f"billing-edge-{i}.example.com", rng.randrange(SERVERS)
    lines = ["worker_processes auto;", "events { worker_connections 1024; }", "http {"]
    sizes = [rng.randrange(1, 500) for _ in range(SERVERS)]
    for k in range(SERVERS):
        name = target if k == where else f"{other_service(rng, target)}.example.com"
        lines += [
            "    server {",
            "        listen 443 ssl;",
            f"        server_name {name};",
            f"        access_log /var/log/nginx/{name}.log;",
            "        location / {",
            f"            proxy_pass http://127.0.0.1:{rng.randrange(3000, 9999)};",
            f"            client_max_body_size {sizes[k]}m;",
            "        }",
            "    }",
        ]
    lines.append("}")
    question = f"What client_max_body_size does {target} allow?"
    answer = f"client_max_body_size {sizes[where]}m;"
    return config_item("server_fields", i, ["\n".join(lines)], question, answer)


def worker_log(rng: random.Random, i: int) -> BenchItem:
    """A job's log, its name on a quarter of the lines; the question asks one worker's rows."""
    job, worker = f"ingest_report_{i}", f"worker-{rng.randrange(100, 999)}"
    where = rng.randrange(LOG_LINES // 10, LOG_LINES)
    rows = rng.randrange(100, 99_999)
    lines = []
    for k in range(LOG_LINES):
        stamp = f"2026-12-01T{10 + k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z"
        if k == where:
            lines.append(f"{stamp} INFO {job} {worker} shard={k % 64} finished rows={rows}")
        elif k % 4 == 0:
            other = f"worker-{rng.randrange(1, 99)}"
            lines.append(f"{stamp} INFO {job} {other} shard={k % 64} batch {k} done")
        else:
            lines.append(f"{stamp} DEBUG scheduler tick {k} queue depth {rng.randrange(50)}")
    question = f"How many rows did {job} write on {worker}?"
    return config_item("worker_log", i, ["\n".join(lines)], question, f"rows={rows}")


def _named(
    rng: random.Random,
    item: tuple[str, int],
    count: int,
    record: Callable[[random.Random, str], tuple[list[str], str]],
    question: str,
    *,
    head: tuple[str, ...] = (),
    between: str = "\n",
) -> BenchItem:
    """``count`` records named by plain words, one of them the question's (``question`` with
    ``{}`` for its name): ``record(rng, name)`` gives a record's lines and the answer it holds;
    ``head``: lines above the records, ``between``: what joins them. ``item``: the shape's name
    and the item's index."""
    names = rng.sample(NAMES, count)
    target = rng.choice(names)
    parts, answer = [], ""
    for name in names:
        lines, value = record(rng, name)
        parts.append("\n".join(lines))
        answer = value if name == target else answer
    text = "\n".join([*head, between.join(parts)])
    return config_item(item[0], item[1], [text], question.format(target), answer)


def _service(rng: random.Random, name: str) -> tuple[list[str], str]:
    timeout = rng.randrange(100, 9000)
    lines = [
        f"  {name}:",
        f"    image: registry.local/team/svc-{rng.randrange(999)}:1.{rng.randrange(30)}",
        f"    replicas: {rng.randrange(1, 9)}",
        "    environment:",
        f"      LOG_LEVEL: {rng.choice(['info', 'debug', 'warn'])}",
        f"      REGION: eu-{rng.randrange(9)}",
        f"    timeout: {timeout}ms",
        f"    mem_limit: {rng.randrange(128, 4096)}m",
    ]
    return lines, f"timeout: {timeout}ms"


def word_services(rng: random.Random, i: int) -> BenchItem:
    """A compose file of services named by plain words; the question asks one's timeout."""
    question = "What is the timeout of the {} service?"
    return _named(rng, ("word_services", i), len(NAMES), _service, question, head=("services:",))


def _deployment(rng: random.Random, name: str) -> tuple[list[str], str]:
    memory = rng.randrange(128, 4096)
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        f"    team: {rng.choice(['payments', 'growth', 'core'])}",
        "spec:",
        f"  replicas: {rng.randrange(1, 9)}",
        "  template:",
        "    spec:",
        "      containers:",
        f"      - image: registry.local/{name}:{rng.randrange(40)}",
        "        resources:",
        "          limits:",
        f"            memory: {memory}Mi",
    ]
    return lines, f"memory: {memory}Mi"


def word_deployments(rng: random.Random, i: int) -> BenchItem:
    """Deployments named by plain words; the question asks one's memory limit."""
    question = "What is the memory limit of the {} deployment?"
    return _named(rng, ("word_deployments", i), 12, _deployment, question, between="\n---\n")


def _resource(rng: random.Random, name: str) -> tuple[list[str], str]:
    size = rng.choice([8, 16, 32, 64, 128, 256, 512])
    lines = [
        f'resource "aws_instance" "{name}" {{',
        f'  ami           = "ami-{rng.randrange(16**8):08x}"',
        f'  instance_type = "{rng.choice(["t3.micro", "t3.large", "m5.xlarge"])}"',
        "  tags = {",
        f'    Team = "{rng.choice(["core", "growth", "payments"])}"',
        "  }",
        "  root_block_device {",
        f"    volume_size = {size}",
        "  }",
        "}",
        "",
    ]
    return lines, f"volume_size = {size}"


def word_resources(rng: random.Random, i: int) -> BenchItem:
    """Terraform resources named by plain words; the question asks one's root volume size."""
    question = "How big is the root volume of the {} instance?"
    return _named(rng, ("word_resources", i), 15, _resource, question)


def _unit(rng: random.Random, name: str) -> tuple[list[str], str]:
    timeout = rng.randrange(5, 600)
    lines = [
        f"# /etc/systemd/system/{name}.service",
        "[Unit]",
        f"Description={name.title()} service",
        "After=network.target",
        "",
        "[Service]",
        f"ExecStart=/usr/bin/svc-{rng.randrange(999)}",
        "Restart=always",
        f"TimeoutStartSec={timeout}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return lines, f"TimeoutStartSec={timeout}"


def word_units(rng: random.Random, i: int) -> BenchItem:
    """``systemctl cat`` of units named by plain words; the question asks one's start timeout."""
    question = "What start timeout does the {} unit have?"
    return _named(rng, ("word_units", i), 12, _unit, question)


def word_items(rng: random.Random, i: int) -> BenchItem:
    """A JSON array of services named by plain words; the question asks one's memory limit."""
    names = rng.sample(NAMES, len(NAMES))
    target = rng.choice(names)
    memory = dict(zip(names, rng.sample(range(128, 4096), len(names))))  # distinct: one answers
    items = [
        {
            "name": name,
            "image": f"registry.local/team/svc-{rng.randrange(999)}:1.{rng.randrange(30)}",
            "replicas": rng.randrange(1, 9),
            "limits": {"cpu": f"{rng.randrange(100, 4000)}m", "memory": f"{memory[name]}Mi"},
        }
        for name in names
    ]
    question = f"What is the memory limit of {target}?"
    return config_item("word_items", i, [json.dumps(items)], question, f"{memory[target]}Mi")


def _task(rng: random.Random, name: str) -> tuple[list[str], str]:
    hosts = [f"web-{k}" for k in range(1, 7)]
    changed = rng.choice(hosts)
    done = f'changed: [{changed}] => {{"pid": {rng.randrange(10_000, 99_999)}}}'
    lines = [f"TASK [{name} : restart service] " + "*" * 40]
    lines += [done if h == changed else f"ok: [{h}]" for h in hosts]
    return [*lines, ""], done


def word_tasks(rng: random.Random, i: int) -> BenchItem:
    """``ansible-playbook`` output of tasks named by plain words; the question asks which host
    one changed (its ``changed:`` line, a process id of its own in it)."""
    question = "Which host changed in the {} restart task?"
    head = ("PLAY [deploy services] " + "*" * 50, "")
    return _named(rng, ("word_tasks", i), len(NAMES), _task, question, head=head)


#: a Deployment's camelCase fields: the line above the one that answers, its key, the question
CAMEL_FIELDS = (
    ("livenessProbe:", "initialDelaySeconds", "What is the initial delay of the liveness probe?"),
    ("livenessProbe:", "periodSeconds", "How often does the liveness probe run, in seconds?"),
    ("readinessProbe:", "timeoutSeconds", "What timeout does the readiness probe have?"),
    ("spec:", "terminationGracePeriodSeconds", "What is the termination grace period?"),
    ("rollingUpdate:", "maxSurge", "What is the max surge of the rolling update?"),
    ("spec:", "progressDeadlineSeconds", "What is the progress deadline in seconds?"),
)


def _probe(rng: random.Random, kind: str, path: str) -> list[str]:
    return [
        f"        {kind}:",
        "          failureThreshold: 3",
        "          httpGet:",
        f"            path: /{path}",
        "            port: http",
        "            scheme: HTTP",
        f"          initialDelaySeconds: {rng.randrange(1, 600)}",
        f"          periodSeconds: {rng.randrange(1, 600)}",
        "          successThreshold: 1",
        f"          timeoutSeconds: {rng.randrange(1, 600)}",
    ]


def _manifest(rng: random.Random, name: str) -> list[str]:
    """``kubectl get deployment NAME -o yaml``: each value a random number, so one answers."""

    def n() -> int:
        return rng.randrange(1, 600)

    return [
        "apiVersion: apps/v1", "kind: Deployment", "metadata:",
        "  annotations:", f'    deployment.kubernetes.io/revision: "{n()}"',
        "  creationTimestamp: \"2026-11-30T09:12:44Z\"", "  generation: 7",
        "  labels:", f"    app: {name}", "    tier: backend", f"  name: {name}",
        "  namespace: prod", f'  resourceVersion: "{rng.randrange(10**6, 10**7)}"',
        f"  uid: {rng.getrandbits(128):032x}", "spec:",
        f"  progressDeadlineSeconds: {n()}", f"  replicas: {n() % 9 + 1}",
        "  revisionHistoryLimit: 10", "  selector:", "    matchLabels:", f"      app: {name}",
        "  strategy:", "    rollingUpdate:", f"      maxSurge: {n()}%",
        f"      maxUnavailable: {n() % 50}%", "    type: RollingUpdate", "  template:",
        "    metadata:", "      labels:", f"        app: {name}", "    spec:",
        "      containers:", "      - env:", "        - name: LOG_LEVEL", "          value: info",
        f"        image: registry.local/team/{name}:1.{n()}", "        imagePullPolicy: IfNotPresent",
        *_probe(rng, "livenessProbe", "healthz"), f"        name: {name}", "        ports:",
        f"        - containerPort: {8000 + n()}", "          name: http", "          protocol: TCP",
        *_probe(rng, "readinessProbe", "ready"), "        resources:", "          limits:",
        f"            cpu: {n()}m", f"            memory: {n()}Mi", "          requests:",
        f"            cpu: {n()}m", f"            memory: {n()}Mi",
        "      dnsPolicy: ClusterFirst", "      restartPolicy: Always",
        f"      serviceAccountName: {name}", f"      terminationGracePeriodSeconds: {n()}",
        "status:", "  availableReplicas: 3", "  conditions:", "  - lastTransitionTime: \"2026-11-30T09:14:02Z\"",
        "    message: Deployment has minimum availability.", "    reason: MinimumReplicasAvailable",
        '    status: "True"', "    type: Available", f"  observedGeneration: {n()}",
        "  readyReplicas: 3", "  replicas: 3", "  updatedReplicas: 3",
    ]  # fmt: skip


def camel_fields(rng: random.Random, i: int) -> BenchItem:
    """One Deployment's YAML; the question asks a camelCase field in plain words."""
    lines = _manifest(rng, rng.choice(NAMES))
    parent, key, question = rng.choice(CAMEL_FIELDS)
    below = lines.index(next(line for line in lines if line.strip() == parent))
    answer = next(line for line in lines[below:] if line.strip().startswith(key + ":"))
    return config_item("camel_fields", i, ["\n".join(lines)], question, answer)


#: a setting's key and how a question asks it
SETTINGS = (
    ("TIMEOUT_MS", "What is the {} timeout in milliseconds?"),
    ("DB_PORT", "Which DB port does {} use?"),
    ("DB_HOST", "What is the DB host of {}?"),
    ("LOG_LEVEL", "At what log level does {} run?"),
    ("MAX_CONNECTIONS", "How many max connections does {} allow?"),
    ("CACHE_TTL", "What is the cache TTL of {}?"),
    ("REGION", "In which region does {} run?"),
)


def _keys(rng: random.Random, shape: str, i: int, configmap: bool) -> BenchItem:
    pairs = [
        (f"{name.upper()}_{key}", f"{name}-db.internal" if key == "DB_HOST" else str(value))
        for name in rng.sample(NAMES, 16)
        for (key, _), value in zip(SETTINGS, rng.sample(range(1000, 99_999), len(SETTINGS)))
    ]
    (key, value) = rng.choice(pairs)
    name, setting = key.split("_", 1)
    question = dict(SETTINGS)[setting].format(name.lower())
    if configmap:
        head = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: services", "data:"]
        lines = head + [f'  {k}: "{v}"' for k, v in pairs]
        return config_item(shape, i, ["\n".join(lines)], question, f'  {key}: "{value}"')
    rng.shuffle(pairs)
    lines = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "HOME=/root"]
    lines += [f"{k}={v}" for k, v in pairs]
    return config_item(shape, i, ["\n".join(lines)], question, f"{key}={value}")


def env_keys(rng: random.Random, i: int) -> BenchItem:
    """``printenv`` of 16 services' settings; the question asks one in plain words."""
    return _keys(rng, "env_keys", i, configmap=False)


def configmap_keys(rng: random.Random, i: int) -> BenchItem:
    """The same keys as a ConfigMap's data; the question asks one in plain words."""
    return _keys(rng, "configmap_keys", i, configmap=True)


NAMED_RECORDS: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "server_fields": server_fields,
    "worker_log": worker_log,
    "word_services": word_services,
    "word_deployments": word_deployments,
    "word_resources": word_resources,
    "word_units": word_units,
    "word_items": word_items,
    "word_tasks": word_tasks,
    "env_keys": env_keys,
    "configmap_keys": configmap_keys,
    "camel_fields": camel_fields,
}
