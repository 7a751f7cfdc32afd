"""Streamed model answers: the LLM span ends exactly once, however the stream ends.

A stream returned by an SDK is wrapped in a transparent proxy (``wrapt.ObjectProxy``: every attribute the
caller uses is the SDK's own). The span ends

* when the caller reads the stream to its end (``agentdiag.stream.end=exhausted``),
* when the caller closes it, directly or by leaving its ``with`` block (``closed``),
* when reading raises (``error``; status ERROR, ``error.type``) or the reading task is cancelled
  (``cancelled``; status ERROR, ``error.type`` = the cancellation's class),
* when the stream is garbage-collected without any of the above (``abandoned``; status ERROR,
  ``error.type=agentdiag.stream_abandoned``): an answer nobody finished reading is never a success.

A stream helper that closes the SDK's HTTP response behind the proxy's back (``chat.completions.stream()``
does) ends the span as ``closed`` when the stream object is released.

Usage from the final chunk is recorded when the provider sends it; tokens it did not send stay absent.

With content capture on (and the call's owner leaving content to the client instrumentation) the accumulator
also rebuilds the answer from the chunks, and the answer is captured once, just before the span ends, however
the stream ended: what arrived is what is captured. With capture off no chunk content is kept.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol

from wrapt import ObjectProxy

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag.instrumentation._base import CANCELLATIONS, LLMCallState

__all__ = [
    "AsyncStreamManagerProxy",
    "AsyncStreamProxy",
    "StreamAccumulator",
    "SyncStreamManagerProxy",
    "SyncStreamProxy",
    "TextBuffer",
    "appended",
]


class StreamAccumulator(Protocol):
    """Collects what the span records from a provider's chunks."""

    content: bool
    """Whether it also rebuilds the answer's content (set when it is made, from the call's capture decision)."""

    def on_chunk(self, chunk: Any) -> None: ...

    def attributes(self, stream: Any) -> dict[str, Any]:
        """The response attributes gathered so far (``stream``: the SDK's stream object, for helpers that
        accumulate themselves)."""
        ...

    def completed(self, stream: Any) -> bool:
        """Whether the provider finished its answer (a closed stream that saw its end counts as exhausted)."""
        ...

    def output(self, stream: Any) -> Any:
        """The answer's content rebuilt so far (``semconv.CONTENT_OUTPUT_MESSAGES``), ``None`` when there is none;
        only called when :attr:`content` is true."""
        ...


class TextBuffer:
    """A streamed string, piece by piece, joined on demand: append is O(1) and the memory held stays close to
    the text's own size however small the pieces (every 256 pieces are joined into one block). Lossless."""

    __slots__ = ("_blocks", "_pieces")

    _BLOCK = 256

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._blocks: list[str] = []

    def add(self, piece: str) -> None:
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= self._BLOCK:
            self._blocks.append("".join(pieces))
            pieces.clear()

    def text(self) -> str:
        return "".join(self._blocks) + "".join(self._pieces)


def appended(buffer: TextBuffer | None, piece: Any) -> TextBuffer | None:
    """``buffer`` (a new one when None) with ``piece`` added, when ``piece`` is a string; else ``buffer``."""
    if not isinstance(piece, str):
        return buffer
    if buffer is None:
        buffer = TextBuffer()
    buffer.add(piece)
    return buffer


