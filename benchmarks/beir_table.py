"""nDCG@10 and recall@100 of the three variants on a public BEIR corpus, with the offline
stand-in (``lsa``) and the real encoder (``minilm``), on whole documents and default chunks.

    python benchmarks/beir_table.py [--dataset SOURCE | --mirror CLONE] \
        [--encoders lsa,minilm] [--chunkers none,fixed] [--summarise]

The corpus is the first one named: ``--dataset``, ``--mirror`` (a bare git clone of the known
public copy, ``KNOWN``), ``$RAG_BENCH_BEIR``, ``$RAG_BENCH_MIRROR``; one named but absent is
refused, never replaced by the next. It may be a BEIR folder, a folder in the Hugging Face
BeIR layout (``corpus.jsonl.gz``, ``queries.jsonl.gz``, ``test.tsv``), BEIR's own zip
(``arguana.zip``) or such a clone; anything but a ready BEIR folder is converted once into one
under ``--cache`` (outside the repository; the corpus is never committed). A judgement whose
document is missing from the corpus (5 of ArguAna's 1,406) is left out of the converted
``qrels/test.tsv``, which rag-bench would otherwise reject, and kept in
``qrels-original/test.tsv`` for the BEIR-convention scores below.

Each (chunker, encoder, variant) is one ``rag_bench.run``; the index cache is shared, so every
index and embedding is built once. Two scores per run: rag-bench's own (stored with the run),
and BEIR's convention (``beir.retrieval.evaluation``'s ``ignore_identical_ids``, also MTEB's): a
document whose id is the query's id is dropped from its ranking, and queries are scored
against the original judgements, a relevant document absent from the corpus counting as never
retrieved. Only the second is comparable with published figures; they differ on ArguAna,
whose queries are arguments that are themselves in the corpus. ``hybrid_rerank``'s ``ltr``
learns from ``qrels/train.tsv`` when the corpus has one, else it is cross-fitted (the JSON
says which). Whole documents: chunker ``none``; default chunks: ``fixed``. The table is
printed as Markdown (for docs/components.md) and saved as JSON under ``benchmarks/results/``.

The JSON's ``summary`` holds every other number the docs cite, computed from the stored runs
(``--summarise`` recomputes it alone, rerunning nothing): each encoder's ``dense`` stage alone,
the paired comparisons of ``PAIRS`` (mean difference, 95% bootstrap interval, randomization
p-value, queries better and worse, with ``rag-bench compare``'s statistics) and the corpus
counts.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import RESULTS_DIR

from rag_bench import open_runs
from rag_bench.data.qrels import load_qrels
from rag_bench.data.rankings import Run
from rag_bench.evaluation.retrieval import RankingEvaluation, evaluate_run
from rag_bench.evaluation.stats import bootstrap_cis, paired_p_values
from rag_bench.experiment.runner import run_variant

CHUNKERS = {"whole documents": "none", "default chunks": "fixed"}
VARIANTS = ("baseline", "hybrid", "hybrid_rerank")
METRICS = ("ndcg@10", "recall@100")
DEPTH = 101  # one more than the deepest cutoff: BEIR's scoring may drop the query's own id

# The public copy this table was measured on: BEIR's ArguAna (the Hugging Face BeIR/arguana
# files and its test qrels) as committed in a public repository.
KNOWN = {
    "name": "arguana",
    "repository": "ecazar/ProyectoIB",
    "commit": "77758cc865e08f95d66ba67415d74ef6dd6f6bcb",
    "folder": "data",
}
HOW_TO_GET = (
    "pass --dataset PATH (or set $RAG_BENCH_BEIR) to the BeIR/{name} files from Hugging Face "
    "or BEIR's {name}.zip (github.com/beir-cellar/beir), or --mirror PATH (or $RAG_BENCH_MIRROR) "
    "to a bare clone of github.com/{repository} (commit {commit:.7})"
)


class Source:
    """Files of a candidate corpus, by path relative to its root: a folder, a zip or a bare
    git directory (read at its HEAD)."""

    def __init__(self, root: Path):
        self.root = root
        if root.is_file() and zipfile.is_zipfile(root):
            archive = zipfile.ZipFile(root)
            self.paths = [n for n in archive.namelist() if not n.endswith("/")]
            self.read: Callable[[str], bytes] = archive.read
        elif (root / "HEAD").is_file() and (root / "objects").is_dir():
            listing = self._git("ls-tree", "-r", "--name-only", "HEAD").decode()
            self.paths = listing.splitlines()
            self.read = lambda path: self._git("show", f"HEAD:{path}")
        else:
            self.paths = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
            self.read = lambda path: (root / path).read_bytes()

    def _git(self, *args: str) -> bytes:
        return subprocess.run(
            ["git", f"--git-dir={self.root}", *args], check=True, capture_output=True
        ).stdout

    def find(self, *names: str) -> str | None:
        """The shortest path ending in one of ``names`` (in order of preference)."""
        for name in names:
            hits = sorted((p for p in self.paths if p == name or p.endswith("/" + name)), key=len)
            if hits:
                return hits[0]
        return None

    def text(self, path: str) -> bytes:
        data = self.read(path)
        return gzip.decompress(data) if path.endswith(".gz") else data


def candidates(dataset: str | None, mirror: str | None) -> list[tuple[Path, str | None]]:
    """What was named, in order, with the name its conversion gets (None: from its files):
    ``dataset``, ``mirror`` (a snapshot of ``KNOWN``), then ``$RAG_BENCH_BEIR`` and
    ``$RAG_BENCH_MIRROR``."""
    named = [
        (dataset, None),
        (mirror, KNOWN["name"]),
        (os.environ.get("RAG_BENCH_BEIR"), None),
        (os.environ.get("RAG_BENCH_MIRROR"), KNOWN["name"]),
    ]
    return [(Path(path), name) for path, name in named if path]


def is_beir_folder(path: Path) -> bool:
    return (path / "corpus.jsonl").is_file() and (path / "qrels" / "test.tsv").is_file()


def materialise(root: Path, cache: Path, name: str | None = None) -> Path:
    """A BEIR folder rag-bench loads: ``root`` itself, or its files converted under ``cache``
    into ``NAME-KEY`` (once; KEY from the source files' content; NAME: ``name``, else the
    folder holding the corpus, else ``root``'s)."""
    if is_beir_folder(root):
        return root
    source = Source(root)
    corpus = source.find("corpus.jsonl", "corpus.jsonl.gz")
    queries = source.find("queries.jsonl", "queries.jsonl.gz")
    qrels = source.find("qrels/test.tsv", "test.tsv")
    if not (corpus and queries and qrels):
        raise FileNotFoundError(f"{root}: no corpus.jsonl[.gz], queries.jsonl[.gz] and test.tsv")
    files = {name: source.text(path) for name, path in (("corpus", corpus), ("queries", queries))}
    judgements = source.text(qrels)
    key = hashlib.sha256(b"".join([*files.values(), judgements])).hexdigest()[:12]
    folder = cache / f"{name or Path(corpus).parent.name or root.stem}-{key}"
    if not is_beir_folder(folder):
        write_beir(folder, files["corpus"], files["queries"], judgements)
    return folder


def write_beir(folder: Path, corpus: bytes, queries: bytes, qrels: bytes) -> None:
    """Write the BEIR folder; judgements naming a document absent from the corpus go to
    ``qrels-original/test.tsv`` only. ``qrels/test.tsv`` is written last: it marks the folder
    complete."""
    ids = {json.loads(line)["_id"] for line in io.BytesIO(corpus) if line.strip()}
    lines = qrels.decode("utf-8").splitlines(keepends=True)
    kept = [lines[0]] + [line for line in lines[1:] if line.split("\t")[1] in ids]
    for name, data in (
        ("corpus.jsonl", corpus),
        ("queries.jsonl", queries),
        ("qrels-original/test.tsv", qrels),
    ):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("".join(kept), encoding="utf-8")
    if len(kept) < len(lines):
        print(f"{len(lines) - len(kept)} judgements name documents absent from the corpus")


def find_dataset(dataset: str | None, mirror: str | None, cache: Path) -> Path:
    """The BEIR folder of the first source named (see :func:`candidates`); exit with how to get
    one if none is named or the one named is not there (never another in its place)."""
    named = candidates(dataset, mirror)
    if not named:
        sys.exit(f"no BEIR corpus named: {HOW_TO_GET.format(**KNOWN)}")
    path, name = named[0]
    if not path.exists():
        sys.exit(f"{path} does not exist: {HOW_TO_GET.format(**KNOWN)}")
    return materialise(path, cache, name)


def original_qrels(folder: Path) -> Path:
    """The judgements BEIR scores against: the original file when conversion left some out."""
    original = folder / "qrels-original" / "test.tsv"
    return original if original.is_file() else folder / "qrels" / "test.tsv"


def beir_evaluation(retrieved, folder: Path, stage: str = "documents") -> RankingEvaluation:
    """BEIR's convention: the query's own id out of its ranking, scored against the original
    judgements with every judged query counted (``complete``: a query whose only relevant
    document is absent from the corpus, which rag-bench does not run, scores 0). ``stage``
    names the ranking in the ``retrieved`` table; a ranking of chunks counts each document
    at its best chunk."""
    ranked = retrieved[retrieved["stage"] == stage].sort_values(["query_id", "rank"])
    rankings = {
        query_id: [d for d in dict.fromkeys(group["doc_id"]) if d != query_id][: DEPTH - 1]
        for query_id, group in ranked.groupby("query_id", sort=False, observed=True)
    }
    qrels = load_qrels(original_qrels(folder))
    return evaluate_run(qrels, Run.from_rankings(rankings), METRICS, complete=True)


def beir_scores(result, folder: Path) -> dict[str, float]:
    """The means of :func:`beir_evaluation` of a run's final ranking."""
    return beir_evaluation(result.tables["retrieved"], folder).means()


# The paired comparisons of the summary, (b, a): what b gains over a, for each encoder; and the
# statistics, those ``rag-bench compare`` uses by default.
PAIRS = (("hybrid", "baseline"), ("hybrid_rerank", "hybrid"))
STATISTICS = {"test": "randomization", "resamples": 10_000, "seed": 0, "level": 0.95}


def summarise(rows: list[dict], folder: Path, runs_dir: Path) -> dict:
    """What the docs say of the table, computed from the stored runs of ``rows`` (nothing is
    rerun): each run rescored per query (its means must be the row's), the encoders' dense
    stages alone, the paired comparisons of ``PAIRS`` and the corpus counts."""
    store = open_runs(runs_dir)
    scored: dict[tuple, pd.DataFrame] = {}
    dense: list[dict] = []
    for row in rows:
        retrieved = store.retrieved(row["run_id"])
        evaluation = beir_evaluation(retrieved, folder)
        means = evaluation.means()
        if any(abs(means[m] - row[m]) > 1e-12 for m in METRICS):
            sys.exit(f"run {row['run_id']} scores {means}, its row {row}: rerun the table")
        scored[row_key(row)] = evaluation.wide()
        if row["variant"] == "hybrid":
            dense.append(dense_alone(row, retrieved, folder))
    return {
        "statistics": STATISTICS,
        "dense_alone": dense,
        "paired": paired(scored),
        "corpus": corpus_counts(rows, folder, store),
    }


def row_key(row: dict) -> tuple[str, str, str]:
    return itemgetter("chunking", "variant", "encoder")(row)


def dense_alone(row: dict, retrieved: pd.DataFrame, folder: Path) -> dict:
    """BEIR-convention scores of the ``dense`` stage stored in a ``hybrid`` run (its encoder
    alone), with how many documents its ranking names per query (fewer than 100 when it ranks
    chunks: the stage is as deep as the run, in chunks)."""
    entry = {"chunking": row["chunking"], "encoder": row["encoder"], "run_id": row["run_id"]}
    stage = retrieved[retrieved["stage"] == "dense"]
    if stage.empty:
        return {**entry, "stored": False}
    names = stage.groupby("query_id", observed=True)["doc_id"].nunique()
    scores = beir_evaluation(retrieved, folder, "dense").means()
    return {**entry, "stored": True, **scores, "documents_per_query": float(names.mean())}


def paired(scored: dict[tuple, pd.DataFrame]) -> list[dict]:
    """For each chunking, encoder and pair of ``PAIRS`` found in ``scored`` (per-query BEIR
    scores by row key), and each metric: the mean difference b - a over every judged query,
    its bootstrap interval, the paired randomization p-value and the queries b does better
    and worse on."""
    entries, differences = [], []
    for chunking, variant, encoder in scored:
        for b, a in PAIRS:
            a_key = (chunking, a, "-" if a == "baseline" else encoder)
            if variant != b or a_key not in scored:
                continue
            b_scores, a_scores = scored[chunking, b, encoder], scored[a_key]
            a_scores = a_scores.loc[b_scores.index]  # the same judged queries, in b's order
            for metric in METRICS:
                d = (b_scores[metric] - a_scores[metric]).to_numpy(np.float64)
                differences.append(d)
                entries.append(
                    {
                        "chunking": chunking,
                        "metric": metric,
                        "b": [b, encoder],
                        "a": [a, a_key[2]],
                        "queries": len(d),
                        "delta": float(d.mean()),
                        "better": int((d > 0).sum()),
                        "worse": int((d < 0).sum()),
                    }
                )
    stats = {k: STATISTICS[k] for k in ("resamples", "seed")}
    intervals = bootstrap_cis(differences, STATISTICS["level"], **stats)
    p_values = paired_p_values(differences, STATISTICS["test"], **stats)
    for entry, interval, p in zip(entries, intervals, p_values):
        entry.update(ci95=list(interval), p=p)
    return entries


def corpus_counts(rows: list[dict], folder: Path, store) -> dict:
    """The corpus's documents, the queries with a relevant judgement (of them: those whose own
    argument is in the corpus, those whose relevant documents all are not) and the chunks each
    chunking indexed (from the runs' manifests)."""
    with open(folder / "corpus.jsonl", encoding="utf-8") as lines:
        ids = {json.loads(line)["_id"] for line in lines if line.strip()}
    judged = pd.read_csv(original_qrels(folder), sep="\t", dtype=str, usecols=[0, 1, 2])
    judged.columns = ["query_id", "doc_id", "score"]
    relevant = judged[judged["score"].astype(float) > 0]
    present = relevant["doc_id"].isin(ids).groupby(relevant["query_id"]).any()
    indexed: dict[str, set[int]] = {}
    for row in rows:
        n = store.get(row["run_id"]).manifest["index"]["n_chunks"]
        indexed.setdefault(row["chunking"], set()).add(n)
    if any(len(ns) > 1 for ns in indexed.values()):
        sys.exit(f"the runs of one chunking indexed different numbers of chunks: {indexed}")
    chunks = {chunking: ns.pop() for chunking, ns in indexed.items()}
    return {
        "documents": len(ids),
        "queries": len(present),
        "queries_in_corpus": int(present.index.isin(list(ids)).sum()),
        "queries_relevant_absent": int((~present).sum()),
        "chunks": chunks,
        "chunks_per_document": {chunking: n / len(ids) for chunking, n in chunks.items()},
    }


def own_scores(result) -> dict[str, float]:
    metrics = result.metrics
    return {m: float(metrics.loc[metrics["metric"] == m, "value"].mean()) for m in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help="a BEIR folder, BeIR-layout folder, zip or snapshot")
    parser.add_argument("--encoders", default="lsa,minilm")
    parser.add_argument("--chunkers", default=",".join(CHUNKERS.values()), help="none,fixed")
    parser.add_argument("--mirror", help="a bare git clone of the known public copy")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "rag-bench-beir"))
    parser.add_argument(
        "--summarise", action="store_true", help="only recompute the summary from stored runs"
    )
    args = parser.parse_args()
    cache = Path(args.cache)
    folder = find_dataset(args.dataset, args.mirror, cache / "datasets")
    print(f"dataset: {folder}", flush=True)
    out = RESULTS_DIR / f"beir-{folder.name.rsplit('-', 1)[0]}.json"
    if not args.summarise:
        measure(args, folder, out)
    if not out.is_file():
        sys.exit(f"{out} does not exist: run the table first (without --summarise)")
    rows = json.loads(out.read_text())["rows"]
    save(out, folder, rows, summarise(rows, folder, cache / "runs"))
    print_table(rows)
    print(f"\nwrote {out} (rows and summary)")


