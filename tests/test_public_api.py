import ast
import importlib
import inspect
import subprocess
import sys
import types
from pathlib import Path

import promptslim


def test_all_matches_public_names() -> None:
    public = {
        name
        for name, value in vars(promptslim).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(promptslim.__all__) == public
    assert len(promptslim.__all__) == len(set(promptslim.__all__))


def _reexport_lines() -> dict[str, tuple[str, str]]:
    """``{exported name: (module, attribute)}`` from ``__init__.py``'s ``from .x import a as a``
    lines, read from the source (so a name bound any other way is not counted)."""
    tree = ast.parse(Path(promptslim.__file__).read_text(encoding="utf-8"))
    lines: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                lines[alias.asname or alias.name] = (f"promptslim.{node.module}", alias.name)
    return lines


def test_every_exported_name_is_the_object_its_module_exports() -> None:
    lines = _reexport_lines()
    # each name in __all__ has its own re-export line, and each line's name is in __all__
    assert set(lines) == set(promptslim.__all__)
    for name in promptslim.__all__:
        module_name, attribute = lines[name]
        module = importlib.import_module(module_name)
        obj = getattr(promptslim, name)
        assert obj is getattr(module, attribute), f"{name} is not {module_name}.{attribute}"
        if hasattr(module, "__all__"):
            assert attribute in module.__all__, f"{name} is private in {module_name}"
        # ``from promptslim import NAME`` works, and gives the same object
        namespace: dict[str, object] = {}
        exec(f"from promptslim import {name}", namespace)  # noqa: S102 (names from __all__)
        assert namespace[name] is obj
        if isinstance(obj, type) or inspect.isfunction(obj):
            # a class or function is exported under its own name, by the module defining it
            assert obj.__name__ == name and obj.__module__.startswith("promptslim.")
            assert getattr(importlib.import_module(obj.__module__), name) is obj


def test_nothing_public_is_missing_from_all() -> None:
    """Every error class, every built-in stage and every plug-in registry of the core is part of
    the public API."""
    from promptslim import errors, registry
    from promptslim.backends import compress, scorers, summarisers, tools

    public = set(promptslim.__all__)
    error_classes = {
        name for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, promptslim.PromptSlimError)
    }  # fmt: skip
    assert error_classes and error_classes <= public, error_classes - public
    stages = (promptslim.STAGES.get(name) for name in promptslim.STAGES.names())
    # built-in ones only: a test may register a stage of its own in the shared registry
    stage_classes = {s.__name__ for s in stages if s.__module__.startswith("promptslim.")}
    assert stage_classes and stage_classes <= public, stage_classes - public
    registries = {
        name
        for module in (registry, compress, scorers, summarisers, tools)
        for name, value in vars(module).items()
        if isinstance(value, registry.Registry) and name in getattr(module, "__all__", ())
    }
    assert registries and registries <= public, registries - public


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
