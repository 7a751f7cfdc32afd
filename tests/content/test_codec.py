"""The lossless content encoding (``encode``/``decode``) and the JSON projection (``project``/``project_json``).

The round-trip property runs over the whole value domain (lone surrogates, every float bit pattern, ints of
20,000 bits, bytes, every container, dicts with any hashable key, the markers) with cycles and shared
containers injected, and compares with :func:`same`: exact types, floats by bit pattern, dict order, and the
same identity structure. Hypothesis runs are derandomised (the same examples every time) and bounded.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_agentdiag.content import (
    ENCODING,
    CapturedException,
    CapturedObject,
    ContentDecodeError,
    Elided,
    codec,
    decode,
    encode,
    project,
    project_json,
)

# Hypothesis warns when it describes these strategies (for its statistics): their repr is long, harmlessly.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=False,
)
MANY = settings(SETTINGS, max_examples=200)
SOME = settings(SETTINGS, max_examples=120)
FEW = settings(SETTINGS, max_examples=80)

# -- the value domain ----------------------------------------------------------------------------------------

ALL_CATEGORIES = ["L", "M", "N", "P", "S", "Z", "C"]  # C includes Cs: lone surrogates
texts = st.one_of(
    st.text(st.characters(categories=ALL_CATEGORIES)),
    # Surrogates the way they occur: one alone, a high-low pair as two code points, escapes.
    st.builds(
        lambda head, middle, tail: head + middle + tail,
        st.text(),
        st.sampled_from(["\udc80", "\ud800", "\ud800\udc00", "\udbff\udfff\ud800", '"\\\x00\x7f']),
        st.text(),
    ),
)
floats = st.one_of(
    st.floats(),
    st.integers(0, 2**64 - 1).map(lambda bits: struct.unpack(">d", bits.to_bytes(8, "big"))[0]),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, 1e16, 1.7976931348623157e308]),
)
big_ints = st.builds(
    lambda bits, offset, negative: (2**bits + offset) * (-1 if negative else 1),
    st.one_of(st.integers(0, 20_000), st.sampled_from([53, 4095, 4096, 4097])),
    st.integers(-2, 2),
    st.booleans(),
)  # built, not sampled: hypothesis would otherwise repr 20,000-bit literals in its messages
ints = st.one_of(st.integers(), big_ints)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts, st.binary())
sizes = st.one_of(st.none(), st.integers(0, 2**63))
digests = st.one_of(st.none(), texts)
leaf_markers = st.one_of(st.builds(CapturedObject, texts, texts), st.builds(Elided, texts, sizes, digests))


hashables = st.deferred(
    lambda: st.recursive(
        st.one_of(scalars, leaf_markers),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(tuple),
            st.frozensets(inner, max_size=4),
            st.builds(CapturedException, texts, texts, st.lists(inner, max_size=3).map(tuple)),
        ),
        max_leaves=12,
    )
)
"""Hashable domain values: what a dict key, set or frozenset item can be."""

values = st.deferred(
    lambda: st.recursive(
        st.one_of(scalars, leaf_markers),
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.lists(inner, max_size=5).map(tuple),
            st.dictionaries(hashables, inner, max_size=5),
            st.sets(hashables, max_size=5),
            st.frozensets(hashables, max_size=5),
            st.builds(CapturedException, texts, texts, st.lists(inner, max_size=3).map(tuple)),
        ),
        max_leaves=30,
    )
)
"""Every kind of domain value."""


def mutable_containers(value: Any) -> list[Any]:
    """Every list, dict and set reachable from ``value``, each once."""
    found: dict[int, Any] = {}
    todo = [value]
    while todo:
        node = todo.pop()
        cls = type(node)
        if cls in (list, dict, set):
            if id(node) in found:
                continue
            found[id(node)] = node
        if cls in (list, tuple, set, frozenset):
            todo.extend(node)
        elif cls is dict:
            todo.extend(node.keys())
            todo.extend(node.values())
        elif cls is CapturedException:
            todo.append(node.args)
    return list(found.values())


@st.composite
def with_references(draw: st.DrawFn) -> Any:
    """A domain value in which lists and dicts also hold containers found elsewhere in it (or themselves)."""
    value = draw(st.lists(values, min_size=1, max_size=3))  # the root: a list, so there is one to mutate
    for _ in range(draw(st.integers(0, 4))):
        containers = mutable_containers(value)
        targets = [c for c in containers if type(c) in (list, dict)]
        target = draw(st.sampled_from(targets))
        shared = draw(st.sampled_from(containers))  # the target itself, an ancestor (a cycle) or another one
        if type(target) is list:
            target.insert(draw(st.integers(0, len(target))), shared)
        else:
            target[draw(hashables)] = shared
    return value


def same(a: Any, b: Any, pairs: dict[int, int] | None = None, back: dict[int, int] | None = None) -> bool:
    """Whether ``b`` is an exact copy of ``a``: exact types, floats by bit pattern, dicts in order, and mutable
    containers paired one to one (so cycles and sharing are the same in both)."""
    pairs = {} if pairs is None else pairs
    back = {} if back is None else back
    cls = type(a)
    if cls is not type(b):
        return False
    if cls is float:
        return struct.pack(">d", a) == struct.pack(">d", b)
    if cls in (list, dict, set):
        if id(a) in pairs or id(b) in back:
            return pairs.get(id(a)) == id(b) and back.get(id(b)) == id(a)
        pairs[id(a)], back[id(b)] = id(b), id(a)
    if cls in (list, tuple):
        return len(a) == len(b) and all(same(x, y, pairs, back) for x, y in zip(a, b, strict=True))
    if cls is dict:
        return len(a) == len(b) and all(
            same(ka, kb, pairs, back) and same(va, vb, pairs, back)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if cls in (set, frozenset):  # items are immutable: match them up one by one
        left = list(b)
        for item in a:
            match = next((i for i, other in enumerate(left) if same(item, other, {}, {})), None)
            if match is None:
                return False
            left.pop(match)
        return not left
    if cls is CapturedException:
        return a.type == b.type and a.message == b.message and same(a.args, b.args, pairs, back)
    if cls in (CapturedObject, Elided):
        return all(same(getattr(a, field.name), getattr(b, field.name)) for field in dataclasses.fields(a))
    return bool(a == b)


def strict_json(text: str) -> Any:
    def no_constants(name: str) -> Any:
        raise AssertionError(f"{name} in strict JSON")

    return json.loads(text, parse_constant=no_constants)


# -- round trip ----------------------------------------------------------------------------------------------


@MANY
@given(values)
def test_every_domain_value_round_trips_exactly(value: Any) -> None:
    data = encode(value)
    assert isinstance(data, bytes) and data.isascii()
    back = decode(data)
    assert same(value, back)
    assert encode(back) == data
    assert same(value, decode(data.decode("ascii")))  # text is accepted too
    # Byte for byte what json.dumps writes for the tagged tree.
    assert json.dumps(json.loads(data), ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode() == data


@SOME
@given(with_references())
def test_cycles_and_shared_containers_round_trip_by_identity(value: Any) -> None:
    data = encode(value)
    back = decode(data)
    assert same(value, back)
    assert encode(back) == data


def test_a_list_that_contains_itself_decodes_to_one_that_does() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    shared = {"k": [2]}
    value = {"loop": loop, "a": shared, "b": shared, "s": {1}, "t": (loop,)}
    value["self"] = value
    back = decode(encode(value))
    assert back["loop"][1] is back["loop"]
    assert back["a"] is back["b"] and back["a"]["k"] == [2]
    assert back["self"] is back
    assert back["t"][0] is back["loop"]
    assert same(value, back)


def test_awkward_scalars_keep_their_exact_form() -> None:
    payload_nan = struct.unpack(">d", bytes.fromhex("fff8000000000abc"))[0]
    value = [-0.0, payload_nan, -math.inf, 2**4096, 2**4097 + 5, -(2**20000), "\udc80x\ud800", b"\x00\xff", True, 1]
    back = decode(encode(value))
    assert same(value, back)
    assert struct.pack(">d", back[1]).hex() == "fff8000000000abc"
    assert str(back[0]) == "-0.0"
    assert type(back[8]) is bool and type(back[9]) is int


def test_the_documented_node_forms() -> None:
    assert encode(None) == b'{"v":1,"root":null}'
    assert encode([1, (2,), {3}, frozenset(), {"k": b"\x01"}]) == (
        b'{"v":1,"root":["l",1,["t",2],["s",3],["z"],["d","k",["b","AQ=="]]]}'
    )
    assert encode(2**4096 - 1) == b'{"v":1,"root":' + str(2**4096 - 1).encode() + b"}"
    assert encode(-(2**4096) - 1) == b'{"v":1,"root":["i","-0x1' + b"0" * 1023 + b'1"]}'
    assert encode(math.inf) == b'{"v":1,"root":["f","7ff0000000000000"]}'
    assert encode(CapturedException("ValueError", "m", ("m",))) == b'{"v":1,"root":["E","ValueError","m",["t","m"]]}'
    assert encode(CapturedObject("x.Y", "<Y>")) == b'{"v":1,"root":["O","x.Y","<Y>"]}'
    assert encode(Elided("media", 3, "ab")) == b'{"v":1,"root":["X","media",3,"ab"]}'
    assert encode(Elided("credential")) == b'{"v":1,"root":["X","credential",null,null]}'
    shared: list[Any] = []
    assert encode([shared, shared]) == b'{"v":1,"root":["l",["l"],["r",1]]}'
    assert ENCODING == "agentdiag-content/1"


def test_set_items_are_written_in_one_order_whatever_the_set_history() -> None:
    grown = set(range(100))
    for i in range(2, 100):
        grown.discard(i)
    grown.update({8, 16})  # collide with 0 in a small table, not in this large one
    fresh = {16, 8, 1, 0}
    assert grown == fresh
    assert encode(grown) == encode(fresh) == encode(decode(encode(grown)))


def test_only_exact_domain_types_encode() -> None:
    class Text(str):
        pass

    for bad in (Text("x"), [1, {"k": object()}], {1: range(3)}, bytearray(b"x"), CapturedObject("t", 1)):  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            encode(bad)


def test_nesting_is_limited_both_ways() -> None:
    deep: list[Any] = [2**5000]
    node = deep
    for _ in range(codec.MAX_DEPTH - 1):
        child = [2**5000]  # a leaf node ("i") in every container, the innermost too
        node.append(child)
        node = child
    data = encode(deep)
    back = decode(data)  # deeper than json.loads can go: the iterative parser takes over
    assert encode(back) == data
    for _ in range(codec.MAX_DEPTH - 1):
        assert type(back) is list and back[0] == 2**5000
        back = back[1]
    assert back == [2**5000]
    node.append([])
    with pytest.raises(ValueError, match="deeper than 1000"):
        encode(deep)
    too_deep = b'{"v":1,"root":' + b'["l",' * (codec.MAX_DEPTH + 1) + b"1" + b"]" * (codec.MAX_DEPTH + 1) + b"}"
    with pytest.raises(ContentDecodeError, match="deeper than 1000"):
        decode(too_deep)


def test_hostile_nesting_is_refused_without_recursion() -> None:
    for data in (b"[" * 100_000, b'{"v":1,"root":' + b'["l",' * 100_000, b'{"a":' * 100_000):
        with pytest.raises(ContentDecodeError):
            decode(data)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200_000)  # json.loads now nests as deep as it is told; the node walk must still stop
    try:
        with pytest.raises(ContentDecodeError, match="deeper than 1000"):
            decode(b'{"v":1,"root":' + b'["t",' * 5000 + b"1" + b"]" * 5000 + b"}")
    finally:
        sys.setrecursionlimit(limit)


# -- decode: anything else is a ContentDecodeError, which never quotes the input ------------------------------

SECRET = "Zq9SECRETx"

MALFORMED = [
    b"",
    b"\xff\xfe",
    f"not json {SECRET}".encode(),
    b'{"v":2,"root":1}',
    b'{"v":true,"root":1}',
    b'{"v":1}',
    b'{"v":1,"root":1,"extra":2}',
    b'["v",1]',
    b'{"v":1,"root":NaN}',
    b'{"v":1,"root":1e400}',
    b'{"v":1,"root":[]}',
    b'{"v":1,"root":[1]}',
    b'{"v":1,"root":{"a":1}}',
    f'{{"v":1,"root":["q","{SECRET}"]}}'.encode(),
    b'{"v":1,"root":["d","k"]}',
    b'{"v":1,"root":["d",["l"],1]}',
    b'{"v":1,"root":["s",["l"]]}',
    b'{"v":1,"root":["l",["s",["r",0]]]}',
    b'{"v":1,"root":["z",["s"]]}',
    b'{"v":1,"root":["r",0]}',
    b'{"v":1,"root":["l",["r",1]]}',
    b'{"v":1,"root":["l",["r",true]]}',
    b'{"v":1,"root":["i","12"]}',
    b'{"v":1,"root":["i","0x1_0"]}',
    b'{"v":1,"root":["f","7ff000000000000"]}',
    b'{"v":1,"root":["f","7FF0000000000000"]}',
    f'{{"v":1,"root":["b","{SECRET}!"]}}'.encode(),
    b'{"v":1,"root":["b","AQ="]}',
    b'{"v":1,"root":["O","t"]}',
    b'{"v":1,"root":["X","r",1.5,null]}',
    b'{"v":1,"root":["X","r",true,null]}',
    b'{"v":1,"root":["E","T","m",["l"]]}',
    b'{"v":1,"root":["E","T","m"]}',
    b'{"v":1,"root":["E","T",1,["t"]]}',
    b'{"v":1,"root":["l",1]',
]


@pytest.mark.parametrize("data", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_input_raises_content_decode_error_only(data: bytes) -> None:
    with pytest.raises(ContentDecodeError) as raised:
        decode(data)
    message = str(raised.value)
    assert "\n" not in message and SECRET not in message and len(message) < 120


def test_decode_refuses_what_is_not_bytes_or_text() -> None:
    with pytest.raises(ContentDecodeError):
        decode(123)  # type: ignore[arg-type]


def check_decode(data: bytes | str) -> None:
    try:
        decode(data)
    except ContentDecodeError:
        pass


@SETTINGS
@given(st.one_of(st.binary(), texts))
def test_random_input_decodes_or_raises_content_decode_error(data: bytes | str) -> None:
    check_decode(data)


@st.composite
def mutated_encodings(draw: st.DrawFn) -> bytes:
    data = bytearray(encode(draw(with_references())))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if action == "truncate":
            del data[position:]
        elif action == "delete":
            del data[position : position + draw(st.integers(1, 8))]
        elif action == "insert":
            data[position:position] = draw(st.sampled_from([b"[", b"]", b",", b'"', b'["r",0]', b'["s"', b"1", b"\\"]))
        elif position < len(data):
            data[position] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@FEW
@given(mutated_encodings())
def test_mutated_encodings_decode_or_raise_content_decode_error(data: bytes) -> None:
    check_decode(data)


node_trees = st.recursive(
    st.one_of(st.sampled_from("ltszdEibfOXr"), st.integers(-2, 4), st.none(), st.booleans(), st.just("0x1f")),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=25,
)


@MANY
@given(node_trees)
def test_arbitrary_node_trees_decode_or_raise_content_decode_error(root: Any) -> None:
    check_decode(json.dumps({"v": 1, "root": root}))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=25,
)


@FEW
@given(json_values, st.sampled_from([None, 0, 2]))
def test_the_iterative_json_parser_reads_what_json_loads_reads(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    assert codec._parse_deep(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "[1,]", "[1 2]", '{"a" 1}', '{"a":1,}', "[1]x", "tru", "01", '"\x01"', "NaN"])
def test_the_iterative_json_parser_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text, parse_constant=codec._reject_constant)
    with pytest.raises(ContentDecodeError):
        codec._parse_deep(text)


# -- projection ----------------------------------------------------------------------------------------------


@SOME
@given(st.one_of(values, with_references()))
def test_the_projection_is_always_strict_utf8_json(value: Any) -> None:
    text = project_json(value)
    text.encode("utf-8")  # no lone surrogate
    assert strict_json(text) == project(value)


plain_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=25,
)


@SOME
@given(plain_json)
def test_json_data_projects_to_itself(value: Any) -> None:
    assert same(project(value), value)
    assert same(strict_json(project_json(value)), value)


@SOME
@given(st.one_of(values, with_references(), plain_json))
def test_encoding_with_the_projection_is_both(value: Any) -> None:
    """The exporter's one call gives exactly what ``encode`` and ``project_json`` give."""
    assert codec.encode_with_projection(value) == (encode(value), codec._json_text(project(value)))


