"""Retrieval: documents, retrievers, and the post-processors that screen and rank them.

```python
from jevrefine.retrieval import Document, SqliteFtsRetriever, JevDocumentFilter

retriever = SqliteFtsRetriever("docs.db")
await retriever.add([Document("eiffel", "The Eiffel Tower is 330 metres tall.")])
advisor = RetrievalAdvisor(retriever, post_processors=[JevDocumentFilter(JudgeClient())])
```

`Retriever` and `DocumentPostProcessor` are protocols: plug a vector store in by writing an
`async retrieve(query, *, top_k=None)`. `SqliteFtsRetriever` is the embedded default.
"""

from __future__ import annotations

from .._sqlite_worker import DatabaseFileError as DatabaseFileError
from ._document import Document as Document
from ._document import DocumentPostProcessor as DocumentPostProcessor
from ._document import Retriever as Retriever
from ._jev_filter import CLASSIFICATION_KEY as CLASSIFICATION_KEY
from ._jev_filter import FILTER_QUESTIONS as FILTER_QUESTIONS
from ._jev_filter import JEV_SCORES_KEY as JEV_SCORES_KEY
from ._jev_filter import DocumentClass as DocumentClass
from ._jev_filter import DocumentClassification as DocumentClassification
from ._jev_filter import FilterPolicy as FilterPolicy
from ._jev_filter import JevDocumentFilter as JevDocumentFilter
from ._jev_rerank import DEFAULT_RERANK_QUESTION as DEFAULT_RERANK_QUESTION
from ._jev_rerank import RERANK_QUESTION_ID as RERANK_QUESTION_ID
from ._jev_rerank import SCORE_KEY as SCORE_KEY
from ._jev_rerank import JevDocumentReranker as JevDocumentReranker
from ._sqlite_fts import SqliteFtsRetriever as SqliteFtsRetriever
from ._sqlite_fts import fts_query as fts_query

__all__ = [
    "CLASSIFICATION_KEY",
    "DEFAULT_RERANK_QUESTION",
    "FILTER_QUESTIONS",
    "JEV_SCORES_KEY",
    "RERANK_QUESTION_ID",
    "SCORE_KEY",
    "DatabaseFileError",
    "Document",
    "DocumentClass",
    "DocumentClassification",
    "DocumentPostProcessor",
    "FilterPolicy",
    "JevDocumentFilter",
    "JevDocumentReranker",
    "Retriever",
    "SqliteFtsRetriever",
    "fts_query",
]
