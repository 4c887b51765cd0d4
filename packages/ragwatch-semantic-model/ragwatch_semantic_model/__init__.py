"""The semantic tier's trained tensors and their note, shipped apart from ragwatch's core wheel.

Why a package of its own: the tensors are 14 MB that only ``ragwatch[semantic]`` and ``ragwatch[embeddings]``
read, so the core install does not carry them; and a package is how they arrive with nothing downloaded at
run time. ``ragwatch.scoring.judges.crossencoder`` finds this directory without importing anything else.
"""

from pathlib import Path

#: ``semantic_weights.json`` (the note: fitted_on, threshold_set_on, threshold, blend, band, tensors_sha256)
#: and ``semantic_weights.safetensors`` (the trained top layers and head, float16)
NOTE_PATH = Path(__file__).with_name("semantic_weights.json")
