"""Analyzers turn text into index terms; they are shared by retrievers, generators and judges.

The ``en`` analyzer tokenises like scikit-learn's CountVectorizer (words of two or more word
characters), lower-cases, drops English stopwords and applies the Snowball stemmer, which is
exactly what ``bm25s.tokenize(stopwords="en", stemmer=Stemmer("english"))`` does; so a BM25 index
built through rag-bench scores like bm25s used directly.

Chinese has no spaces between words, so ``en`` would read a whole Chinese clause as one "word".
The ``zh`` analyzer segments runs of Han characters into words (jieba's dictionary and algorithm,
through the Rust port ``rjieba``; the default ``mode=search`` adds the words inside long words)
or, with ``mode=bigrams``, into overlapping character bigrams; Latin letters and digits inside
Chinese text stay words. The ``auto`` analyzer reads text without any Han character exactly like
``en`` and mixed text run by run: Han runs like ``zh``, the rest through ``en``'s stopwords and
stemmer. Full-width letters and digits (``７``, ``ＡＢＣ``) are folded to their ASCII forms by both.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_bench.components.base import Analyzer
from rag_bench.components.registry import component
from rag_bench.text.scripts import (
    SCRIPT_RUNS,
    TOKEN,
    WORD_RUN,
    ZH_MODES,
    ZH_STOPWORDS,
    Segmenter,
    fold_width,
    han_words,
    has_han,
    zh_tokens,
)


@component(
    "analyzer",
    "en",
    description="lowercase, English stopwords, Snowball stemming",
)
class EnglishAnalyzer(Analyzer):
    def __init__(self, stopwords: bool = True, stem: bool = True):
        from bm25s.stopwords import STOPWORDS_EN

        self.stopwords = frozenset(STOPWORDS_EN) if stopwords else frozenset()
        self.stemmer = _snowball_english() if stem else None
        self._stems: dict[str, str] = {}

    def __getstate__(self) -> dict:
        """A copy for another process (a Ray task): the stemmer, a C object, is made anew."""
        return {**self.__dict__, "stemmer": self.stemmer is not None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.stemmer = _snowball_english() if state["stemmer"] else None

    def words(self, text: str) -> list[str]:
        """Lower-cased words without stopwords, before stemming."""
        return [t for t in TOKEN.findall(text.lower()) if t not in self.stopwords]

    def _stem(self, words: list[str]) -> list[str]:
        if self.stemmer is None:
            return words
        missing = [w for w in set(words) if w not in self._stems]
        if missing:
            self._stems.update(zip(missing, self.stemmer.stemWords(missing)))
        return [self._stems[w] for w in words]

    def terms(self, text: str) -> list[str]:
        """Index terms of one text."""
        return self._stem(self.words(text))

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.terms(text) for text in texts]


def _snowball_english():
    import Stemmer

    return Stemmer.Stemmer("english")


@component(
    "analyzer",
    "zh",
    description="Chinese: jieba words, jieba search mode, or character bigrams (`mode`)",
)
class ChineseAnalyzer(Analyzer):
    """Chinese word segmentation for retrieval and judging.

    ``mode=words`` segments each run of Han characters with jieba's dictionary (``hmm=True``
    adds jieba's HMM guesses for words not in the dictionary, which makes the segmentation of
    the same phrase depend more on its context); ``mode=search`` is jieba's search-engine mode,
    the same words plus the shorter dictionary words inside long ones, so that 工作日 in a query
    meets 工作日内 in a passage; ``mode=bigrams`` indexes overlapping character bigrams
    (unigrams for single characters), the dictionary-free approach of Lucene's CJKAnalyzer.
    Latin words and numbers stay whole and lower-cased, without stemming.

    ``search`` is the default: on the Chinese benchmark (lumen-mall-zh) the three modes retrieve
    within noise of each other, ``search`` with the best recall@10; on bigrams the extractive
    generator refuses far more often (query bigrams that straddle two words, such as 款多 in
    退款多久, occur in no passage) and the lexical judge misses paraphrased support.
    """

    def __init__(self, mode: str = "search", stopwords: bool = True, hmm: bool = False):
        if mode not in ZH_MODES:
            from rag_bench.errors import UnknownNameError

            raise UnknownNameError("zh analyzer mode", mode, ZH_MODES)
        self.mode, self.hmm = mode, hmm
        self.stopwords = ZH_STOPWORDS if stopwords else frozenset()
        if mode != "bigrams":
            Segmenter.module()  # fail now, with the install hint, if rjieba is missing

    def words(self, text: str) -> list[str]:
        """Tokens without stopwords (the same as the terms: nothing is stemmed)."""
        return [t for t in zh_tokens(text, self.mode, self.hmm) if t not in self.stopwords]

    def terms(self, text: str) -> list[str]:
        return self.words(text)

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.terms(text) for text in texts]


@component(
    "analyzer",
    "auto",
    description="en for text without Chinese; mixed text run by run (Han like zh, Latin like en)",
)
class AutoAnalyzer(Analyzer):
    """One analyzer for English, Chinese and mixed corpora.

    A text without Han characters is analyzed exactly like ``en`` (after folding full-width
    letters and digits). A text with Han characters is cut into script runs: Han runs are
    segmented like ``zh`` (``mode``) and lose Chinese stopwords; the other runs give words of two
    or more characters, and single digits, which lose English stopwords and are stemmed like
    ``en`` (so ``returns`` in a Chinese sentence meets ``return`` in an English one).
    """

    def __init__(self, mode: str = "search", stopwords: bool = True, stem: bool = True):
        self.en = EnglishAnalyzer(stopwords=stopwords, stem=stem)
        self.zh = ChineseAnalyzer(mode=mode, stopwords=stopwords)

    def _tagged(self, text: str) -> list[tuple[str, bool]]:
        """(word, is_latin) pairs of a text with Han characters, stopwords removed."""
        out: list[tuple[str, bool]] = []
        for han, other in SCRIPT_RUNS.findall(text):
            if han:
                out.extend((w, False) for w in han_words(han, self.zh.mode, self.zh.hmm))
            else:
                out.extend((w, True) for w in WORD_RUN.findall(other.lower()))
        return [(w, latin) for w, latin in out if self._keep(w, latin)]

    def _keep(self, word: str, latin: bool) -> bool:
        if latin:
            return (len(word) > 1 or word.isdigit()) and word not in self.en.stopwords
        return word not in self.zh.stopwords

    def words(self, text: str) -> list[str]:
        text = fold_width(text)
        if not has_han(text):
            return self.en.words(text)
        return [w for w, _ in self._tagged(text)]

    def terms(self, text: str) -> list[str]:
        text = fold_width(text)
        if not has_han(text):
            return self.en.terms(text)
        tagged = self._tagged(text)
        stems = iter(self.en._stem([w for w, latin in tagged if latin]))
        return [next(stems) if latin else w for w, latin in tagged]

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.terms(text) for text in texts]
