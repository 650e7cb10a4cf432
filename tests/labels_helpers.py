"""Writing a labels JSONL file (rag_bench.data.labels) for a test."""

from __future__ import annotations

import json
from pathlib import Path


def write_labels(folder: Path, rows: list[dict], name: str = "labels.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
