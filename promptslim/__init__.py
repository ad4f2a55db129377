"""promptslim: make LLM prompts cheaper to prefill, before every request.

The public API is what this module re-exports; ``tests/test_public_api.py`` checks ``__all__``.
Importing promptslim loads no heavy dependency (torch, transformers, faiss, llmlingua...).
"""

from .backends.compress import COMPRESSORS as COMPRESSORS
from .backends.compress import Compressor as Compressor
from .backends.redis_store import RedisSummaryCache as RedisSummaryCache
from .backends.redis_store import RedisToolStore as RedisToolStore
from .backends.redis_store import RedisVectorCache as RedisVectorCache
from .backends.scorers import SCORERS as SCORERS
from .backends.scorers import Scorer as Scorer
from .backends.shared_stats import STORE_STATS as STORE_STATS
from .backends.shared_stats import StoreStats as StoreStats
from .backends.summarisers import SUMMARISERS as SUMMARISERS
from .backends.summarisers import Summariser as Summariser
from .backends.summarisers import SummaryCache as SummaryCache
from .backends.summary_store import SqliteSummaryCache as SqliteSummaryCache
from .backends.tools import TOOL_COMPRESSORS as TOOL_COMPRESSORS
from .backends.tools import ToolCompressor as ToolCompressor
from .backends.tools import ToolContext as ToolContext
from .backends.tools.expand import EXPAND_TOOL as EXPAND_TOOL
from .backends.tools.expand import answer_expand_call as answer_expand_call
from .backends.tools.expand import expand as expand
from .backends.tools.expand import is_expand_call as is_expand_call
from .backends.tools.store import MemoryToolStore as MemoryToolStore
from .backends.tools.store import SqliteToolStore as SqliteToolStore
from .backends.tools.store import ToolStore as ToolStore
from .budget import Allocation as Allocation
from .budget import allocate as allocate
from .context_blocks import ContextBlock as ContextBlock
from .context_blocks import find_context_block as find_context_block
from .errors import BackendError as BackendError
from .errors import BackendUnavailable as BackendUnavailable
from .errors import BudgetInfeasible as BudgetInfeasible
from .errors import ConfigError as ConfigError
from .errors import DatasetError as DatasetError
from .errors import InvalidRequest as InvalidRequest
from .errors import PromptSlimError as PromptSlimError
from .errors import StageTimeout as StageTimeout
from .errors import UnknownName as UnknownName
from .languages import LanguagePair as LanguagePair
from .languages import language_of as language_of
from .languages import languages_differ as languages_differ
from .limits import RequestLimits as RequestLimits
from .limits import check_body as check_body
from .pipeline import Pipeline as Pipeline
from .query import Ask as Ask
from .query import ask_of as ask_of
from .query import asks_for_whole as asks_for_whole
from .query import questions_in as questions_in
from .registry import STAGES as STAGES
from .registry import Registry as Registry
from .render import render_documents as render_documents
from .stages.base import BaseStage as BaseStage
from .stages.base import PassThrough as PassThrough
from .stages.base import Stage as Stage
from .stages.base import StageLog as StageLog
from .stages.compress import CompressStage as CompressStage
from .stages.compress_options import CompressOptions as CompressOptions
from .stages.history import HistoryStage as HistoryStage
from .stages.history_options import HistoryOptions as HistoryOptions
from .stages.prefix import PrefixStage as PrefixStage
from .stages.prefix_options import PrefixOptions as PrefixOptions
from .stages.retrieval import RetrievalStage as RetrievalStage
from .stages.retrieval_options import RetrievalOptions as RetrievalOptions
from .stages.tools import ToolsStage as ToolsStage
from .stages.tools_options import ToolsOptions as ToolsOptions
from .tokens import TokenCounter as TokenCounter
from .tokens import count_messages as count_messages
from .tokens import count_request as count_request
from .tokens import count_tools as count_tools
from .tokens import get_counter as get_counter
from .tokens import message_counts as message_counts
from .tracing import report_figures as report_figures
from .types import Budget as Budget
from .types import Change as Change
from .types import ContentPart as ContentPart
from .types import Document as Document
from .types import Message as Message
from .types import Report as Report
from .types import Request as Request
from .types import Result as Result
from .types import StageReport as StageReport
from .types import ToolCall as ToolCall

__version__ = "0.1.0"

__all__ = [
    "COMPRESSORS",
    "EXPAND_TOOL",
    "SCORERS",
    "STAGES",
    "STORE_STATS",
    "SUMMARISERS",
    "TOOL_COMPRESSORS",
    "Allocation",
    "Ask",
    "BackendError",
    "BackendUnavailable",
    "BaseStage",
    "Budget",
    "BudgetInfeasible",
    "Change",
    "CompressOptions",
    "CompressStage",
    "Compressor",
    "ConfigError",
    "ContentPart",
    "ContextBlock",
    "DatasetError",
    "Document",
    "HistoryOptions",
    "HistoryStage",
    "InvalidRequest",
    "LanguagePair",
    "MemoryToolStore",
    "Message",
    "PassThrough",
    "Pipeline",
    "PrefixOptions",
    "PrefixStage",
    "PromptSlimError",
    "RedisSummaryCache",
    "RedisToolStore",
    "RedisVectorCache",
    "Registry",
    "Report",
    "Request",
    "RequestLimits",
    "Result",
    "RetrievalOptions",
    "RetrievalStage",
    "Scorer",
    "SqliteSummaryCache",
    "SqliteToolStore",
    "Stage",
    "StageLog",
    "StageReport",
    "StageTimeout",
    "StoreStats",
    "Summariser",
    "SummaryCache",
    "TokenCounter",
    "ToolCall",
    "ToolCompressor",
    "ToolContext",
    "ToolStore",
    "ToolsOptions",
    "ToolsStage",
    "UnknownName",
    "allocate",
    "answer_expand_call",
    "ask_of",
    "asks_for_whole",
    "check_body",
    "count_messages",
    "count_request",
    "count_tools",
    "expand",
    "find_context_block",
    "get_counter",
    "is_expand_call",
    "language_of",
    "languages_differ",
    "message_counts",
    "questions_in",
    "render_documents",
    "report_figures",
]
