"""`rag-bench run --resume`: an interrupted run continues from its checkpoint, reuses every
answered query, computes only the rest and ends with the traces of an uninterrupted run; a
resume that does not match the interrupted run is a one-line error that changes nothing."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest
from processes import (
    SMOKE,
    Process,
    assert_same_traces,
    hidden,
    interrupt_after_blocks,
    interrupted_run,
    visible,
)
from runs_helpers import locate, manifest_file

from conftest import SHIPPED, assert_one_line_error, require
from fake_openai import serve_posts
from rag_bench.components.openai.client import EndpointError
from rag_bench.experiment.runner import Selection, resume_run, run_variant
from rag_bench.pipeline import compose
from rag_bench.runs import open_runs

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and flock"),
]


@pytest.fixture
def interrupted(tmp_path, monkeypatch, index_cache):
    runs = tmp_path / "runs"
    return runs, interrupted_run(monkeypatch, runs, index_cache)


def test_resume_reuses_the_checkpoint_and_ends_like_an_uninterrupted_run(
    interrupted, clean, rag_bench
):
    runs, stop = interrupted
    assert (stop.checkpointed, stop.total, stop.stored) == (16, 30, False)
    assert stop.message().startswith(f"interrupted; run {stop.run_id} not stored, 16 of 30")
    assert visible(runs) == [] and hidden(runs) == [f".partial-{stop.run_id}"]
    out = rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs, "--format", "csv")
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("category,variant,n,")  # the usual summary
    assert visible(runs) == [stop.run_id] and hidden(runs) == []
    assert_same_traces(locate(runs, stop.run_id), clean)
    manifest = json.loads(manifest_file(runs, stop.run_id).read_text())
    assert manifest["resumed"]["queries_from_checkpoint"] == 16
    assert manifest["run_id"] == stop.run_id and manifest["status"] == "complete"


def test_a_checkpointed_answer_is_reused_only_for_the_same_ranking(interrupted, clean):
    runs, stop = interrupted
    folder = runs / f".partial-{stop.run_id}"
    first, second = sorted(folder.glob("answers-*.jsonl"))
    records = [json.loads(line) for line in first.read_text().splitlines()]
    records[0]["key"] = "computed from another ranking"
    first.write_text("".join(json.dumps(r) + "\n" for r in records))
    second.write_text(second.read_text()[:-40])  # a damaged block (cannot happen, but still)
    result = resume_run(stop.run_id, runs_dir=runs)
    assert result.manifest["resumed"]["queries_from_checkpoint"] == 7
    assert_same_traces(result.location, clean)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--variant", "hybrid"], ["was started with --variant baseline, not hybrid"]),
        (["--variant", "baseline,hybrid"], ["finishes one run"]),
        (["--set", "retriever.k1=0.9"], ["retriever.k1=1.5, not 0.9", "same --set"]),
        (["--judge", "annotated"], ['judge.name="lexical", not "annotated"']),
        (["--k", "1,5"], ["--k 1,3,5,10,20,100, not 1,5"]),
        (["--depth", "200"], ["--depth 100, not 200"]),
        (["--tag", "relay"], ["--tag smoke, not --tag relay"]),
        (["--split", "dev"], ["no qrels for split 'dev'"]),
    ],
)
def test_a_resume_that_does_not_match_the_run_is_refused(interrupted, rag_bench, args, fragments):
    runs, stop = interrupted
    before = sorted(p.name for p in (runs / f".partial-{stop.run_id}").iterdir())
    out = rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs, *args)
    assert_one_line_error(out, *fragments)
    assert visible(runs) == [] and hidden(runs) == [f".partial-{stop.run_id}"]
    assert sorted(p.name for p in (runs / f".partial-{stop.run_id}").iterdir()) == before


def test_a_changed_dataset_is_refused(tmp_path, monkeypatch, index_cache, rag_bench):
    data = tmp_path / "kb"
    shutil.copytree(SHIPPED, data)
    runs = tmp_path / "runs"
    stop = interrupted_run(monkeypatch, runs, index_cache, dataset=data)
    corpus = data / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("Kestrel", "Falcon", 1))
    assert_one_line_error(
        rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs),
        f"dataset {data} is not the data run {stop.run_id} started on",
        "resume with the same data",
    )
    shutil.rmtree(data)
    assert_one_line_error(
        rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs),
        "no longer here",
        "--dataset",
    )
    assert visible(runs) == [] and hidden(runs) == [f".partial-{stop.run_id}"]


def test_resume_refs_that_name_nothing_to_resume(interrupted, clean, rag_bench):
    runs, stop = interrupted
    assert_one_line_error(
        rag_bench("run", "--resume", "nope", "--runs-dir", runs),
        "no interrupted run 'nope'",
        stop.run_id,
    )
    assert_one_line_error(
        rag_bench("run", "--resume", clean.run_id, "--runs-dir", clean.runs),
        f"run {clean.run_id} is complete",
    )
    assert_one_line_error(rag_bench("run", "--runs-dir", runs), "no --variant given")
    assert hidden(runs) == [f".partial-{stop.run_id}"]


@pytest.mark.signals
def test_a_run_in_use_by_another_process_is_not_resumed(interrupted, rag_bench):
    runs, stop = interrupted
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('locked', flush=True); time.sleep(60)",
            str(runs / f".{stop.run_id}.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert_one_line_error(
            rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs),
            f"run {stop.run_id} is in use by another rag-bench process",
        )
    finally:
        holder.kill()
        holder.wait()
    assert rag_bench("run", "--resume", stop.run_id, "--runs-dir", runs).exit_code == 0


def test_an_endpoint_that_gives_up_mid_run_keeps_the_checkpoint_and_says_how_to_resume(
    tmp_path, monkeypatch, index_cache, clean
):
    runs = tmp_path / "runs"
    monkeypatch.setattr(compose, "BATCH", 8)
    real = compose.Pipeline.answer_block
    calls = []

    def flaky(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise EndpointError("http://llm/v1/chat/completions failed 5 time(s)", "check it")
        return real(self, *args)

    monkeypatch.setattr(compose.Pipeline, "answer_block", flaky)
    with pytest.raises(EndpointError) as info:
        run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=index_cache)
    run_id = hidden(runs)[0].removeprefix(".partial-")
    assert str(info.value).endswith(
        f"(fix: check it; then resume with `rag-bench run --resume {run_id} --runs-dir {runs}` "
        "(16 of 30 queries are checkpointed))"
    )
    monkeypatch.setattr(compose.Pipeline, "answer_block", real)
    assert_same_traces(resume_run(run_id, runs_dir=runs).location, clean)


def test_a_failure_before_any_answer_leaves_nothing(tmp_path, monkeypatch, index_cache):
    runs = tmp_path / "runs"

    def broken(self, *args):
        raise EndpointError("http://llm/v1 answered HTTP 401", "set OPENAI_API_KEY")

    monkeypatch.setattr(compose.Pipeline, "answer_block", broken)
    with pytest.raises(EndpointError) as info:
        run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=index_cache)
    assert "resume" not in str(info.value)
    assert visible(runs) == [] and hidden(runs) == []


# --- a slow LLM generator and judge behind a fake OpenAI-compatible server -------------------


class FakeLLM:
    """Chat completions for the openai generator (cites the first passage) and the llm judge
    (every claim fully supported); counts the requests of each."""

    def __init__(self):
        self.generate = self.judge = 0
        self.lock = threading.Lock()
        self.server, self.url = serve_posts(
            lambda path, body: (200, json.dumps(self.reply(json.loads(body))).encode())
        )

    def reply(self, body: dict) -> dict:
        system, user = (m["content"] for m in body["messages"][:2])
        if system.startswith("You are a strict fact-checker"):
            with self.lock:
                self.judge += 1
            claims = re.findall(r"^(\d+)\. ", user.split("Claims:")[-1], re.MULTILINE)
            verdicts = [
                {"claim_id": int(c), "grade": 2, "supporting_passages": [1], "reason": "ok"}
                for c in claims
            ]
            content = json.dumps({"verdicts": verdicts})
        else:
            with self.lock:
                self.generate += 1
            doc = re.search(r'doc_id="([^"]+)"', user).group(1)
            question = user.rsplit("Question:", 1)[1].strip().rstrip("?")
            content = f"The passages answer {question!r} [{doc}]."
        choice = {"index": 0, "message": {"role": "assistant", "content": content}}
        return {"choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


@pytest.fixture
def llm(monkeypatch):
    fake = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


LLM_OPTIONS = [
    "generator.name=openai",
    "generator.cache=false",
    "generator.retry_backoff=0",
    "judge.name=llm",
    "judge.cache=false",
    "judge.retry_backoff=0",
]


@pytest.mark.signals
def test_ctrl_c_during_llm_answering_then_resume_repeats_no_request(tmp_path, llm, index_cache):
    require("httpx")
    runs = tmp_path / "runs"
    args = ["run", "--variant", "baseline", "--sample", "80", "--seed", "3", "--runs-dir", runs]
    for option in LLM_OPTIONS:
        args += ["--set", option]
    env = {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}
    process = Process(args, cache=index_cache, pause="answer", env=env)
    process.wait_for("paused at answer")
    process.signal(signal.SIGINT)
    assert process.finish() == 130
    [message] = process.messages()
    assert "not stored, 32 of 80 queries checkpointed; resume with: rag-bench run --resume" in (
        message
    )
    assert llm.generate == 32 and visible(runs) == []

    run_id = open_runs(runs).find_checkpoint("")[1].run_id
    resumed = resume_run(run_id, runs_dir=runs, cache_dir=index_cache)
    assert llm.generate == 80  # the 48 unanswered queries, nothing twice
    assert resumed.manifest["resumed"]["queries_from_checkpoint"] == 32
    assert resumed.manifest["usage"]["generator"]["requests"] == 80
    assert resumed.manifest["usage"]["judge"]["requests"] == llm.judge
    judged = llm.judge

    clean = run_variant(
        "baseline",
        SHIPPED,
        overrides=LLM_OPTIONS,
        selection=Selection(sample=80, seed=3),
        runs_dir=tmp_path / "clean",
        cache_dir=index_cache,
    )
    assert llm.generate == 160 and llm.judge == 2 * judged  # the interrupted run judged once
    assert_same_traces(resumed.location, clean.location)
    answers = clean.queries["answer"]
    assert answers.str.contains("The passages answer").all()


def test_ctrl_c_in_the_second_variant_names_the_run_already_stored(
    tmp_path, monkeypatch, rag_bench
):
    runs = tmp_path / "runs"
    interrupt_after_blocks(monkeypatch, 2, block=32)  # baseline's one block, then hybrid's
    out = rag_bench(
        "run", "--variant", "baseline,hybrid", "--tag", "smoke", "--runs-dir", runs
    )  # fmt: skip
    assert out.exit_code == 130 and out.stdout == ""
    stored, message = out.stderr.strip().splitlines()
    [baseline] = visible(runs)
    hybrid = hidden(runs)[0].removeprefix(".partial-")
    assert stored.startswith(f"stored run {baseline} (30 queries)")
    assert message == (
        f"interrupted; run {hybrid} not stored, 30 of 30 queries checkpointed; resume with: "
        f"rag-bench run --resume {hybrid} --runs-dir {runs}; stored before: {baseline}"
    )
