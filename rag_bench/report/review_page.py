"""The review page: one self-contained HTML document that shows review items one at a time and
posts each decision to the review server (:mod:`rag_bench.report.review`).

Dataset text is hostile input. The items reach the page as JSON inside a
``<script type="application/json">`` block with ``<``, ``>`` and ``&`` written as ``\\u003c``,
``\\u003e`` and ``\\u0026`` (so no text can close the block), and the script puts every string
on the page through ``textContent``, never as markup.
"""

from __future__ import annotations

import json

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ddd;
  padding: .5rem 1rem; display: flex; gap: 1.5rem; align-items: baseline; }
main { max-width: 60rem; margin: 1rem auto; padding: 0 1rem; }
h2 { font-size: 1rem; margin: 1rem 0 .25rem; color: #555; text-transform: uppercase; }
.box { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: .75rem;
  white-space: pre-wrap; max-height: 24rem; overflow: auto; }
.query { font-size: 1.15rem; font-weight: 600; }
.done { color: #1a7f37; font-weight: 600; }
.keys kbd { border: 1px solid #bbb; border-radius: 3px; padding: 0 .3rem; background: #f3f3f3; }
.choices button { margin-right: .4rem; }
.chosen { outline: 3px solid #0969da; }
#status { color: #555; }
#status.error { color: #cf222e; font-weight: 600; }
"""

SCRIPT = r"""
"use strict";
const data = JSON.parse(document.getElementById("review-data").textContent);
const items = data.items;
const decided = data.labels;  // item key -> the last decision, e.g. {"grade": 2}
let at = 0;
const $ = (id) => document.getElementById(id);
const KEYS = {
  pair: "0 1 2 3 grade (0 not relevant … 3 highly relevant)",
  claim: "s supported · u unsupported (by the context shown)",
  generated: "a accept · r reject · e edit the question, Enter accepts the edit",
};

function block(title, text, cls) {
  const section = document.createElement("section");
  const head = document.createElement("h2");
  head.textContent = title;
  const body = document.createElement("div");
  body.className = "box" + (cls ? " " + cls : "");
  body.textContent = text == null ? "" : String(text);
  section.append(head, body);
  return section;
}

function shown(label) {
  if (!label) return "not labelled yet";
  if ("grade" in label) return "grade " + label.grade;
  if ("label" in label) return label.label;
  return label.accept ? "accepted" : "rejected";
}

function progress() {
  const n = items.filter((item) => item.key in decided).length;
  $("progress").textContent = n + " / " + items.length + " labelled";
  return n;
}

function render() {
  const view = $("item");
  view.replaceChildren();
  progress();
  if (!items.length) { view.textContent = "The pool file has no items."; return; }
  const item = items[at];
  $("position").textContent = "item " + (at + 1) + " of " + items.length + " (" + item.kind + ")";
  $("keys").textContent = KEYS[item.kind] + " · j/k or arrows move";
  const label = decided[item.key];
  const mark = document.createElement("p");
  mark.id = "current";
  mark.className = label ? "done" : "";
  mark.textContent = shown(label);
  view.append(mark);
  if (item.kind === "pair") {
    view.append(block("query " + item.query_id, item.query, "query"));
    view.append(block("document " + item.doc_id + (item.doc_title ? ": " + item.doc_title : ""),
      item.doc_text));
    if (item.answer != null) view.append(block("the run's answer", item.answer));
  } else if (item.kind === "claim") {
    view.append(block("query " + item.query_id, item.query, "query"));
    view.append(block("claim " + item.claim_index, item.claim, "query"));
    view.append(block("answer", item.answer));
    for (const passage of item.context || []) {
      view.append(block("context " + passage.doc_id, passage.text));
    }
  } else {
    view.append(block("proposed question " + item.query_id, item.query, "query"));
    const edit = document.createElement("input");
    edit.id = "edit";
    edit.size = 80;
    edit.value = label && label.query ? label.query : item.query;
    edit.addEventListener("keydown", (event) => {
      event.stopPropagation();
      if (event.key === "Enter") { edit.blur(); decide({accept: true, query: edit.value}); }
      if (event.key === "Escape") edit.blur();
    });
    view.append(edit);
    view.append(block("gold answer", item.gold_answer));
    view.append(block("source span", item.source_span));
    view.append(block("documents " + (item.doc_ids || []).join(", "), item.doc_text));
  }
}

function nextUnlabelled(from) {
  for (let step = 1; step <= items.length; step++) {
    const i = (from + step) % items.length;
    if (!(items[i].key in decided)) return i;
  }
  return -1;
}

function say(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function decide(decision) {
  const item = items[at];
  const body = JSON.stringify(Object.assign({index: at}, decision));
  let answer;
  try {
    const response = await fetch("label?token=" + encodeURIComponent(data.token),
      {method: "POST", headers: {"Content-Type": "application/json"}, body: body});
    answer = await response.json();
    if (!response.ok) throw new Error(answer.error || response.statusText);
  } catch (error) {
    say("not saved: " + error.message, true);
    return;
  }
  decided[item.key] = answer.label;
  say("saved: " + item.kind + " " + (at + 1) + " " + shown(answer.label), false);
  const next = nextUnlabelled(at);
  if (next < 0) { render(); say("every item is labelled", false); return; }
  at = next;
  render();
}

function move(step) {
  if (!items.length) return;
  at = (at + step + items.length) % items.length;
  render();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || !items.length) return;
  const kind = items[at].kind;
  const key = event.key;
  if (kind === "pair" && "0123".includes(key) && key.length === 1) decide({grade: Number(key)});
  else if (kind === "claim" && (key === "s" || key === "u"))
    decide({label: key === "s" ? "supported" : "unsupported"});
  else if (kind === "generated" && (key === "a" || key === "r")) {
    const edit = $("edit");
    const decision = {accept: key === "a"};
    if (key === "a" && edit && edit.value !== items[at].query) decision.query = edit.value;
    decide(decision);
  } else if (kind === "generated" && key === "e") { event.preventDefault(); $("edit").focus(); }
  else if (key === "j" || key === "ArrowDown" || key === "ArrowRight") move(1);
  else if (key === "k" || key === "ArrowUp" || key === "ArrowLeft") move(-1);
  else return;
  event.preventDefault();
});

const first = items.findIndex((item) => !(item.key in decided));
at = first < 0 ? 0 : first;
render();
if (first < 0 && items.length) say("every item is labelled", false);
"""


def _script_json(value: object) -> str:
    """JSON that cannot end the ``<script>`` block it sits in."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def review_page(payload: dict) -> str:
    """The page for ``payload`` (``items``, each with its ``key``; ``labels``, key -> last
    decision; ``labeller``; ``token``)."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>rag-bench review</title>"
        f"<style>{STYLE}</style></head><body>"
        "<header><strong>rag-bench review</strong><span id='progress'></span>"
        "<span id='position'></span><span id='status' role='status'></span></header>"
        "<main><p class='keys' id='keys'></p><div id='item'></div></main>"
        f"<script type='application/json' id='review-data'>{_script_json(payload)}</script>"
        f"<script>{SCRIPT}</script></body></html>"
    )
