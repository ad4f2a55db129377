"""Load on paper: a continuous-batching server simulation and SLO planning.

- ``CostModel``: prefill cost curve ``t(n) = a + b n + c n^2`` (given or fitted) and decode cost
- ``fit_single_stream``: a batch-1 cost model from one-at-a-time requests (and the server's own
  timings, ``parse_llama_perf``); ``roofline_cost``: one from a GPU's published peak figures
- ``simulate_server``: the engine (token budget, batch size, chunked prefill, vLLM prefix cache)
  fed by ``SimRequest``s at a closed-loop concurrency or open-loop ``arrival_times``
- ``load_prompts``: prompt token streams from a benchmark dataset, per promptslim config
- ``plan_budget``: the largest prompt budget per request that meets a TTFT P99 SLO, searched
  on what the pipeline sends under each budget (``pipeline_stream``) or on capped prompts
- ``run_loadtest``: the measured side: streaming requests against a real server (``loadtest``)
"""

from __future__ import annotations

from .calibrate import ServerTiming as ServerTiming
from .calibrate import SingleStreamFit as SingleStreamFit
from .calibrate import fit_single_stream as fit_single_stream
from .calibrate import parse_llama_perf as parse_llama_perf
from .costmodel import CostModel as CostModel
from .costmodel import fit_prefill as fit_prefill
from .engine import RequestTiming as RequestTiming
from .engine import ServerConfig as ServerConfig
from .engine import ServerRun as ServerRun
from .engine import SimRequest as SimRequest
from .engine import simulate_server as simulate_server
from .loadtest import LoadtestOptions as LoadtestOptions
from .loadtest import PreparedRequest as PreparedRequest
from .loadtest import RequestRecord as RequestRecord
from .loadtest import run_loadtest as run_loadtest
from .plan import Plan as Plan
from .plan import Slimmer as Slimmer
from .plan import dataset_profile as dataset_profile
from .plan import pipeline_stream as pipeline_stream
from .plan import plan_budget as plan_budget
from .plan import write_config as write_config
from .roofline import Hardware as Hardware
from .roofline import Model as Model
from .roofline import roofline_cost as roofline_cost
from .workload import arrival_times as arrival_times
from .workload import extend_stream as extend_stream
from .workload import load_prompts as load_prompts
from .workload import prompt_tokens as prompt_tokens

__all__ = [
    "CostModel",
    "Hardware",
    "LoadtestOptions",
    "Model",
    "Plan",
    "PreparedRequest",
    "RequestRecord",
    "RequestTiming",
    "ServerConfig",
    "ServerRun",
    "ServerTiming",
    "SimRequest",
    "SingleStreamFit",
    "Slimmer",
    "arrival_times",
    "dataset_profile",
    "extend_stream",
    "fit_prefill",
    "fit_single_stream",
    "load_prompts",
    "parse_llama_perf",
    "pipeline_stream",
    "plan_budget",
    "prompt_tokens",
    "roofline_cost",
    "run_loadtest",
    "simulate_server",
    "write_config",
]
