"""Framework adapters: ``promptslim.integrations.langchain`` and ``promptslim.integrations.llamaindex``.

Import the adapter you need from its module. This package imports nothing itself, so that
``import promptslim`` never loads langchain-core or llama-index-core.
"""

from __future__ import annotations

__all__: list[str] = []
