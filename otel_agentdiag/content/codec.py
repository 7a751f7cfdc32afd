"""The two stored forms of captured content: a lossless encoding (authoritative) and a JSON projection (to read).

**Lossless** (:data:`ENCODING`, ``agentdiag-content/1``): :func:`encode` turns a value of the content domain
into ASCII JSON text (``{"v":1,"root":<node>}``, byte for byte what ``json.dumps(..., ensure_ascii=True,
allow_nan=False, separators=(",", ":"))`` writes for that tree) and :func:`decode` turns it back into an equal
value: same types, float bit patterns, dict order, and the same sharing and cycles of mutable containers.
The domain is ``None``, ``bool``, ``int``, ``float``, ``str`` (lone surrogates included), ``bytes``, ``list``,
``tuple``, ``dict``, ``set``, ``frozenset`` and the markers of :mod:`otel_agentdiag.content.values`, checked by
exact type. Nodes::

    null, true, false, "string"             themselves
    ["S", "part", "part", ...]              a str with a high surrogate code point directly followed by a low
                                            one, split between the two (JSON would read them back as one)
    123                                     an int of at most 4,096 bits; larger: ["i", "<hex(n)>"]
    1.5                                     a finite float (repr); NaN/inf: ["f", "<16 hex digits, IEEE 754>"]
    ["l", ...] ["t", ...]                   list, tuple
    ["s", ...] ["z", ...]                   set, frozenset (items in the order of their encoded text)
    ["d", k1, v1, k2, v2, ...]              dict, in insertion order; keys are nodes
    ["b", "<base64>"]                       bytes
    ["E", type, message, ["t", ...]]        CapturedException
    ["O", type, repr]                       CapturedObject
    ["X", reason, size|null, sha256|null]   Elided
    ["r", n]                                the n-th list, dict or set opened so far (shared, or a cycle)

Decoding is data only: it imports nothing and runs nothing, and any input that is not such a document raises
:class:`ContentDecodeError`, whose message never contains the input. Encoding and decoding are iterative
and refuse nesting deeper than :data:`MAX_DEPTH` containers.

**Projection** (:func:`project`, :func:`project_json`): plain JSON for people and SQL (``json_extract``). JSON
data projects to itself; everything else becomes a ``{"$...": ...}`` object (see :func:`project`). It is lossy
and never read back.
"""

from __future__ import annotations

from typing import Any

from otel_agentdiag.content.decoder import _parse_deep as _parse_deep
from otel_agentdiag.content.decoder import _reject_constant as _reject_constant
from otel_agentdiag.content.decoder import decode
from otel_agentdiag.content.document import ENCODING, MAX_DEPTH, ContentDecodeError
from otel_agentdiag.content.encoder import encode
from otel_agentdiag.content.projection import PROJECTION_MAX_DEPTH, project, project_json
from otel_agentdiag.content.projection import json_text as _json_text

__all__ = [
    "ENCODING",
    "MAX_DEPTH",
    "PROJECTION_MAX_DEPTH",
    "ContentDecodeError",
    "decode",
    "encode",
    "project",
    "project_json",
]


def encode_with_projection(value: Any) -> tuple[bytes, str]:
    """``(encode(value), project_json(value))``: the two stored forms of one captured value."""
    return encode(value), _json_text(project(value))
