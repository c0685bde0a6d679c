"""WebShop's search engine: BM25 over each product's text, built with ``bm25s``.

WebShop indexes, per product, its title, description, first bullet point and option text
(``search_engine/convert_product_file_format.py``), lower-cased, with Lucene (pyserini:
English stop words, Porter stemming, BM25 with k1=0.9, b=0.4) and returns the top 50 hits.
This index does the same with ``bm25s``: English stop words, the Snowball English stemmer
(PyStemmer) and the same BM25 parameters; products that share no term with the query are
not returned. The index is built once per catalog (``prepare``) and saved next to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import bm25s
import Stemmer

SEARCH_TOP_K = 50  # WebShop's SEARCH_RETURN_N
K1, B = 0.9, 0.4  # pyserini's LuceneSearcher defaults
_STEMMER = Stemmer.Stemmer("english")


def product_text(product: dict[str, Any]) -> str:
    """The text WebShop indexes for a product."""
    options = ", and ".join(f"{name}: {', '.join(values)}"
                            for name, values in product["options"].items())
    bullets = product["BulletPoints"][0] if product["BulletPoints"] else ""
    return " ".join([product["Title"], product["Description"], bullets, options]).lower()


def _tokens(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=_STEMMER, return_ids=False,
                          show_progress=False)


class SearchIndex:
    """BM25 over a catalog's products; ``search(query)`` gives the ASINs of the best hits."""

    ASINS = "asins.json"

    def __init__(self, retriever: bm25s.BM25, asins: list[str]):
        self.retriever, self.asins = retriever, asins

    @classmethod
    def build(cls, products: list[dict[str, Any]]) -> SearchIndex:
        retriever = bm25s.BM25(k1=K1, b=B)
        retriever.index(_tokens([product_text(p) for p in products]), show_progress=False)
        return cls(retriever, [p["asin"] for p in products])

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.retriever.save(str(folder), show_progress=False)
        (folder / self.ASINS).write_text(json.dumps(self.asins))

    @classmethod
    def load(cls, folder: Path) -> SearchIndex:
        folder = Path(folder)
        if not (folder / cls.ASINS).is_file():
            raise FileNotFoundError(f"no WebShop search index in {folder}; re-run prepare")
        retriever = bm25s.BM25.load(str(folder), show_progress=False)
        return cls(retriever, json.loads((folder / cls.ASINS).read_text()))

    def search(self, query: str, k: int = SEARCH_TOP_K) -> list[str]:
        """The ASINs of up to ``k`` products sharing a term with ``query``, best first (equal
        scores in catalog order, so a search gives the same page every time)."""
        tokens = _tokens([query])
        if not tokens[0]:
            return []
        k = min(k, len(self.asins))
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        hits = sorted((-float(s), int(d)) for d, s in zip(docs[0], scores[0]) if s > 0)
        return [self.asins[d] for _, d in hits]
