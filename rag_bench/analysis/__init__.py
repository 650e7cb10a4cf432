"""Questions over stored runs, one verb a module: compare, gate, diff, diagnose, judge
agreement, export; the slicing rule (``slices``), the pairing (``pairing``) and every SQL read
of the traces (``reads``) they share.

The names the command line offers as choices live here, with nothing heavy imported, so that
it can list them without loading pandas.
"""

SLICES = ("category", "tag", "failure_class")  # what queries can be grouped by (analysis.slices)
GATE_RULES = ("auto", "significant", "drop")  # what makes the gate fail (analysis.gate)
EXPORT_FORMATS = ("trec", "jsonl", "parquet")  # what a run is exported as (analysis.export)