class _StreamState:
    """The span-side state of one stream; holds no reference to the proxy, so the proxy can be collected."""

    __slots__ = ("accumulator", "call", "capture", "raw")

    def __init__(self, call: LLMCallState, accumulator: StreamAccumulator, raw: Any) -> None:
        self.call = call
        self.accumulator = accumulator
        self.raw = raw
        self.capture = getattr(accumulator, "content", False) is True
        """Whether the answer is still to be captured (once, before the span ends)."""

    def _capture_output(self) -> None:
        if not self.capture:
            return
        self.capture = False
        try:
            value = self.accumulator.output(self.raw)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("rebuilding a streamed answer", exc)
            return
        if value is not None:
            self.call.capture(sc.CONTENT_OUTPUT_MESSAGES, value)

    def _attributes(self) -> dict[str, Any]:
        try:
            return self.accumulator.attributes(self.raw)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("reading a stream's response attributes", exc)
            return {}

    def _completed(self) -> bool:
        try:
            return bool(self.accumulator.completed(self.raw))
        except Exception as exc:  # noqa: BLE001
            log_internal_error("reading a stream's state", exc)
            return False

    def chunk(self, item: Any) -> None:
        if self.call.ended:
            return
        self.call.first_chunk()
        try:
            self.accumulator.on_chunk(item)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("reading a streamed chunk", exc)

    def exhausted(self) -> None:
        if not self.call.ended:
            self._capture_output()
            self.call.finish(self._attributes(), stream_end="exhausted")

    def closed(self) -> None:
        if not self.call.ended:
            self._capture_output()
            self.call.finish(self._attributes(), stream_end="exhausted" if self._completed() else "closed")

    def left_block(self, exc: BaseException | None) -> None:
        """The caller left the stream's ``with`` block. An exception raised by the caller's own code in the block
        is the caller's (recorded on its spans), not the model call's: the stream counts as closed, unless the
        block was cancelled, which cancels the stream too."""
        if exc is not None and type(exc).__name__ in CANCELLATIONS:
            self.failed(exc)
        else:
            self.closed()

    def failed(self, exc: BaseException) -> None:
        if not self.call.ended:
            self._capture_output()
            self.call.fail(exc, self._attributes(), streaming=True)

    def collected(self) -> None:
        """The proxy was garbage-collected (a ``weakref.finalize`` callback: must not raise)."""
        try:
            if self.call.ended:
                return
            response = getattr(self.raw, "response", None)
            if getattr(response, "is_closed", False) is True:
                # A helper closed the HTTP response without going through the proxy.
                self.closed()
            else:
                self._capture_output()
                self.call.abandon(self._attributes())
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending an abandoned stream's span", exc)
        finally:
            self.raw = None


class _StreamProxy(ObjectProxy[Any]):
    """What the sync and async stream proxies share: the state that ends the span once, also when the proxy is
    garbage-collected."""

    def __init__(self, wrapped: Any, call: LLMCallState, accumulator: StreamAccumulator) -> None:
        super().__init__(wrapped)
        state = _StreamState(call, accumulator, wrapped)
        self._self_state = state
        weakref.finalize(self, state.collected)


class SyncStreamProxy(_StreamProxy):
    """A synchronous SDK stream whose LLM span ends exactly once."""

    def __iter__(self) -> SyncStreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            item = next(self.__wrapped__)
        except StopIteration:
            state.exhausted()
            raise
        except BaseException as exc:
            state.failed(exc)
            raise
        state.chunk(item)
        return item

    def __enter__(self) -> SyncStreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_state.left_block(exc)

    def close(self) -> Any:
        try:
            return self.__wrapped__.close()
        finally:
            self._self_state.closed()


class AsyncStreamProxy(_StreamProxy):
    """An asynchronous SDK stream whose LLM span ends exactly once."""

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            item = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            state.exhausted()
            raise
        except BaseException as exc:
            state.failed(exc)
            raise
        state.chunk(item)
        return item

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_state.left_block(exc)

    async def close(self) -> Any:
        try:
            return await self.__wrapped__.close()
        finally:
            self._self_state.closed()


Starter = Callable[[], "tuple[LLMCallState | None, StreamAccumulator]"]
"""Starts (or enriches) the LLM span when a stream helper is entered."""


class _StreamManagerProxy(ObjectProxy[Any]):
    """What the sync and async stream helper proxies share: the starter, and the stream proxy the block uses."""

    def __init__(self, wrapped: Any, start: Starter) -> None:
        super().__init__(wrapped)
        self._self_start = start
        self._self_stream: _StreamProxy | None = None

    def _left_block(self, exc: BaseException | None) -> None:
        proxy, self._self_stream = self._self_stream, None
        if proxy is not None:
            proxy._self_state.left_block(exc)


class SyncStreamManagerProxy(_StreamManagerProxy):
    """A stream helper's context manager (``messages.stream()``): the request is sent on ``__enter__``, so the
    span starts there and the stream it returns is wrapped."""

    def __enter__(self) -> Any:
        call, accumulator = self._self_start()
        if call is None:
            return self.__wrapped__.__enter__()
        try:
            with call.activated():
                stream = self.__wrapped__.__enter__()
        except BaseException as exc:
            call.fail(exc)
            raise
        self._self_stream = proxy = SyncStreamProxy(stream, call, accumulator)
        return proxy

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._left_block(exc)


class AsyncStreamManagerProxy(_StreamManagerProxy):
    """The asynchronous twin of :class:`SyncStreamManagerProxy`."""

    async def __aenter__(self) -> Any:
        call, accumulator = self._self_start()
        if call is None:
            return await self.__wrapped__.__aenter__()
        try:
            with call.activated():
                stream = await self.__wrapped__.__aenter__()
        except BaseException as exc:
            call.fail(exc)
            raise
        self._self_stream = proxy = AsyncStreamProxy(stream, call, accumulator)
        return proxy

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._left_block(exc)
