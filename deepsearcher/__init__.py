"""deepsearcher: deep search over private documents.

Importing the package is cheap and has no side effects: the public names below are PEP 562
lazy attributes, so ``import deepsearcher`` (and every submodule import, which runs this file
first) loads neither the pipeline nor torch, pymilvus or unstructured. ``loaders`` relies on
this to import ``deepsearcher.config`` without pulling in the facade above it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepsearcher.config import Settings, load_settings
    from deepsearcher.errors import DeepSearcherError
    from deepsearcher.searcher import DeepSearcher
    from deepsearcher.types import Answer, LoadReport, Source, Usage

# Public name -> the module that defines it.
_LAZY: dict[str, str] = {
    "Answer": "deepsearcher.types",
    "DeepSearcher": "deepsearcher.searcher",
    "DeepSearcherError": "deepsearcher.errors",
    "LoadReport": "deepsearcher.types",
    "Settings": "deepsearcher.config",
    "Source": "deepsearcher.types",
    "Usage": "deepsearcher.types",
    "load_settings": "deepsearcher.config",
}

__all__ = [
    "Answer",
    "DeepSearcher",
    "DeepSearcherError",
    "LoadReport",
    "Settings",
    "Source",
    "Usage",
    "load_settings",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deepsearcher' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
