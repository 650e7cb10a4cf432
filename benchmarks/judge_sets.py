"""Public human-labelled sets for the meta-evaluation of judges, in rag-bench's labels format.

    python benchmarks/judge_sets.py [--mirror FOLDER] [--out FOLDER] [--slice]

Each set is read from a public GitHub repository at a pinned commit: from ``--mirror`` (or
``$RAG_BENCH_MIRROR``), a folder of bare clones named ``owner+name/repo``, else downloaded from
raw.githubusercontent.com. Nothing is committed: the converted files land under ``--out``
(default ``~/.cache/rag-bench-judges/sets``). Every source file is under 4 MiB. Held back for
acceptance and never read: RAGTruth, BEGIN (its rows in AttributionBench's out-of-domain file
are dropped here), RAGChecker's meta-evaluation data, SciFact, HotpotQA.

Sets (kind; level of the labels; origin):

- ``attribution``: claims of answers by generative search engines and LLMs (ExpertQA,
  Stanford-GenSearch, AttributedQA) with the passages they cite, labelled attributable or not by
  people; claim level. From AttributionBench's in-domain dev and test files (its LFQA rows are
  left out: they come from the ``lfqa`` set below).
- ``hagrid``: sentences of GPT-3.5 answers written over retrieved quotes (HAGRID) and of
  generative search answers (AttrScore-GenSearch), human attributability; claim level. From
  AttributionBench's out-of-domain file, BEGIN's rows dropped.
- ``lfqa``: long-form answers of WebGPT, GPT-3 and Alpaca written with retrieved documents,
  every sentence labelled supported / partially / not supported by three annotators (Chen et
  al. 2023); answer and claim level (a sentence counts as supported when most annotators say
  fully supported; an answer is unsupported when any sentence is).
- ``summaries``: news summaries of the SummaC benchmark (XSumFaith, FactCC, SummEval), labelled
  consistent with the article or not by people; answer level.

Each set is split in two, seeded (``SEED``), by group (question, article), so no question or
article is on both sides: ``<set>-train.jsonl`` is for calibration (the calibrated judge learns
from it), ``<set>-test.jsonl`` is for the table. The split is written to ``splits.json``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SEED = 0
TRAIN_SHARE = 0.5
MAX_BYTES = 4 * 1024 * 1024

ATTRIBUTIONBENCH = ("OSU-NLP-Group/AttributionBench", "b33329b29946b791649cf66d33e10b5a5bbdc44d")
LFQA = ("timchen0618/LFQA-Verification", "4e905be93fbe919082d62faa77ee32c68e90237c")
SUMMAC = ("tingofurro/summac", "fbd18e22cc93e68179ae9264c9e12d82a65895f2")

ORIGINS = {
    "attribution": {
        "repo": ATTRIBUTIONBENCH[0],
        "commit": ATTRIBUTIONBENCH[1],
        "files": [
            "data/dev_all_subset_balanced.jsonl",
            "data/test_all_subset_balanced_sampled500.jsonl",
        ],
        "kind": "attribution of LLM and generative-search answers (ExpertQA, Stanford-GenSearch, "
        "AttributedQA)",
        "licence": "no licence file in the AttributionBench repository; ExpertQA MIT, "
        "AttributedQA CC BY 4.0, Stanford-GenSearch (Liu et al. 2023) released for research; "
        "fetched for evaluation, never redistributed",
    },
    "hagrid": {
        "repo": ATTRIBUTIONBENCH[0],
        "commit": ATTRIBUTIONBENCH[1],
        "files": ["data/test_ood_all_subset_balanced.jsonl"],
        "kind": "LLM answers over retrieved quotes (HAGRID, AttrScore-GenSearch); BEGIN dropped",
        "licence": "HAGRID Apache-2.0 (its quotes: Wikipedia via MIRACL, CC BY-SA); "
        "AttrScore-GenSearch: see OSU-NLP-Group/AttrScore; no licence file in AttributionBench",
    },
    "lfqa": {
        "repo": LFQA[0],
        "commit": LFQA[1],
        "files": [
            f"data/annotations/annotations-{m}.json"
            for m in ("webgpt", "gpt3_wdoc", "gpt3_whudoc", "alpaca_wdoc")
        ]
        + ["data/docs/docs-webgpt.json"],
        "kind": "long-form answers by WebGPT, GPT-3, Alpaca with retrieved documents",
        "licence": "no licence file in the repository (paper: Chen et al. 2023, "
        "arXiv:2310.12150); fetched at run time for evaluation, never redistributed",
    },
    "summaries": {
        "repo": SUMMAC[0],
        "commit": SUMMAC[1],
        "files": ["data/xsumfaith.json", "data/factcc.json", "data/summeval.json"],
        "kind": "news summaries (SummaC benchmark: XSumFaith, FactCC, SummEval)",
        "licence": "SummaC Apache-2.0; XSumFaith CC BY 4.0; FactCC BSD-3-Clause; SummEval MIT",
    },
}


class Source:
    """Files of public repositories at pinned commits: from bare clones under ``mirror``, else
    from raw.githubusercontent.com."""

    def __init__(self, mirror: Path | None):
        self.mirror = mirror

    def read(self, repo: str, commit: str, path: str) -> bytes:
        if self.mirror is not None:
            clone = self.mirror / repo.replace("/", "+") / "repo"
            if not clone.is_dir():
                raise SystemExit(f"{clone} is missing: fetch {repo} into the mirror first")
            data = subprocess.run(
                ["git", "--git-dir", str(clone), "show", f"{commit}:{path}"],
                capture_output=True,
                check=True,
            ).stdout
        else:
            url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
            try:
                with urllib.request.urlopen(url, timeout=60) as reply:  # noqa: S310 (fixed host)
                    data = reply.read()
            except OSError as error:
                raise SystemExit(
                    f"cannot download {url} ({error}): give --mirror FOLDER or $RAG_BENCH_MIRROR, "
                    "a folder of bare clones named owner+name/repo"
                ) from None
        if len(data) > MAX_BYTES:
            raise SystemExit(f"{repo}:{path} is {len(data)} bytes, over the 4 MiB limit")
        return data

    def json(self, origin: dict, path: str):
        return json.loads(self.read(origin["repo"], origin["commit"], path))

    def jsonl(self, origin: dict, path: str) -> Iterator[dict]:
        for line in self.read(origin["repo"], origin["commit"], path).decode().splitlines():
            if line.strip():
                yield json.loads(line)


def _references(raw: str) -> list[str]:
    """AttributionBench keeps the cited passages as the text of a Python list."""
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = [raw]
    return [str(v) for v in (value if isinstance(value, list) else [value]) if str(v).strip()]


def _attribution_rows(source: Source, name: str, keep) -> list[dict]:
    origin = ORIGINS[name]
    rows = []
    for path in origin["files"]:
        for record in source.jsonl(origin, path):
            if not keep(record["src_dataset"]):
                continue
            context = _references(record["references"])
            if not context or not record["claim"].strip():
                continue
            rows.append(
                {
                    "id": record["id"],
                    "group": record["question"],
                    "source": record["src_dataset"],
                    "question": record["question"],
                    "context": context,
                    "claim": record["claim"],
                    "label": "supported"
                    if record["attribution_label"] == "attributable"
                    else "unsupported",
                }
            )
    return rows


def attribution(source: Source) -> list[dict]:
    return _attribution_rows(source, "attribution", lambda s: s != "LFQA")


def hagrid(source: Source) -> list[dict]:
    # BEGIN is held back for acceptance: its rows are never read further
    return _attribution_rows(source, "hagrid", lambda s: s != "BEGIN")


def lfqa(source: Source) -> list[dict]:
    origin = ORIGINS["lfqa"]
    docs = {
        d["question_id"]: [f"{x['title']}\n{x['text']}" for x in d["docs"]]
        for d in source.json(origin, "data/docs/docs-webgpt.json")
    }
    rows = []
    for path in origin["files"][:-1]:
        model = path.rsplit("annotations-", 1)[1].removesuffix(".json")
        for record in source.json(origin, path):
            claims = [
                {
                    "claim": a["answer"].strip(),
                    "label": "supported"
                    if sum(v == "supported" for v in a["labels"]) * 2 > len(a["labels"])
                    else "unsupported",
                }
                for a in record["annotations"]
                if a["labels"] and a["answer"].strip()
            ]
            if not claims or record["question_id"] not in docs:
                continue
            rows.append(
                {
                    "id": f"{model}-{record['question_id']}",
                    "group": str(record["question_id"]),
                    "source": model,
                    "question": record["question"],
                    "context": docs[record["question_id"]],
                    "answer": " ".join(s.strip() for s in record["answers"]),
                    "label": "unsupported"
                    if any(c["label"] == "unsupported" for c in claims)
                    else "supported",
                    "claims": claims,
                }
            )
    return rows


def summaries(source: Source) -> list[dict]:
    origin = ORIGINS["summaries"]
    rows = []
    for path in origin["files"]:
        corpus = path.rsplit("/", 1)[1].removesuffix(".json")
        for key, record in source.json(origin, path).items():
            document = record.get("bbcid") or record.get("cnndm_id") or record.get("id") or key
            rows.append(
                {
                    "id": f"{corpus}-{key}",
                    "group": f"{corpus}-{document}",
                    "source": corpus,
                    "context": [record["document"]],
                    "answer": record["claim"],
                    "label": "supported" if int(record["label"]) == 1 else "unsupported",
                }
            )
    return rows


SETS = {"attribution": attribution, "hagrid": hagrid, "lfqa": lfqa, "summaries": summaries}


def split(rows: list[dict], name: str) -> tuple[list[dict], list[dict]]:
    """Train and test halves by group, seeded: a group's place depends on the seed, the set's
    name and the group alone."""
    groups = sorted({r["group"] for r in rows})
    key = int(hashlib.sha256(f"{SEED}:{name}".encode()).hexdigest()[:8], 16)
    order = np.random.default_rng(key).permutation(len(groups))
    train = {groups[i] for i in order[: int(round(TRAIN_SHARE * len(groups)))]}
    return [r for r in rows if r["group"] in train], [r for r in rows if r["group"] not in train]


def write(rows: list[dict], path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def default_out() -> Path:
    return Path.home() / ".cache" / "rag-bench-judges" / "sets"


def build(out: Path, mirror: Path | None, names=tuple(SETS)) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    source = Source(mirror)
    summary = {}
    for name in names:
        rows = SETS[name](source)
        train, test = split(rows, name)
        write(train, out / f"{name}-train.jsonl")
        write(test, out / f"{name}-test.jsonl")
        summary[name] = {
            **{k: v for k, v in ORIGINS[name].items()},
            "seed": SEED,
            "train": len(train),
            "test": len(test),
            "unsupported_share_test": float(np.mean([r["label"] == "unsupported" for r in test])),
        }
        print(f"{name}: {len(train)} train, {len(test)} test items", file=sys.stderr)
    (out / "splits.json").write_text(json.dumps(summary, indent=1))
    return summary


SLICE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hagrid-slice.jsonl"


def write_slice(out: Path, path: Path = SLICE, size: int = 120) -> None:
    """The small public slice the tests ship: HAGRID rows (Apache-2.0) of the hagrid test half,
    whole questions in a seeded order (seed 1) up to ``size`` rows."""
    rows = [json.loads(line) for line in (out / "hagrid-test.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["source"] == "HAGRID"]
    groups = sorted({r["group"] for r in rows})
    taken: list[dict] = []
    for k in np.random.default_rng(1).permutation(len(groups)):
        group = [r for r in rows if r["group"] == groups[k]]
        if taken and len(taken) + len(group) > size:
            break
        taken += group
    path.parent.mkdir(parents=True, exist_ok=True)
    write(taken, path)


def mirror_folder(given: str | None) -> Path | None:
    named = given or os.environ.get("RAG_BENCH_MIRROR")
    return Path(named) if named else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", help="a folder of bare clones named owner+name/repo")
    parser.add_argument("--out", default=str(default_out()))
    parser.add_argument("--slice", action="store_true", help=f"also write {SLICE.name} for tests")
    args = parser.parse_args()
    build(Path(args.out), mirror_folder(args.mirror))
    if args.slice:
        write_slice(Path(args.out))


if __name__ == "__main__":
    main()
