"""The benchmark harness behind ``promptslim bench``: datasets, model backends, metrics,
side-by-side runs and their reports.

Submodules import their heavy dependencies (torch, transformers, httpx, matplotlib) inside the
functions that need them, so importing ``promptslim.bench`` costs no more than promptslim.
"""
