"""Sampling: what leaves the process, and in which form.

Owns the sampling decision (``sampler``), redaction before anything is stored (``redact``) and the sample
record codec both sides share (``sample``: the service encodes, the worker decodes).

May import: ``ragwatch.capture.run`` (the record is built from a Run) and the top-level foundations.
Never the queue, the scoring side or anything that does I/O.
"""
