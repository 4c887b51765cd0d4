"""Adapters for the stacks RAG teams already run: each turns that stack's own hooks into ragwatch runs.

Every module here imports its framework, so each is an optional extra (``pip install ragwatch[langchain]``
and so on) and none is imported by ``import ragwatch``:

- :mod:`ragwatch.integrations.langchain` — a callback handler for LangChain chains, retrievers, chat models;
- :mod:`ragwatch.integrations.llamaindex` — an event handler for llama-index-core's instrumentation dispatcher;
- :mod:`ragwatch.integrations.openai` — ``instrument(client, rw)`` for ``OpenAI`` / ``AsyncOpenAI`` clients;
- :mod:`ragwatch.integrations.otel` — a span processor reading spans other instrumentations already emit.
"""
