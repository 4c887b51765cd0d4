"""LangChain embedding classes as ragwatch's ``embed`` stage: they send no callbacks, so their methods are watched.

LangChain's ``Embeddings`` (``embed_query``, ``embed_documents`` and their async forms) reports nothing to
callback handlers, so an embedding call would hide inside ``retrieve`` and its tokens would be missing from
the bill. :func:`watch` replaces those methods, where a class defines them, on every installed subclass of
``langchain_core.embeddings.Embeddings`` (and on the base's own async defaults) and, through an
``__init_subclass__`` hook on the base, on every subclass defined later; :func:`unwatch` puts all of it back.

Each call is one :class:`~ragwatch.capture.calls.EmbedCall`: its latency and its tokens, priced for the
class's ``model`` when it has one. LangChain returns bare vectors, so the tokens are the ones the instrumented
openai SDK call inside reports (``OpenAIEmbeddings``: :mod:`ragwatch.integrations.openai` adds them to this
call), else estimated from the texts. A call is counted once: while a watched method runs, it is the open
framework call (``enter_framework_call``), so a subclass calling its parent, ``embed_query`` calling
``embed_documents``, the base's ``aembed_*`` running the sync method in an executor, or the openai SDK call
inside ``OpenAIEmbeddings`` (instrumented too) go straight through. The host's vectors are returned untouched;
our bookkeeping fails open like every decorator.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from ragwatch.capture.calls import EmbedCall
from ragwatch.capture.instrument import instrument
from ragwatch.capture.run import enter_framework_call, framework_call

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["EmbeddingsPatch", "unwatch", "watch"]

_METHODS = ("embed_documents", "embed_query", "aembed_documents", "aembed_query")
_MARK = "_ragwatch_original"
_MODEL_ATTRIBUTES = ("model", "model_name")
#: class -> which of ``_MODEL_ATTRIBUTES`` it (or a base) defines at class level; weak: classes come and go
_CLASS_ATTRIBUTES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


class EmbeddingsPatch:
    """What :func:`watch` replaced — ``(class, method name, original)`` — and the ``__init_subclass__`` it
    found on the base (None: inherited), so :func:`unwatch` can restore both. Classes defined while watching
    add to ``replaced``."""

    __slots__ = ("hooked", "previous_hook", "replaced", "rw")

    def __init__(self, rw: RagWatch) -> None:
        self.rw = rw
        self.replaced: list[tuple[type, str, Any]] = []
        self.hooked = False
        self.previous_hook: Any = None

    def patch(self, cls: type) -> None:
        """Watch the embedding methods ``cls`` itself defines; never twice, never an abstract one."""
        try:
            for name in _METHODS:
                method = cls.__dict__.get(name)
                if (
                    not inspect.isfunction(method)
                    or getattr(method, "__isabstractmethod__", False)
                    or getattr(method, _MARK, None) is not None
                ):
                    continue
                setattr(cls, name, _watched(self.rw, method))
                self.replaced.append((cls, name, method))
        except Exception as exc:  # an embedding class we cannot patch: it runs unwatched
            self.rw.guard.failed("capture", exc, f"could not watch {getattr(cls, '__qualname__', cls)!r}")


def watch(rw: RagWatch) -> EmbeddingsPatch:
    """Watch every LangChain embedding class, installed now or defined later, through ``rw``."""
    patch = EmbeddingsPatch(rw)
    for cls in _classes(Embeddings):
        patch.patch(cls)
    current = Embeddings.__dict__.get("__init_subclass__")
    if getattr(getattr(current, "__func__", None), _MARK, None) is None:  # one hook, even for a second rw
        patch.previous_hook = current
        Embeddings.__init_subclass__ = classmethod(_hook(patch))  # type: ignore[assignment,method-assign]
        patch.hooked = True
    return patch


def unwatch(patch: EmbeddingsPatch) -> None:
    """Put back the original methods and the base's ``__init_subclass__``."""
    if patch.hooked:
        if patch.previous_hook is None:
            del Embeddings.__init_subclass__
        else:
            Embeddings.__init_subclass__ = patch.previous_hook  # type: ignore[method-assign]
        patch.hooked = False
    for cls, name, original in reversed(patch.replaced):
        if getattr(cls.__dict__.get(name), _MARK, None) is original:
            setattr(cls, name, original)
    patch.replaced.clear()


def _classes(base: type) -> Iterator[type]:
    """``base`` and its subclasses at every depth, each once (a class with two embedding parents)."""
    seen: set[type] = set()
    stack = [base]
    while stack:
        cls = stack.pop()
        if cls not in seen:
            seen.add(cls)
            yield cls
            stack.extend(cls.__subclasses__())


def _hook(patch: EmbeddingsPatch) -> Any:
    previous = patch.previous_hook

    def __init_subclass__(cls: type[Embeddings], **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(Embeddings, cls).__init_subclass__(**kwargs)
        patch.patch(cls)  # guarded: a class definition never fails because of ragwatch

    setattr(__init_subclass__, _MARK, patch)  # ours: a second rw adds no second hook
    return __init_subclass__


def _watched(rw: RagWatch, method: Any) -> Any:
    """``method`` as an ``embed`` stage, except inside an embedding call ``rw`` is already recording."""
    watched = instrument(method, functools.partial(_begin, rw), rw.guard)
    if inspect.iscoroutinefunction(method):

        async def acall(*args: Any, **kwargs: Any) -> Any:
            if framework_call(rw, EmbedCall) is not None:
                return await method(*args, **kwargs)
            return await watched(*args, **kwargs)

        wrapper: Any = functools.wraps(method)(acall)
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            if framework_call(rw, EmbedCall) is not None:
                return method(*args, **kwargs)
            return watched(*args, **kwargs)

        wrapper = functools.wraps(method)(call)
    setattr(wrapper, _MARK, method)
    return wrapper


def _begin(rw: RagWatch, args: tuple, kwargs: dict) -> EmbedCall:
    """The call for ``self.embed_*(texts)``: the texts (not ``self``) are what its tokens are estimated
    from, the instance's ``model`` (or ``model_name``) what they are priced as."""
    call = EmbedCall(rw, _model_of(args[0] if args else None), None, args[1:], kwargs)
    enter_framework_call(call)  # what this call runs (a parent's method, the openai SDK) is this call
    return call


def _model_of(embeddings: Any) -> str | None:
    """The instance's ``model`` (or ``model_name``). A pydantic field's value sits in the instance's
    ``__dict__``, an extra one (a class with ``extra="allow"``) in its ``__pydantic_extra__``; a class
    attribute or property (which may raise: counted by the stage's guard) is read only when a class defines
    one. Asking a pydantic model for an attribute it lacks builds an ``AttributeError`` in its Python
    ``__getattr__`` — twice per call for a class with neither name (``DeterministicFakeEmbedding``), which
    cost more than the rest of the stage."""
    cls = type(embeddings)
    on_class = _CLASS_ATTRIBUTES.get(cls)
    if on_class is None:
        on_class = _CLASS_ATTRIBUTES[cls] = tuple(
            name for name in _MODEL_ATTRIBUTES if any(name in vars(c) for c in cls.__mro__)
        )
    fields = getattr(embeddings, "__dict__", None) or {}
    # a model given as an extra of a pydantic class that allows them (``extra="allow"``, no declared field)
    extra = getattr(embeddings, "__pydantic_extra__", None)
    extras = extra if isinstance(extra, dict) else {}
    for name in _MODEL_ATTRIBUTES:
        value = getattr(embeddings, name, None) if name in on_class else fields.get(name, extras.get(name))
        if isinstance(value, str) and value:
            return value
    return None