def test_projection_rules() -> None:
    big = 10**5000
    assert project(2**53) == 2**53 and project(-(2**53)) == -(2**53)
    assert project(2**53 + 1) == {"$int": str(2**53 + 1)}
    assert project(-(10**30)) == {"$int": "-1" + "0" * 30}
    assert project(big) == {"$int": hex(big)}
    assert project([math.nan, math.inf, -math.inf, 1.5]) == [
        {"$float": "nan"},
        {"$float": "inf"},
        {"$float": "-inf"},
        1.5,
    ]
    assert project(b"\x00\xff") == {"$bytes": "AP8="}
    assert project((1, [2, (3,)])) == [1, [2, [3]]]
    assert project({"b", "a", 1, (2,)}) == {"$set": ["a", "b", 1, [2]]}  # by JSON text: '"a"' < '1' < '[2]'
    assert project(frozenset({2, 1})) == {"$set": [1, 2]}
    assert project({"k": 1, 2: "v", None: (1,)}) == {"$map": [["k", 1], [2, "v"], [None, [1]]]}
    assert project("a\udc80b\ud83d\ude00") == "a\ufffdb\U0001f600"
    assert project(dict([("\udc80", 1), ("\ufffd", 2)])) == {"$map": [["\ufffd", 1], ["\ufffd", 2]]}
    assert project({"\udc80": 1}) == {"\ufffd": 1}
    assert project(CapturedException("ValueError", "bad \udc80", ("x",))) == {
        "$exception": {"type": "ValueError", "message": "bad \ufffd"}
    }
    assert project(CapturedObject("m.T", "<T>")) == {"$object": {"type": "m.T", "repr": "<T>"}}
    assert project(Elided("credential")) == {"$elided": {"reason": "credential"}}
    assert project(Elided("media", 10, "ab")) == {"$elided": {"reason": "media", "size": 10, "sha256": "ab"}}


def test_projection_marks_cycles_and_shared_containers() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    shared = {"k": 1}
    assert project(loop) == [1, {"$cycle": True}]
    assert project([shared, shared, (shared,)]) == [{"k": 1}, {"$shared": True}, [{"$shared": True}]]
    # A DAG that would be 2**60 leaves written out in full stays small.
    layer: list[Any] = [0]
    for _ in range(60):
        layer = [layer, layer]
    assert len(project_json(layer)) < 2000


def test_projection_depth_is_bounded() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(codec.MAX_DEPTH - 1):
        node.append([])
        node = node[0]
    text = project_json(deep)
    assert text.count("[") == codec.PROJECTION_MAX_DEPTH
    assert '{"$elided":{"reason":"too_deep"}}' in text


def test_project_refuses_values_outside_the_domain() -> None:
    with pytest.raises(TypeError):
        project([object()])
