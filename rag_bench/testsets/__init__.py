"""Test sets grown from a corpus: proposed queries (offline rules or an LLM), the quality
report that says whether they are worth reviewing, and the review step that makes them
labelled (see docs/generate.md)."""
