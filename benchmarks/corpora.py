"""Synthetic English-like corpora and queries, generated deterministically from a seed.

The text imitates what a BM25 pipeline sees in English: about 40 % of the words are function
words (``the``, ``of``, ``which`` …, some of them stopwords), the rest content words drawn from a
Zipfian distribution over a vocabulary of invented words with English inflections (``trailmock``,
``trailmocks``, ``trailmocked``, ``trailmocking``, so stemming matters), a few numbers, sentences
of about 12 words that start with a capital and end with a full stop, and commas. Document
lengths vary (log-normal around ``mean_words``).

Each query is made from one source document: 2-4 of its content words, sometimes a frequent
word from elsewhere, inside a question frame ("how does the … ?"); that document is its one
relevant document. Queries get a category in turn (literal, paraphrase, multi-hop), so
per-category slicing works.

Generation is vectorised (numpy draws, pyarrow string joins) and cached in
``benchmarks/data/corpus-<params>/`` (git-ignored): ``docs.parquet`` (``id``, ``title``,
``text``), ``queries.parquet`` (``id``, ``text``, ``source``, ``category``) and a stamp.
:func:`ensure_beir` also writes the same data in the BEIR layout (``corpus.jsonl``,
``queries.jsonl``, ``qrels/test.tsv``) for ``rag-bench run --dataset``.

    python benchmarks/corpora.py --docs 100000 --queries 1000
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DATA_DIR = Path(__file__).resolve().parent / "data"
DOCS_FILE, QUERIES_FILE, PARAMS_FILE = "docs.parquet", "queries.parquet", "params.json"
CATEGORIES = ("literal", "paraphrase", "multi-hop")

# Function words with rough relative frequencies (English order); bm25s's stopword list holds
# some of them (the, of, and …), others (with, from, which, how …) survive as index terms.
FUNCTION_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "what can more other about into than them only could its these may some then two how also "
    "after any most over such where between both each because through those under while should "
    "very just before same during without again against"
).split()
ONSETS = "b c d f g h j k l m n p r s t v w z ch sh th st tr pl gr br cl fl sp cr dr".split()
VOWELS = "a e i o u ai ea ou io ee oa".split()
CODAS = ["", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "rt", "ng"]
SUFFIXES = ("", "s", "ed", "ing", "er", "ion", "ly", "ment", "able", "ness")
QUESTION_FRAMES = (
    "what is the {}",
    "how does the {} work",
    "why is {} used",
    "which {} is best",
    "{}",
    "where can I find {}",
    "how to configure {}",
    "what causes {}",
)
NUMBER_SHARE, FUNCTION_SHARE = 0.02, 0.40
SENTENCE_WORDS, COMMA_SHARE = 12, 0.05
GENERATOR = 1  # bump when the generator changes, so cached corpora are made anew
CONTENT_OFFSET = 20.0  # the most frequent content word is about 1 % of content words


@dataclass(frozen=True)
class Params:
    """Everything that determines the generated corpus and queries."""

    seed: int = 0
    docs: int = 100_000
    queries: int = 1_000
    mean_words: int = 60  # a passage-sized chunk, as BEIR's MS MARCO-like sets have
    stems: int = 40_000  # invented word stems; each gets 1-4 inflected forms
    zipf: float = 1.07  # exponent of the content-word rank distribution

    def default_dir(self) -> Path:
        name = (
            f"corpus-s{self.seed}-d{self.docs}-q{self.queries}-w{self.mean_words}"
            f"-v{self.stems}-z{self.zipf}"
        )
        return DATA_DIR / name


def vocabulary(rng: np.random.Generator, n_stems: int) -> np.ndarray:
    """Distinct invented content words: ``n_stems`` stems with 1-4 suffixed forms each, in a
    random order (the order is the Zipf rank)."""
    stems: dict[str, None] = {}
    while len(stems) < n_stems:
        n = n_stems - len(stems) + 1000
        syllables = rng.choice([1, 2, 3], size=n, p=[0.3, 0.5, 0.2])
        parts = [rng.integers(0, len(p), size=(n, 3)) for p in (ONSETS, VOWELS, CODAS)]
        for i in range(n):
            word = "".join(
                ONSETS[parts[0][i, j]] + VOWELS[parts[1][i, j]] + CODAS[parts[2][i, j]]
                for j in range(syllables[i])
            )
            if len(word) >= 3 and word not in FUNCTION_WORDS:
                stems.setdefault(word)
    chosen = list(stems)[:n_stems]
    n_forms = rng.integers(1, 5, size=n_stems)
    words: dict[str, None] = {}
    for stem, k in zip(chosen, n_forms):
        for suffix in rng.choice(SUFFIXES[1:], size=k - 1, replace=False).tolist() + [""]:
            words.setdefault(stem + suffix)
    out = np.array(list(words), dtype=object)
    return out[rng.permutation(len(out))]


def zipf_draw(
    rng: np.random.Generator, n: int, size: int, exponent: float, offset: float = 0.0
) -> np.ndarray:
    """``size`` ranks in ``[0, n)`` with probability proportional to
    ``1 / (rank + 1 + offset)^exponent`` (Zipf-Mandelbrot; the offset flattens the head)."""
    weights = 1.0 / (np.arange(1, n + 1, dtype=np.float64) + offset) ** exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size)), n - 1).astype(np.int32)


def doc_lengths(rng: np.random.Generator, n: int, mean: int) -> np.ndarray:
    """Log-normal lengths with the given mean, at least 8 words and at most 6x the mean."""
    sigma = 0.5
    raw = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size=n)
    return np.clip(np.round(raw), 8, 6 * mean).astype(np.int64)


def word_forms(words: np.ndarray) -> pa.Array:
    """Six spellings of every word: plain, ``,``, ``.``, then the same capitalised."""
    plain = pa.array(words.tolist(), pa.string())
    capital = pc.utf8_capitalize(plain)
    forms = []
    for base in (plain, capital):
        forms += [
            base,
            pc.binary_join_element_wise(base, ",", ""),
            pc.binary_join_element_wise(base, ".", ""),
        ]
    return pa.concat_arrays(forms)


def build_texts(rng, lengths: np.ndarray, pools: dict, exponent: float):
    """Texts of the given lengths. Returns the texts and, per token, its word id and whether it
    is a content word (for making queries)."""
    total = int(lengths.sum())
    n_content, n_function = len(pools["content"]), len(pools["function"])
    kind = rng.random(total)
    word = zipf_draw(rng, n_content, total, exponent, CONTENT_OFFSET)  # content word ids first
    function = kind < FUNCTION_SHARE
    word[function] = n_content + zipf_draw(rng, n_function, int(function.sum()), 1.0)
    number = (kind >= FUNCTION_SHARE) & (kind < FUNCTION_SHARE + NUMBER_SHARE)
    word[number] = n_content + n_function + rng.integers(0, 1000, size=int(number.sum()))
    content = ~(function | number)

    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    period = rng.random(total) < 1.0 / SENTENCE_WORDS
    period[starts[1:] - 1] = True  # every text ends a sentence
    capital = np.zeros(total, dtype=bool)
    capital[1:] = period[:-1]
    capital[starts[:-1]] = True
    comma = ~period & (rng.random(total) < COMMA_SHARE)
    form = capital * 3 + np.where(period, 2, comma.astype(np.int64))
    n_words = n_content + n_function + 1000
    spelled = pc.take(pools["forms"], pa.array(form * n_words + word))
    texts = pc.binary_join(pa.ListArray.from_arrays(pa.array(starts), spelled), " ")
    return texts, word, content, starts


def make_queries(rng, n: int, word, content, starts, words: np.ndarray, exponent: float):
    """Queries from random source documents (distinct), with their category."""
    n_docs = len(starts) - 1
    sources = rng.choice(n_docs, size=min(n, n_docs), replace=False)
    texts = []
    for i, doc in enumerate(sources):
        span = slice(starts[doc], starts[doc + 1])
        own = np.unique(word[span][content[span]])
        take = min(len(own), int(rng.integers(2, 5)))
        picked = [words[w] for w in rng.choice(own, size=take, replace=False)] if take else []
        if rng.random() < 0.3:  # a frequent word from elsewhere
            picked.append(words[zipf_draw(rng, len(words), 1, exponent)[0]])
        frame = QUESTION_FRAMES[i % len(QUESTION_FRAMES)]
        text = frame.format(" ".join(picked) or "nothing")
        texts.append(text[0].upper() + text[1:] + "?")
    categories = [CATEGORIES[i % len(CATEGORIES)] for i in range(len(sources))]
    return sources, texts, categories


def generate(params: Params, out: Path) -> None:
    rng = np.random.default_rng(params.seed)
    words = vocabulary(rng, params.stems)
    all_words = np.concatenate(
        [words, np.array(FUNCTION_WORDS, dtype=object), np.array([str(i) for i in range(1000)])]
    )
    pools = {"content": words, "function": FUNCTION_WORDS, "forms": word_forms(all_words)}
    lengths = doc_lengths(rng, params.docs, params.mean_words)
    texts, word, content, starts = build_texts(rng, lengths, pools, params.zipf)
    title_lengths = rng.integers(2, 6, size=params.docs)
    title_words = zipf_draw(rng, len(words), int(title_lengths.sum()), params.zipf)
    title_starts = np.concatenate([[0], np.cumsum(title_lengths)])
    titles = pc.utf8_capitalize(
        pc.binary_join(
            pa.ListArray.from_arrays(
                pa.array(title_starts), pa.array(words[title_words].tolist(), pa.string())
            ),
            " ",
        )
    )
    width = len(str(params.docs - 1))
    ids = pc.binary_join_element_wise(
        "d", pc.utf8_lpad(pc.cast(pa.array(np.arange(params.docs)), pa.string()), width, "0"), ""
    )
    pq.write_table(pa.table({"id": ids, "title": titles, "text": texts}), out / DOCS_FILE)
    sources, query_texts, categories = make_queries(
        rng, params.queries, word, content, starts, words, params.zipf
    )
    pq.write_table(
        pa.table(
            {
                "id": [f"q{i}" for i in range(len(sources))],
                "text": query_texts,
                "source": pc.take(ids, pa.array(sources)),
                "category": categories,
            }
        ),
        out / QUERIES_FILE,
    )


def _stamp(params: Params) -> dict:
    return {**asdict(params), "generator": GENERATOR}


def ensure(params: Params, out: Path | None = None, *, quiet: bool = False) -> Path:
    """The folder holding the corpus for ``params``, generating it unless already there."""
    out = Path(out) if out else params.default_dir()
    stamp = out / PARAMS_FILE
    there = (out / DOCS_FILE).is_file() and (out / QUERIES_FILE).is_file()
    if there and stamp.is_file() and json.loads(stamp.read_text()) == _stamp(params):
        return out
    out.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    started = time.perf_counter()
    generate(params, out)
    stamp.write_text(json.dumps(_stamp(params), indent=2) + "\n")
    if not quiet:
        print(f"generated {out} in {time.perf_counter() - started:.1f} s", flush=True)
    return out


def load_docs(folder: Path, columns=("id", "text")) -> dict[str, list]:
    """The documents' columns as Python lists."""
    table = pq.read_table(folder / DOCS_FILE, columns=list(columns))
    return {name: table.column(name).to_pylist() for name in columns}


