"""Queue: the contract between the service and the workers, its two backends, and the producer.

``contract`` is the protocol every backend implements (and knows no backend); ``memory`` and ``redis`` are
the backends (``redis_connect`` makes the redis-py client for any URL form); ``factory.open_queue`` picks
one from a URL; ``keys`` names every Redis key; ``producer`` is the service-side buffer and flusher.

May import: ``ragwatch.mode.degrade`` (the mode state both sides store in the queue), ``ragwatch.metrics``,
``ragwatch.capture.run`` (the producer's sample source) and the top-level foundations. Never the scoring side.
"""
