"""Subject rules and the Sublist trie (see tokens.py and sublist.py)."""

from natsd.subjects.sublist import EMPTY_RESULT, InvalidSubjectError, Sublist, SublistResult
from natsd.subjects.tokens import (
    is_literal,
    is_valid_publish_subject,
    is_valid_subject,
    subject_matches,
    subjects_collide,
    subset,
    tokenize,
)

__all__ = [
    "Sublist",
    "SublistResult",
    "EMPTY_RESULT",
    "InvalidSubjectError",
    "is_valid_subject",
    "is_valid_publish_subject",
    "is_literal",
    "tokenize",
    "subject_matches",
    "subset",
    "subjects_collide",
]
