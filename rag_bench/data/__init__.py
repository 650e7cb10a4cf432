"""Datasets: the BEIR layout with rag-bench's extras, qrels, rankings, recorded outputs.

The names below are what the command line offers as choices; they live here, with nothing
heavy imported, so that ``rag-bench --help`` stays fast.
"""

TIERS = ("smoke", "regression", "deep")  # the query tiers of data.tiers, smallest first
SAMPLED_TIERS = TIERS[:-1]  # deep is every labelled query: nothing to sample
# tags of queries proposed by `rag-bench generate`: every one is generated, and unreviewed
# until a person accepts it (then reviewed); see rag_bench.testsets
GENERATED_TAG, UNREVIEWED_TAG, REVIEWED_TAG = "generated", "unreviewed", "reviewed"
