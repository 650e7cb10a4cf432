"""The SQuAD v1.1 parity fixture: a seeded sample of (prediction, gold answers) pairs.

    python benchmarks/squad_sample.py DEV_JSON PREDICTIONS_JSON [--n 400] [--out FILE]

DEV_JSON is a SQuAD v1.1 dev file (``{"data": [{"paragraphs": [{"qas": ...}]}]}``), and
PREDICTIONS_JSON maps question ids to a model's predicted answers, as the official evaluation
script reads them. The committed fixture, ``tests/evaluation/fixtures/squad11_dev_bert.jsonl``,
was made with ``--n 400`` from these public files:

- the dev questions and their gold answers: ``data/dev-v1.1.json`` of
  github.com/bloomsburyai/question-generation at commit 88cc78cb56123efdf20abb0f4640a0405f1291e3
  (4,961 questions of the official dev set, answers unchanged); SQuAD is CC BY-SA 4.0
  (Rajpurkar et al., 2016);
- a fine-tuned BERT model's predictions for the whole dev set: ``predictions.json`` of
  github.com/CAG9/BERT-QA (MIT licence) at commit b241ab026843b27ff03e587cc63265f638e26fec.

Only the question id, the prediction and the gold answer texts are kept (no passages).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SEED = 26
OUT = Path(__file__).resolve().parent.parent / "tests/evaluation/fixtures/squad11_dev_bert.jsonl"


def pairs(dev: dict, predictions: dict) -> list[dict]:
    """Every dev question the predictions answer: its id, the prediction, the gold answers."""
    return [
        {
            "id": qa["id"],
            "prediction": predictions[qa["id"]],
            "answers": [a["text"] for a in qa["answers"]],
        }
        for article in dev["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa["id"] in predictions
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dev", type=Path)
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    everything = pairs(json.loads(args.dev.read_text()), json.loads(args.predictions.read_text()))
    chosen = sorted(random.Random(SEED).sample(range(len(everything)), args.n))
    with args.out.open("w", encoding="utf-8") as out:
        for i in chosen:
            out.write(json.dumps(everything[i], ensure_ascii=False) + "\n")
    print(f"{args.out}: {args.n} of {len(everything)} pairs")


if __name__ == "__main__":
    main()
