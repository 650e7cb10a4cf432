"""Analyzers turn text into index terms; they are shared by retrievers, generators and judges.

The ``en`` analyzer tokenises like scikit-learn's CountVectorizer (words of two or more word
characters), lower-cases, drops English stopwords and applies the Snowball stemmer, which is
exactly what ``bm25s.tokenize(stopwords="en", stemmer=Stemmer("english"))`` does; so a BM25 index
built through rag-bench scores like bm25s used directly.

Chinese has no spaces between words, so ``en`` would read a whole Chinese clause as one "word".
The ``zh`` analyzer segments runs of Han characters into words (jieba's dictionary and algorithm,
through the Rust port ``rjieba``; the default ``mode=search`` adds the words inside long words)
or, with ``mode=bigrams``, into overlapping character bigrams; Latin letters and digits inside
Chinese text stay words. The ``auto`` analyzer reads text without
any Han character exactly like ``en`` and mixed text run by run: Han runs like ``zh``, the rest
through ``en``'s stopwords and stemmer. Full-width letters and digits (``７``, ``ＡＢＣ``) are
folded to their ASCII forms by both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_bench.plugins import component

TOKEN = re.compile(r"(?u)\b\w\w+\b")

# Han characters: the unified ideographs with extensions A-G, compatibility ideographs and 〇.
HAN = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
HAN_CHAR = re.compile(f"[{HAN}]")
# A text as alternating runs: group 1 a run of Han characters, group 2 a run of anything else.
SCRIPT_RUNS = re.compile(f"([{HAN}]+)|([^{HAN}]+)")
# Words of the non-Han runs inside Chinese text: decimal numbers, then runs of letters/digits.
LATIN_WORD = re.compile(r"\d+(?:\.\d+)+|[^\W_]+")
WORD_RUN = re.compile(r"\w+")
LETTER_WORD = re.compile(f"[^\\W\\d_{HAN}]+")
# Full-width ASCII variants (ＡＢＣ, ７, ！) and the ideographic space, to their ASCII forms.
FULL_WIDTH = {**{c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}, 0x3000: 0x20}

# Sentence ends: English punctuation followed by space and a capital, digit, opening bracket or
# Han character; a blank line; Chinese end punctuation (。．！？；, an ellipsis or ASCII .!? right
# after a Han character), together with the closing quotes and brackets that follow it; and a
# line break next to Chinese text (list items and table rows rarely end in 。, and Chinese is
# seldom hard-wrapped).
CLOSERS = "”’」』）)】》〕］"
SENTENCE_END = re.compile(
    f"(?<=[.!?])\\s+(?=[\"'(\\[【“「‘]|[A-Z0-9]|[{HAN}])"
    "|\\n\\s*\\n"
    f"|(?P<cjk>(?:[。．！？；]|(?<=[{HAN}])[.!?…])[。．！？；.!?…]*[{CLOSERS}]*)\\s*"
    f"|(?<=[{HAN}：，、{CLOSERS}])[ \\t|｜]*\\n\\s*|[ \\t]*\\n\\s*(?=[ \\t|｜]*[{HAN}])"
)

# Short list of Chinese function words: particles, pronouns, prepositions, conjunctions,
# question words and modal "can". Negation words (不, 没有, 无法 ...) are deliberately absent:
# they carry meaning, and the judge's negation guard reads them.
ZH_STOPWORDS = frozenset(
    """
    的 地 得 了 着 过 之 其 和 与 及 以及 或 或者 并 并且 而 而且 且 也 都 就 还 又 再 才 即
    是 为 在 于 对 对于 向 从 把 被 让 给 将 以 由 按 按照 跟 同 比 关于 通过 根据
    这 那 这个 那个 这些 那些 这里 那里 此 该 每 各 某 本 其中 其他 其它
    我 你 您 他 她 它 我们 你们 他们 她们 它们 自己 大家
    吗 呢 吧 啊 呀 嘛 哦 么 呗 啦
    什么 怎么 怎样 怎么样 如何 哪 哪个 哪些 哪里 为什么 多少 多久 多长 几 几个 谁
    是否 是不是 请问 什么时候 时候
    一个 一些 一下 有 有的 个 些 等 等等 中 里
    如果 因为 所以 但 但是 然而 因此 虽然 还是 以便 可以 可 能 能够 会 要 需要 应该
    很 更 最 非常 比较 已 已经 正在 只 仅 即可
    """.split()
)


@component(
    "analyzer",
    "en",
    description="lowercase, English stopwords, Snowball stemming",
    stopwords=True,
    stem=True,
)
class EnglishAnalyzer:
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


def fold_width(text: str) -> str:
    """Full-width ASCII variants as ASCII (``７天`` → ``7天``); the length is unchanged."""
    return text.translate(FULL_WIDTH)


def has_han(text: str) -> bool:
    return HAN_CHAR.search(text) is not None


def cjk_share(text: str) -> float:
    """How Chinese a text is: Han characters against Latin words, one word weighing as much as
    1.5 characters (a Chinese word is about that long); 0 without Han, 1 without Latin words."""
    han = len(HAN_CHAR.findall(text))
    if not han:
        return 0.0
    return han / (han + 1.5 * len(LETTER_WORD.findall(text)))


def is_chinese(text: str) -> bool:
    """Whether a text is mainly Chinese (``cjk_share`` ≥ 0.5): answer it in Chinese."""
    return cjk_share(text) >= 0.5


class _Segmenter:
    """jieba word segmentation of Han runs, through its Rust port ``rjieba`` (loaded once)."""

    _module = None

    @classmethod
    def module(cls):
        if cls._module is None:
            from rag_bench.plugins import import_backend

            cls._module = import_backend("rjieba", "pip install rjieba", "Chinese segmentation")
        return cls._module


ZH_MODES = ("words", "search", "bigrams")


def han_words(run: str, mode: str = "words", hmm: bool = False) -> list[str]:
    """Tokens of one run of Han characters: jieba words (``words``), jieba's search-engine mode
    that adds the dictionary words inside long words (``search``: 工作日内 → 工作, 工作日,
    工作日内), or overlapping character bigrams (``bigrams``; a single character stays a
    unigram)."""
    if mode == "bigrams":
        return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    if mode == "search":
        return _Segmenter.module().cut_for_search(run, hmm)
    return _Segmenter.module().cut(run, hmm)


def zh_tokens(text: str, mode: str = "words", hmm: bool = False) -> list[str]:
    """All tokens of a (possibly mixed) text, no stopword removed: Han runs segmented, Latin
    letters and digits as lower-cased words, punctuation and spaces dropped."""
    out: list[str] = []
    for han, other in SCRIPT_RUNS.findall(fold_width(text)):
        if han:
            out.extend(han_words(han, mode, hmm))
        else:
            out.extend(LATIN_WORD.findall(other.lower()))
    return out


@component(
    "analyzer",
    "zh",
    description="Chinese: jieba words, jieba search mode, or character bigrams (`mode`)",
    mode="search",
    stopwords=True,
    hmm=False,
)
class ChineseAnalyzer:
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
            _Segmenter.module()  # fail now, with the install hint, if rjieba is missing

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
    mode="search",
    stopwords=True,
    stem=True,
)
class AutoAnalyzer:
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


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``: English end punctuation, blank lines, and
    Chinese end punctuation with its closing quotes (``他说：“可以。”`` is one sentence)."""
    spans = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        end = match.start() + len(match.group("cjk") or "")
        if text[start:end].strip():
            spans.append(_trim(text, start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(_trim(text, start, len(text)))
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
