"""Pipeline components (chunk → retrieve → fuse → rerank → generate) and their composition.

The stage names below are the traces' (the ``stage`` of a stored ranking, the ``latency_ms_*``
columns); they live here, with nothing heavy imported, so that the command line can name them.
"""

DOCUMENTS_STAGE = "documents"  # the stored document ranking (the final chunk ranking collapsed)
ANSWER_STAGES = ("generate", "judge")  # the stages after ranking (a checkpoint keeps their times)
LATENCY_STAGES = ("retrieve", "fusion", "rerank", *ANSWER_STAGES)  # every timed stage, in order
