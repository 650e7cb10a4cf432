"""rag-bench review: the page in headless Chromium driven by real key presses (playwright with
Debian's chromium), the labels file it appends to, resuming, escaping of hostile text, and the
server's guards (loopback Host, token, content type)."""

from __future__ import annotations

import http.client
import json
import re
import threading

import pytest
from review_browser import Page, review_command

from conftest import SHIPPED, assert_one_line_error
from rag_bench.analysis.pool import pool_pairs
from rag_bench.data.review import latest_labels, read_labels, write_items
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.report.review import ReviewServer, ReviewSession
from rag_bench.report.review_page import SCRIPT, review_page
from rag_bench.runs import open_runs

PAYLOAD = (
    "</script><script>document.body.dataset.pwned=1</script>"
    "<img src=x onerror=\"document.body.dataset.pwned=2\"> & 'q'"
)
WHEN = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    """The pool of a baseline and a hybrid_rerank run on the smoke queries."""
    runs = tmp_path_factory.mktemp("review-runs")
    cache = tmp_path_factory.getbasetemp() / "cache"
    ids = [
        run_variant(
            name, SHIPPED, selection=Selection(tag="smoke"), runs_dir=runs, cache_dir=cache
        ).run_id
        for name in ("baseline", "hybrid_rerank")
    ]
    path = tmp_path_factory.mktemp("review-pool") / "pool.jsonl"
    write_items(pool_pairs(open_runs(runs), ids, depth=10), path)
    return path


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.browser
@pytest.mark.slow
def test_pairs_are_graded_by_keyboard_and_the_labels_file_grows_line_by_line(
    browser, pool_file, tmp_path
):
    items = [json.loads(line) for line in pool_file.read_text(encoding="utf-8").splitlines()]
    labels = tmp_path / "labels.jsonl"
    with ReviewServer(ReviewSession(pool_file, labels, "ana")).running() as server:
        page = Page(browser, server.url)
        assert page.text("progress") == f"0 / {len(items)} labelled"
        assert page.text("position").startswith(f"item 1 of {len(items)}")
        assert items[0]["query"] in page.text("item")
        assert items[0]["doc_text"].split("\n")[0] in page.text("item")
        page.press("2", "pair 1 grade 2")  # item 1 → 2; the next unlabelled comes up
        assert page.text("position").startswith("item 2 ")
        page.press("0", "pair 2 grade 0")
        page.press("j")  # skip item 3
        page.press("3", "pair 4 grade 3")  # → item 5
        page.press("k")
        page.press("ArrowUp")  # back to item 3
        page.press("1", "pair 3 grade 1")  # the next unlabelled after item 3 is item 5
        assert page.text("position").startswith("item 5 ")
        page.press("ArrowLeft")
        assert page.text("current") == "grade 3"  # item 4 shows its decision
        page.press("2", "pair 4 grade 2")  # a correction
        page.press("x")  # no key of a pair: nothing happens
        assert page.text("progress") == f"4 / {len(items)} labelled"
        assert not page.problems, page.problems
    written = lines(labels)
    expected = [(0, 2), (1, 0), (3, 3), (2, 1), (3, 2)]
    assert len(written) == len(expected)
    for label, (index, grade) in zip(written, expected):
        item = items[index]
        assert label == {
            "kind": "pair",
            "query_id": item["query_id"],
            "doc_id": item["doc_id"],
            "dataset": "kestrel-kb",
            "grade": grade,
            "labeller": "ana",
            "labelled_at": label["labelled_at"],
        }
        assert WHEN.match(label["labelled_at"])
    latest = latest_labels(read_labels(labels))
    assert latest[("pair", items[3]["query_id"], items[3]["doc_id"])]["grade"] == 2

    # resuming: the labelled items are skipped, the page opens on the first unlabelled one
    with ReviewServer(ReviewSession(pool_file, labels, "ben")).running() as server:
        page = Page(browser, server.url)
        assert page.text("progress") == f"4 / {len(items)} labelled"
        assert page.text("position").startswith("item 5 ")
        page.press("1", "pair 5 grade 1")
        assert not page.problems, page.problems
    last = lines(labels)
    assert last[:5] == written  # nothing stored is rewritten
    assert last[5]["doc_id"] == items[4]["doc_id"] and last[5]["labeller"] == "ben"


