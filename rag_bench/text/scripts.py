"""Scripts and words: Han detection, full-width folding, Chinese word segmentation (jieba's
dictionary through the Rust port ``rjieba``) and the stopword lists the analyzers use.

The analyzers themselves are components (:mod:`rag_bench.components.analyzers`); this module is
the text processing they share with generators, judges and answer metrics.
"""

from __future__ import annotations

import re

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


class Segmenter:
    """jieba word segmentation of Han runs, through its Rust port ``rjieba`` (loaded once)."""

    _module = None

    @classmethod
    def module(cls):
        if cls._module is None:
            from rag_bench.errors import import_backend

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
        return Segmenter.module().cut_for_search(run, hmm)
    return Segmenter.module().cut(run, hmm)


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
