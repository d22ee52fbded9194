"""Text helpers shared by the run and its researchers: sentences with their citations, a
claim without them, and the keys that de-duplicate claims and passages."""

from __future__ import annotations

import hashlib
import re

# Sentences and claims are split the way the answer's citation check splits them.
from deepsearcher.agents.citations import CITATION, claim_of, sentences

__all__ = ["CITATION", "claim_of", "digest", "norm", "sentences"]


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def norm(text: str) -> str:
    """A claim's de-duplication key: lower case, no punctuation, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
