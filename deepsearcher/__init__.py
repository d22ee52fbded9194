"""deepsearcher: deep search over private documents.

Importing the package is cheap and has no side effects: heavy dependencies (torch, pymilvus,
unstructured) load when a component is first used.
"""

from deepsearcher.config import Settings, load_settings
from deepsearcher.errors import DeepSearcherError
from deepsearcher.searcher import DeepSearcher
from deepsearcher.types import Answer, LoadReport, Source, Usage

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