def measure(args: argparse.Namespace, folder: Path, out: Path) -> None:
    """Run every (chunking, encoder, variant) asked for, saving each row as it comes."""
    cache = Path(args.cache)
    encoders = args.encoders.split(",")
    rows: list[dict] = []
    for chunking, chunker in CHUNKERS.items():
        if chunker not in args.chunkers.split(","):
            continue
        for encoder in encoders:
            for variant in VARIANTS:
                if variant == "baseline" and encoder != encoders[0]:
                    continue  # BM25 alone does not depend on the encoder
                overrides = [f"chunker.name={chunker}"]
                overrides += [] if variant == "baseline" else [f"encoder.name={encoder}"]
                started = time.perf_counter()
                result = run_variant(
                    variant,
                    folder,
                    overrides=overrides,
                    ks=(10, 100),
                    depth=DEPTH,
                    runs_dir=cache / "runs",
                    cache_dir=cache / "index",
                )
                row = {
                    "chunking": chunking,
                    "variant": variant,
                    "encoder": "-" if variant == "baseline" else encoder,
                    **beir_scores(result, folder),
                    "own": own_scores(result),
                    "seconds": round(time.perf_counter() - started, 1),
                    "run_id": result.run_id,
                    "reranker_training": result.manifest.get("reranker_training"),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
                save(out, folder, rows)  # after every run: a long table is kept as it grows


def save(out: Path, folder: Path, rows: list[dict], summary: dict | None = None) -> None:
    """Write ``rows`` into ``out``, keeping the rows of other (chunking, variant, encoder)
    already there, so the table can be measured in parts (``--chunkers``, ``--encoders``).
    The summary is written only when given: one of other rows would be stale."""
    mine = {row_key(r) for r in rows}
    kept = json.loads(out.read_text())["rows"] if out.is_file() else []
    merged = [r for r in kept if row_key(r) not in mine] + rows
    order = {name: i for i, name in enumerate([*CHUNKERS, "-", "lsa", "minilm", *VARIANTS])}
    merged.sort(key=lambda r: [order[r["chunking"]], order[r["encoder"]], order[r["variant"]]])
    document = {"dataset": folder.name, "known_source": KNOWN, "depth": DEPTH, "rows": merged}
    if summary is not None:
        document["summary"] = summary
    RESULTS_DIR.mkdir(exist_ok=True)
    partial = out.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, indent=2) + "\n")
    partial.replace(out)


def print_table(rows: list[dict]) -> None:
    print("\n| chunking | variant | encoder | nDCG@10 | recall@100 | nDCG@10 own | seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['chunking']} | {r['variant']} | {r['encoder']} | {r['ndcg@10']:.3f} "
            f"| {r['recall@100']:.3f} | {r['own']['ndcg@10']:.3f} | {r['seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
