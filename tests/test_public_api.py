import subprocess
import sys
import types

import promptslim


def test_all_matches_public_names() -> None:
    public = {
        name
        for name, value in vars(promptslim).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(promptslim.__all__) == public
    assert len(promptslim.__all__) == len(set(promptslim.__all__))


def test_every_exported_name_resolves() -> None:
    for name in promptslim.__all__:
        assert getattr(promptslim, name) is not None


def test_import_loads_no_heavy_dependency() -> None:
    heavy = ["torch", "transformers", "sentence_transformers", "faiss", "llmlingua", "rank_bm25",
             "langchain_core", "langchain", "llama_index", "jieba", "opentelemetry"]
    code = (
        "import sys, promptslim\n"
        f"loaded = [m for m in {heavy!r} if m in sys.modules]\n"
        "print(','.join(loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import promptslim loaded: {out.stdout.strip()}"


def test_error_tree_is_one_family() -> None:
    for name in ("InvalidRequest", "ConfigError", "UnknownName", "DatasetError", "BudgetInfeasible",
                 "BackendUnavailable", "BackendError", "StageTimeout"):
        assert issubclass(getattr(promptslim, name), promptslim.PromptSlimError)
