"""Questions over stored runs: compare, diff, gate, diagnose, judge agreement, export.

``SLICES`` (what queries can be grouped by) lives here, with nothing heavy imported, so that the
command line can offer it as choices without loading pandas.
"""

SLICES = ("category", "tag", "failure_class")
