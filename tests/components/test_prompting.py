"""A chat generator's prompt as a parameter: built-in, inline or a file; recorded in the
manifest by sha256; swept like any other parameter; two prompts' answers side by side in
``diff``. The model is the fake OpenAI-compatible server (``fake``), whose reply depends on the
prompt it was sent; tests/components/test_llama_cpp.py runs the real model."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from conftest import ROOT, assert_one_line_error, require
from rag_bench.components.prompting import GENERATOR_SYSTEM, read_prompt
from rag_bench.errors import UsageError
from rag_bench.model import Chunk, Query
from rag_bench.runs import open_runs

require("httpx", "pip install -e '.[dev]'")

SEED = ROOT / "data" / "seed-example"
CONTEXT = [Chunk("d1#0", "d1", 0, 20, "Returns take 7 days.", "Returns")]
QUERY = Query("q1", "How long do returns take?")
OPENAI = ["--set", "generator.name=openai", "--set", "generator.retry_backoff=0"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_default_is_the_built_in_prompt_as_the_system_message():
    prompt = read_prompt("")
    assert (prompt.text, prompt.source, prompt.sha256) == (
        GENERATOR_SYSTEM,
        "built-in",
        sha256(GENERATOR_SYSTEM),
    )
    system, user = prompt.messages(QUERY, CONTEXT)
    assert system == {"role": "system", "content": GENERATOR_SYSTEM}
    assert user["role"] == "user"
    assert user["content"].endswith("</passages>\n\nQuestion: How long do returns take?")
    assert '<passage number="1" doc_id="d1">' in user["content"]


def test_a_file_and_inline_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "terse.txt").write_text("Answer in one sentence [doc].\n", encoding="utf-8")
    from_file = read_prompt("terse.txt")
    assert from_file.source == "file terse.txt"
    assert from_file.text == "Answer in one sentence [doc].\n"
    assert from_file.sha256 == sha256("Answer in one sentence [doc].\n")
    inline = read_prompt("Be brief.")
    assert (inline.source, inline.text) == ("inline", "Be brief.")
    long_line = "Answer from the passages only, citing each one. " * 20  # too long for a name
    assert read_prompt(long_line).source == "inline"


def test_placeholders_make_the_whole_user_message_and_nothing_else_is_a_placeholder():
    template = 'Reply as JSON {"answer": "..."}.\n{passages}\nQ: {question}\n{other}'
    [message] = read_prompt(template).messages(QUERY, CONTEXT)
    assert message["role"] == "user"
    assert message["content"].startswith('Reply as JSON {"answer": "..."}.\n<passages>\n')
    assert message["content"].endswith("</passages>\nQ: How long do returns take?\n{other}")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("missing.txt", "prompt file missing.txt does not exist"),
        ("   ", "generator.prompt (inline) is empty"),
        ("Use {passages} only.", "has {passages} but no {question}"),
    ],
)
def test_unusable_prompts_are_refused(value, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=re.escape(fragment)):
        read_prompt(value)


def test_a_prompt_file_that_is_not_utf8_is_one_line_error(rag_bench, fake, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Réponds brièvement.".encode("latin-1"))
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", tmp_path / "runs",
        *OPENAI, "--set", f"generator.prompt={bad}",
    )  # fmt: skip
    assert_one_line_error(out, f"prompt file {bad} is not UTF-8 (byte 1)", "save the prompt")


def echo_prompt(body: dict) -> str:
    """The fake model: prompt A quotes the first passage's first sentence and cites it, any
    other prompt makes a claim up and cites nothing in the context."""
    system, user = (m["content"] for m in body["messages"][:2])
    lines = user.split("\n")
    doc = lines[1].split('doc_id="', 1)[1].split('"', 1)[0]
    text = lines[3] if lines[2].startswith("Title: ") else lines[2]
    if system.startswith("PROMPT A"):
        return f"{text.split('. ')[0].rstrip('.')} [{doc}]."
    return "The moon is made of green cheese [nowhere]."


def test_a_prompt_sweep_records_each_prompt_and_diff_shows_the_answers(
    rag_bench, fake, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("PROMPT A: cite the passages.", encoding="utf-8")
    (tmp_path / "b.txt").write_text("PROMPT B: answer freely.", encoding="utf-8")
    fake.chat = echo_prompt
    runs = tmp_path / "runs"
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", runs, *OPENAI,
        "--sweep", "generator.prompt=a.txt,b.txt", "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    assert "cannot fabricate" not in out.stderr
    store = open_runs(runs)
    by_name = {r.manifest["name"]: r for r in store.list()}
    a = by_name["baseline[generator.prompt=a.txt]"]
    b = by_name["baseline[generator.prompt=b.txt]"]
    assert a.manifest["params"]["generator"]["prompt"] == "a.txt"
    assert a.manifest["prompts"] == {
        "generator.prompt": {
            "source": "file a.txt",
            "sha256": sha256("PROMPT A: cite the passages."),
            "chars": 28,
        }
    }
    assert b.manifest["prompts"]["generator.prompt"]["sha256"] == sha256("PROMPT B: answer freely.")
    systems = {body["messages"][0]["content"] for body in fake.chat_bodies()}
    assert systems == {"PROMPT A: cite the passages.", "PROMPT B: answer freely."}

    diffed = rag_bench(
        "diff", b.run_id, "--against", a.run_id, "--metric", "faithfulness",
        "--runs-dir", runs, "--format", "json",
    )  # fmt: skip
    rows = json.loads(diffed.stdout)
    assert rows and all(r["change"] == "worse" for r in rows)
    assert all(r["before"] == 1 and r["after"] == 0 for r in rows)
    assert all(r["answer_after"] == "The moon is made of green cheese [nowhere]." for r in rows)
    stored = store.queries([a.run_id])
    answers = dict(zip(stored["query_id"], stored["answer"]))
    assert all(r["answer_before"] == answers[r["query_id"]] for r in rows)
    table = rag_bench(
        "diff", b.run_id, "--against", a.run_id, "--metric", "faithfulness",
        "--runs-dir", runs, "--wide",
    )  # fmt: skip
    assert "answer_before" in table.stdout and "green cheese [nowhere]" in table.stdout


def test_the_extractive_generator_has_no_prompt_and_the_run_says_it_cannot_fabricate(
    rag_bench, tmp_path
):
    runs = tmp_path / "runs"
    out = rag_bench("run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    [stored] = open_runs(runs).list()
    assert stored.manifest["prompts"] == {}
    note = out.stderr.strip().splitlines()[-1]
    assert note.startswith("note: generator extractive quotes its context, so it cannot fabricate")