def load_queries(folder: Path) -> dict[str, list]:
    table = pq.read_table(folder / QUERIES_FILE)
    return {name: table.column(name).to_pylist() for name in table.column_names}


def ensure_beir(params: Params, folder: Path | None = None, *, quiet: bool = False) -> Path:
    """The corpus in the BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``)
    in ``<folder>/beir``, next to the Parquet files, written unless already there."""
    source = ensure(params, folder, quiet=quiet)
    out = source / "beir"
    stamp = out / PARAMS_FILE
    if stamp.is_file() and json.loads(stamp.read_text()) == _stamp(params):
        return out
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    docs = load_docs(source, ("id", "title", "text"))
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for doc_id, title, text in zip(docs["id"], docs["title"], docs["text"]):
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    queries = load_queries(source)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as handle:
        for query_id, text, category in zip(queries["id"], queries["text"], queries["category"]):
            record = {"_id": query_id, "text": text, "category": category}
            handle.write(json.dumps(record) + "\n")
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query_id, doc_id in zip(queries["id"], queries["source"]):
            handle.write(f"{query_id}\t{doc_id}\t1\n")
    stamp.write_text(json.dumps(_stamp(params), indent=2) + "\n")
    return out


def main() -> None:
    defaults = Params()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--out", type=Path, help="output folder (default: benchmarks/data/…)")
    parser.add_argument("--beir", action="store_true", help="also write the BEIR layout")
    args = parser.parse_args()
    params = Params(**{name: getattr(args, name) for name in asdict(defaults)})
    folder = ensure(params, args.out)
    print(folder)
    if args.beir:
        print(ensure_beir(params, args.out))


if __name__ == "__main__":
    main()
