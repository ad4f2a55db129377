"""The plain library call, just before an OpenAI-compatible chat request.

Builds a chat-completions body (system prompt, a few turns, retrieved documents), slims it with
promptslim's pipeline, and prints what would be sent. No server needed; with ``--url`` the
slimmed body is also POSTed there (any OpenAI-compatible endpoint: vLLM, SGLang, llama.cpp).

    python examples/plain_openai_request.py
    python examples/plain_openai_request.py --url http://localhost:8000/v1/chat/completions
"""

from __future__ import annotations

import argparse
import json
import urllib.request

from promptslim import Pipeline, Request

BODY = {
    "model": "my-model",
    "temperature": 0.2,
    "messages": [
        {
            "role": "system",
            "content": "You are the support assistant of Acme Cloud.\n\nToday is 2025-03-14.  Answer briefly and cite documents.",
        },
        {"role": "user", "content": "My deploys fail since this morning."},
        {
            "role": "assistant",
            "content": "Sorry to hear that. Which region do you deploy to, and what error do you see?",
        },
        {
            "role": "user",
            "content": "eu-west-2, and the log says quota exceeded for build minutes.",
        },
        {
            "role": "assistant",
            "content": "Build minutes are counted per workspace and reset on the 1st of each month.",
        },
        {"role": "user", "content": "How do I raise my build-minute quota?"},
    ],
    "documents": [
        {
            "id": "kb-17",
            "text": "Build minutes: every workspace gets 2,000 build minutes a month. Owners can raise the quota under Settings > Billing > Build minutes, up to 50,000.",
            "metadata": {"title": "Build quotas"},
        },
        {
            "id": "kb-02",
            "text": "Regions: Acme Cloud runs in eu-west-2, us-east-1 and ap-south-1. Data stays in the region you choose.",
            "metadata": {"title": "Regions"},
        },
        {
            "id": "kb-44",
            "text": "Billing: invoices are issued on the 1st of each month. Quota changes apply immediately and are billed pro rata.",
            "metadata": {"title": "Billing"},
        },
        {
            "id": "kb-09",
            "text": "Passwords: reset your password from the sign-in page. Two-factor authentication is recommended.",
            "metadata": {"title": "Accounts"},
        },
        {
            "id": "kb-31",
            "text": "Build cache: cached layers do not count towards build minutes. Enable the cache in the project's build settings.",
            "metadata": {"title": "Build cache"},
        },
    ],
}

CONFIG = {
    "budget": {"total": 400},
    "stages": [
        {"name": "prefix"},
        {"name": "history"},
        {"name": "retrieval", "scorer": "bm25", "max_k": 3},  # bm25: no model to load
        {"name": "compress"},
    ],
    "on_infeasible": "best_effort",
}


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--url", help="POST the slimmed body to this chat-completions URL")
    opts = args.parse_args()

    result = Pipeline.from_config(CONFIG).run(Request.from_openai(BODY))
    body = result.to_openai()  # documents rendered into a message before the last user turn

    report = result.report
    print(f"tokens: {report.tokens_in} -> {report.tokens_out} ({report.ratio:.0%})")
    for stage in report.stages:
        print(
            f"  {stage.stage:<10} {stage.tokens_in:>5} -> {stage.tokens_out:<5} {stage.ms:6.2f} ms"
        )
    print(f"kept documents: {[d.id for d in result.documents]}")
    print(json.dumps(body, indent=2))

    if opts.url:
        request = urllib.request.Request(
            opts.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            print(json.loads(response.read())["choices"][0]["message"]["content"])


if __name__ == "__main__":
    main()
