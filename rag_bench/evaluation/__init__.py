"""Scoring: the metric catalogue, ranking kernels, answer metrics, failure classes, statistics.

The names below are what the command line offers as choices; they live here, with nothing
heavy imported, so that ``rag-bench --help`` stays fast.
"""

TEST_NAMES = ("randomization", "ttest", "bootstrap")  # the paired tests of evaluation.stats