def hostile_items() -> list[dict]:
    return [
        {
            "kind": "pair",
            "dataset": "d",
            "query_id": "q1",
            "query": PAYLOAD,
            "doc_id": "d1",
            "doc_title": PAYLOAD,
            "doc_text": PAYLOAD,
            "answer": PAYLOAD,
            "priority": 1.0,
            "runs": ["r"],
            "ranks": {"r": 1},
        },
        {
            "kind": "claim",
            "run_id": "r",
            "query_id": "q1",
            "query": "q",
            "claim_index": 0,
            "claim": PAYLOAD,
            "answer": PAYLOAD,
            "context": [{"doc_id": "d1", "text": PAYLOAD}],
            "judge_verdict": "supported",
            "stratum": "supported/ok",
        },
        {
            "kind": "claim",
            "run_id": "r",
            "query_id": "q2",
            "query": "q",
            "claim_index": 3,
            "claim": "c",
            "answer": "a",
            "context": [],
            "judge_verdict": "unsupported",
            "stratum": "unsupported/ok",
        },
        {
            "kind": "generated",
            "dataset": "d",
            "query_id": "g1",
            "query": PAYLOAD,
            "category": "literal",
            "doc_ids": ["d1"],
            "gold_answer": PAYLOAD,
            "source_span": PAYLOAD,
            "doc_text": PAYLOAD,
        },
        {
            "kind": "generated",
            "dataset": "d",
            "query_id": "g2",
            "query": "What is asked?",
            "category": "paraphrase",
            "doc_ids": ["d1"],
            "gold_answer": "g",
            "source_span": "s",
            "doc_text": "t",
        },
    ]


@pytest.mark.browser
def test_claims_and_generated_queries_are_labelled_and_hostile_text_stays_text(browser, tmp_path):
    pool = tmp_path / "pool.jsonl"
    write_items(hostile_items(), pool)
    labels = tmp_path / "labels.jsonl"
    with ReviewServer(ReviewSession(pool, labels, "ana")).running() as server:
        page = Page(browser, server.url)
        for _ in range(5):
            shown = page.text("item")
            assert PAYLOAD in shown or "What is asked?" in shown or "c" in shown
            assert page.page.evaluate("document.body.dataset.pwned") is None
            assert page.page.query_selector_all("img") == []
            page.press("j")  # five moves: around to item 1 again
        page.press("1", "pair 1 grade 1")
        page.press("s", "claim 2 supported")
        page.press("2")  # not a claim's key
        page.press("u", "claim 3 unsupported")
        page.press("r", "generated 4 rejected")
        page.press("e")  # edit the proposed question, Enter accepts the edit
        page.page.fill("#edit", "What, exactly, is asked?")
        page.press("Enter", says="every item is labelled")
        assert page.text("progress") == "5 / 5 labelled"
        assert page.page.evaluate("document.body.dataset.pwned") is None
        assert not page.problems, page.problems
    decisions = [
        {k: v for k, v in label.items() if k not in ("labeller", "labelled_at")}
        for label in lines(labels)
    ]
    assert decisions == [
        {"kind": "pair", "query_id": "q1", "doc_id": "d1", "dataset": "d", "grade": 1},
        {"kind": "claim", "run_id": "r", "query_id": "q1", "claim_index": 0, "label": "supported"},
        {
            "kind": "claim",
            "run_id": "r",
            "query_id": "q2",
            "claim_index": 3,
            "label": "unsupported",
        },
        {"kind": "generated", "query_id": "g1", "dataset": "d", "accept": False},
        {
            "kind": "generated",
            "query_id": "g2",
            "dataset": "d",
            "accept": True,
            "query": "What, exactly, is asked?",
        },
    ]


def test_the_page_never_shows_the_judge_verdict_and_no_text_closes_its_data_block():
    items = hostile_items()
    page = review_page(
        {"items": [{**item, "key": str(n)} for n, item in enumerate(items)], "labels": {}}
    )
    # a person labels a claim blind: the script never reads judge_verdict or stratum
    assert "judge_verdict" not in SCRIPT and "stratum" not in SCRIPT
    data = page.split("<script type='application/json' id='review-data'>")[1]
    block = data[: data.index("</script>")]
    assert "<" not in block and ">" not in block
    assert json.loads(block)["items"][0]["doc_text"] == PAYLOAD


def post(
    server: ReviewServer, path: str, body: bytes, host: str | None = None, kind="application/json"
):
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
    headers = {"Content-Type": kind, "Host": host or f"127.0.0.1:{server.server_port}"}
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, response.read()


