"""How rag-bench's correctness metrics agree with people on open-domain QA answers.

    python benchmarks/correctness_agreement.py [--mirror FOLDER]

The public set: NQ301 of Kamalloo et al. (2023), "Evaluating Open-Domain Question Answering in
the Era of Large Language Models" (github.com/ehsk/OpenQA-eval, MIT licence, commit
8b9317d0f0c92b52e1c71c0168dff74b5f76a5f4): 1,489 answers of retrieval readers (DPR, FiD, ...)
and of InstructGPT to 301 Natural Questions, each judged acceptable or not by annotators
(``data/NQ301_human.tsv``); the gold answers of NQ-open come with the models' outputs
(``data/model_outputs/*.jsonl``). Files are read from ``--mirror`` (a folder of clones named
``owner+name/repo``) or downloaded from raw.githubusercontent.com; nothing is stored.

For answer_exact, answer_f1, answer_contains and key_fact_recall (each the best over the gold
answers, as a run computes them; and answer_f1 against the first gold answer alone) it prints
ROC-AUC against the human "acceptable" label and Spearman's rho, with a bootstrap interval over
questions (seeded), on the answers where the metric is defined.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
from scipy import stats

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.evaluation.answer import AnswerEvidence, response_metrics
from rag_bench.evaluation.correctness import token_f1
from rag_bench.model import Query

REPO, COMMIT = "ehsk/OpenQA-eval", "8b9317d0f0c92b52e1c71c0168dff74b5f76a5f4"
OUTPUTS = [
    f"data/model_outputs/NQ_{m}.jsonl"
    for m in ("DPR", "FiD", "FiD-KD", "EMDR2", "R2D2", "EviGen", "ANCE-plus_FiD")
] + ["data/model_outputs/NQ301_text-davinci-003_zeroshot.jsonl"]
METRICS = ("answer_exact", "answer_f1", "answer_contains", "key_fact_recall")
FIRST_ONLY = "answer_f1_first_gold"  # scored against the first gold answer alone, as before
SEED, ROUNDS = 0, 2000


def read(path: str, mirror: Path | None) -> str:
    if mirror is not None:
        clone = mirror / REPO.replace("/", "+") / "repo"
        shown = subprocess.run(
            ["git", "-C", str(clone), "show", f"{COMMIT}:{path}"], capture_output=True, check=True
        )
        return shown.stdout.decode("utf-8")
    url = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}/{path}"
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read().decode("utf-8")


def judged_answers(mirror: Path | None) -> list[dict]:
    """Every human-judged answer with its question, gold answers and label."""
    golds: dict[str, list[str]] = {}
    for path in OUTPUTS:
        for line in read(path, mirror).splitlines():
            record = json.loads(line)
            golds.setdefault(record["question"].strip().lower(), record["answer"])
    rows = csv.DictReader(io.StringIO(read("data/NQ301_human.tsv", mirror)), delimiter="\t")
    return [
        {
            "group": row["id"],
            "question": row["Question"],
            "answer": row["Model answer"],
            "golds": golds[row["Question"].strip().lower()],
            "acceptable": row["Acceptable?"].strip().lower() == "yes",
        }
        for row in rows
        if row["Question"].strip().lower() in golds
    ]


def scores(items: list[dict]) -> dict[str, list[float | None]]:
    analyzer = EnglishAnalyzer()
    out: dict[str, list[float | None]] = {m: [] for m in (*METRICS, FIRST_ONLY)}
    for item in items:
        first, *more = item["golds"]
        query = Query(item["group"], item["question"], answer=first, answers=tuple(more))
        values = response_metrics(
            AnswerEvidence(query, item["answer"], False, [], [], [], {}), analyzer
        )
        for metric in METRICS:
            out[metric].append(values[metric])
        out[FIRST_ONLY].append(token_f1(item["answer"], first))
    return out


def auc(label: np.ndarray, score: np.ndarray) -> float:
    """ROC-AUC as the Mann-Whitney statistic (ties count one half)."""
    ranks = stats.rankdata(score)
    positives = label.sum()
    return float(
        (ranks[label].sum() - positives * (positives + 1) / 2) / (positives * (~label).sum())
    )


def interval(groups: np.ndarray, label: np.ndarray, score: np.ndarray, fn) -> tuple[float, float]:
    """A 95% percentile interval of ``fn`` over question-level bootstrap resamples."""
    rng = np.random.default_rng(SEED)
    names = np.unique(groups)
    members = {g: np.flatnonzero(groups == g) for g in names}
    values = []
    for _ in range(ROUNDS):
        rows = np.concatenate([members[g] for g in rng.choice(names, len(names))])
        if label[rows].all() or not label[rows].any():
            continue
        values.append(fn(label[rows], score[rows]))
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def spearman(label: np.ndarray, score: np.ndarray) -> float:
    return float(stats.spearmanr(label.astype(float), score).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path)
    args = parser.parse_args()
    items = judged_answers(args.mirror)
    found = scores(items)
    print(
        f"{len(items)} judged answers to {len({i['group'] for i in items})} questions, "
        f"{sum(i['acceptable'] for i in items)} acceptable"
    )
    print("| metric | answers | ROC-AUC [95% CI] | Spearman rho [95% CI] |")
    print("|---|---|---|---|")
    with_facts = [i for i, v in enumerate(found["key_fact_recall"]) if v is not None]
    rows = [(m, [i for i, v in enumerate(found[m]) if v is not None]) for m in METRICS]
    rows.append((f"{FIRST_ONLY} (the first gold answer only)", list(range(len(items)))))
    rows += [(f"{m} (where key_fact_recall is defined)", with_facts) for m in METRICS[:3]]
    for name, kept in rows:
        metric = name.split()[0]
        label = np.array([items[i]["acceptable"] for i in kept])
        score = np.array([found[metric][i] for i in kept], dtype=float)
        groups = np.array([items[i]["group"] for i in kept])
        a, (a_low, a_high) = auc(label, score), interval(groups, label, score, auc)
        r, (r_low, r_high) = spearman(label, score), interval(groups, label, score, spearman)
        print(
            f"| {name} | {len(kept)} | {a:.3f} [{a_low:.3f}, {a_high:.3f}] | "
            f"{r:.3f} [{r_low:.3f}, {r_high:.3f}] |"
        )


if __name__ == "__main__":
    main()