def test_a_label_needs_the_token_the_loopback_host_and_json(tmp_path):
    pool = tmp_path / "pool.jsonl"
    write_items(hostile_items(), pool)
    labels = tmp_path / "labels.jsonl"
    session = ReviewSession(pool, labels, "ana")
    good = json.dumps({"index": 0, "grade": 2}).encode()
    with ReviewServer(session).running() as server:
        token = f"/label?token={session.token}"
        assert post(server, "/label?token=wrong", good)[0] == 403
        assert post(server, "/label", good)[0] == 403
        assert post(server, token, good, host="evil.example:80")[0] == 403
        assert post(server, token, b"index=0&grade=2", kind="text/plain")[0] == 415
        assert not labels.exists()
        assert post(server, token, json.dumps({"index": 0, "grade": 7}).encode())[0] == 400
        assert post(server, token, json.dumps({"index": 9, "grade": 1}).encode())[0] == 400
        assert post(server, token, json.dumps({"index": 1, "grade": 1}).encode())[0] == 400
        assert not labels.exists()
        assert post(server, token, b"[1, 2]")[0] == 400
        assert post(server, token, b"{not json")[0] == 400
        assert post(server, token, good)[0] == 200
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        connection.request("GET", "/", headers={"Host": f"127.0.0.1:{server.server_port}"})
        assert connection.getresponse().status == 403  # the page itself needs the token
    assert server.server_address[0] == "127.0.0.1"
    assert [label["grade"] for label in lines(labels)] == [2]


def test_two_sessions_appending_to_one_labels_file_lose_no_line(tmp_path):
    pool = tmp_path / "pool.jsonl"
    write_items(hostile_items(), pool)
    labels = tmp_path / "labels.jsonl"
    sessions = [ReviewSession(pool, labels, name) for name in ("ana", "ben")]

    def label(session):
        for grade in [0, 1, 2, 3] * 10:
            session.record({"index": 0, "grade": grade})

    threads = [threading.Thread(target=label, args=(s,)) for s in sessions for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = lines(labels)
    assert len(written) == 160
    assert sorted(w["labeller"] for w in written) == ["ana"] * 80 + ["ben"] * 80


def test_a_malformed_labels_file_is_one_line_naming_it(rag_bench, tmp_path):
    pool = tmp_path / "pool.jsonl"
    write_items(hostile_items(), pool)
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"kind": "pair", "query_id": "q1", "doc_id": "d1", "grade": 9}\n')
    outcome = rag_bench("review", pool, "-o", labels, "--labeller", "ana")
    assert_one_line_error(outcome, f"{labels}:1", "labeller")
    labels.write_text(
        '{"kind": "pair", "query_id": "q1", "doc_id": "d1", "grade": 9, "labeller": "a", '
        '"labelled_at": "2026-12-05T19:04:11Z"}\n'
    )
    outcome = rag_bench("review", pool, "-o", labels, "--labeller", "ana")
    assert_one_line_error(outcome, f"{labels}:1", "grade 9")
    outcome = rag_bench("review", labels, "-o", tmp_path / "x.jsonl", "--labeller", "ana")
    assert_one_line_error(outcome, f"{labels}:1", "missing field 'query'")  # labels, not items
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q1", "query": "q"}\n')
    outcome = rag_bench("review", bad, "-o", labels, "--labeller", "ana")
    assert_one_line_error(outcome, f"{bad}:1", "has no kind")
    outcome = rag_bench("review", pool, "-o", labels, "--labeller", " ")
    assert_one_line_error(outcome, "labeller is empty")
    labels.unlink()
    outcome = rag_bench("review", pool, "-o", labels, "--labeller", "ana", "--port", 70000)
    assert_one_line_error(outcome, "--port 70000 is out of range")


@pytest.mark.signals
def test_the_command_prints_its_url_serves_and_ends_on_ctrl_c(tmp_path):
    from urllib.parse import urlsplit

    pool = tmp_path / "pool.jsonl"
    write_items(hostile_items(), pool)
    labels = tmp_path / "labels.jsonl"
    with review_command(pool, labels, "ana") as review:
        url = urlsplit(review.url)
        connection = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        connection.request("GET", f"/?{url.query}")
        answer = connection.getresponse()
        assert answer.status == 200 and b"rag-bench review" in answer.read()
        connection.request(
            "POST",
            f"/label?{url.query}",
            body=json.dumps({"index": 1, "label": "unsupported"}),
            headers={"Content-Type": "application/json"},
        )
        assert connection.getresponse().status == 200
    assert review.returncode == 0, review.stderr
    assert "Traceback" not in review.stderr and review.stderr.strip() == "1/5 labelled"
    assert review.stdout.strip().splitlines()[-1] == f"1/5 labelled in {labels}"
    assert [(w["kind"], w["label"]) for w in lines(labels)] == [("claim", "unsupported")]
