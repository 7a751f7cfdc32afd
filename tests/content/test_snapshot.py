"""``snapshot()``: a deep copy into the content domain, with credentials, headers, the environment and media cut,
taken without consuming or changing the agent's objects, and never raising."""

from __future__ import annotations

import base64
import collections
import dataclasses
import email.message
import enum
import hashlib
import http.client
import http.cookiejar
import http.cookies
import io
import math
import os
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from unittest import mock

import httpx
import pydantic
import pytest
import requests
import requests.structures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_agentdiag.content import (
    CapturedException,
    CapturedObject,
    ContentLimits,
    Elided,
    decode,
    encode,
    project_json,
    snapshot,
)
from otel_agentdiag.content import values as v

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=False,
)

CREDENTIAL = Elided(v.CREDENTIAL)
HEADERS = Elided(v.HEADERS)
COOKIE = Elided(v.COOKIE)
ENVIRONMENT = Elided(v.ENVIRONMENT)
UNREPRESENTABLE = "<unrepresentable>"


def media(data: bytes) -> Elided:
    return Elided(v.MEDIA, len(data), hashlib.sha256(data).hexdigest())


# -- plain data ----------------------------------------------------------------------------------------------


def test_plain_data_is_copied_as_it_is() -> None:
    value = {
        "none": None,
        "flag": True,
        "n": -(2**10000),
        "x": -0.0,
        "nan": math.nan,
        "text": "héllo \udc80",
        "raw": b"\x00\xff",
        "list": [1, [2]],
        "tuple": (1, (2,)),
        "set": {1, "a"},
        "frozen": frozenset({(1, 2)}),
        (1, "k"): "tuple key",
        3: "int key",
        None: "None key",
    }
    taken = snapshot(value)
    assert repr(taken) == repr(value)
    assert type(taken["flag"]) is bool and taken["x"] == 0.0 and math.copysign(1, taken["x"]) == -1
    assert taken["list"] is not value["list"] and taken["list"][1] is not value["list"][1]
    assert taken["set"] is not value["set"]


def test_the_snapshot_does_not_change_when_the_agent_mutates_its_messages() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi", "parts": [{"text": "a"}]}]
    taken = snapshot(messages)
    messages.append({"role": "assistant", "content": "later"})
    messages[0]["content"] = "changed"
    messages[0]["parts"][0]["text"] = "changed"
    assert taken == [{"role": "user", "content": "hi", "parts": [{"text": "a"}]}]


def test_cycles_and_shared_containers_are_kept() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    shared = {"k": [1]}
    value: dict[str, Any] = {"loop": loop, "a": shared, "b": shared, "t": (shared,)}
    value["self"] = value
    taken = snapshot(value)
    assert taken["loop"][1] is taken["loop"] and taken["loop"] is not loop
    assert taken["a"] is taken["b"] is taken["t"][0]
    assert taken["self"] is taken
    assert decode(encode(taken))["self"]["loop"][1][1][0] == 1


def test_subclasses_of_str_int_and_float_become_the_base_type() -> None:
    class Text(str):
        def __str__(self) -> str:
            return "overridden"

    class Number(int):
        pass

    class Real(float):
        def __float__(self) -> float:
            return 0.0

    class Level(enum.IntEnum):
        HIGH = 3

    class Flags(enum.IntFlag):
        A = 1
        B = 2

    taken = snapshot([Text("abc"), Number(5), Real(1.5), Level.HIGH, Flags.A | Flags.B])
    assert taken == ["abc", 5, 1.5, 3, 3]
    assert [type(item) for item in taken] == [str, int, float, int, int]
    if sys.version_info >= (3, 11):

        class Color(enum.StrEnum):
            RED = "red"

        assert type(snapshot(Color.RED)) is str and snapshot(Color.RED) == "red"


def test_enum_members_become_their_value() -> None:
    class Shape(enum.Enum):
        POINT = (0, 0)
        NAMED = "named"

    assert snapshot([Shape.POINT, Shape.NAMED]) == [(0, 0), "named"]


def test_bytes_like_values_become_bytes_and_big_ones_are_elided_as_media() -> None:
    assert snapshot([bytearray(b"ab"), memoryview(b"cd")]) == [b"ab", b"cd"]
    big = os.urandom(16 * 1024 + 1)
    assert snapshot(big) == media(big)
    assert snapshot(bytearray(big)) == media(big)
    assert snapshot(big[:-1]) == big[:-1]
    assert snapshot(b"12345", ContentLimits(media_bytes=4)) == media(b"12345")


def test_mappings_sequences_and_sets_of_any_kind_become_plain_containers() -> None:
    class Frozen(Mapping[str, int]):
        def __getitem__(self, key: str) -> int:
            return {"a": 1}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["a"])

        def __len__(self) -> int:
            return 1

    taken = snapshot(
        [
            collections.OrderedDict(a=1),
            collections.defaultdict(list, b=[2]),
            collections.Counter("aa"),
            types.MappingProxyType({"c": 3}),
            Frozen(),
            collections.deque([1, 2]),
            collections.UserList([3]),
            collections.UserString("user string"),
            {"k": 1}.keys(),
            frozenset({1}) | frozenset({2}),
        ]
    )
    assert taken == [{"a": 1}, {"b": [2]}, {"a": 2}, {"c": 3}, {"a": 1}, [1, 2], [3], "user string", {"k"}, {1, 2}]
    assert [type(item) for item in taken] == [dict] * 5 + [list, list, str, set, frozenset]


def test_iterators_and_generators_are_never_consumed() -> None:
    def numbers() -> Iterator[int]:
        yield 1
        yield 2

    generator = numbers()
    iterator = iter([1, 2])
    stream = io.StringIO("line")
    taken = snapshot({"g": generator, "i": iterator, "s": stream, "r": range(10**18)})
    assert list(generator) == [1, 2] and list(iterator) == [1, 2] and stream.read() == "line"
    assert isinstance(taken["g"], CapturedObject) and taken["g"].type == "generator"
    assert taken["i"].type == "list_iterator"
    assert taken["r"] == CapturedObject("range", "range(0, 1000000000000000000)")


def test_dict_keys_are_snapshotted_and_an_unhashable_result_falls_back_to_the_key_repr() -> None:
    @dataclasses.dataclass(frozen=True)
    class Key:
        name: str

    class Text(str):
        pass

    opaque_key = CapturedObject(f"{__name__}.{Key.__qualname__}", repr(Key("k")))
    taken = snapshot({Key("k"): 1, Text("t"): 2, ("https://u:p@h/x?q",): 3})
    assert taken == {opaque_key: 1, "t": 2, ("https://[redacted]@h/x?[redacted]",): 3}
    assert [type(key) for key in taken] == [CapturedObject, str, tuple]
    assert snapshot({Key("k")}) == {opaque_key}


# -- objects -------------------------------------------------------------------------------------------------


class Message(pydantic.BaseModel):
    role: str
    content: str
    api_key: str = "sk-modelsecret-0123456789"
    signature: pydantic.SecretStr = pydantic.SecretStr("hunter2")


class Broken(pydantic.BaseModel):
    text: str = "x"

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        raise RuntimeError("property failed")


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)
    parent: Node | None = None
    password: str = "hunter2"


def test_pydantic_models_become_their_dump_with_the_usual_exclusions() -> None:
    taken = snapshot([Message(role="user", content="hi")])
    assert taken == [
        {
            "role": "user",
            "content": "hi",
            "api_key": CREDENTIAL,
            "signature": CapturedObject("pydantic.types.SecretStr", "SecretStr('**********')"),
        }
    ]


def test_a_model_whose_dump_raises_is_an_opaque_object() -> None:
    taken = snapshot({"model": Broken()})
    assert taken == {"model": CapturedObject(f"{__name__}.Broken", UNREPRESENTABLE)}


def test_dataclasses_become_dicts_field_by_field_cycles_included() -> None:
    root = Node("root")
    child = Node("child", parent=root)
    root.children.append(child)
    taken = snapshot(root)
    assert taken["name"] == "root" and taken["password"] == CREDENTIAL
    assert taken["children"][0]["parent"] is taken
    assert snapshot(Node) == CapturedObject("type", repr(Node))  # the class itself is not an instance


def test_a_credential_field_is_never_read() -> None:
    @dataclasses.dataclass
    class Config:
        url: str = "https://example.com"
        api_token: str = ""

        def __getattribute__(self, name: str) -> Any:
            if name == "api_token":
                raise AssertionError("the credential field was read")
            return object.__getattribute__(self, name)

    assert snapshot(Config()) == {"url": "https://example.com", "api_token": CREDENTIAL}


def test_exceptions_become_captured_exceptions() -> None:
    class QuotaError(Exception):
        pass

    error = ValueError("bad value", 3, [1, {"password": "x"}])
    taken = snapshot(error)
    # What the agent would print, but the password's value: the message cuts it as the args elide it.
    assert taken.type == "ValueError" and taken.message == str(error).replace("'x'", "'[redacted]'")
    assert taken.args == ("bad value", 3, [1, {"password": CREDENTIAL}])
    failure = QuotaError("over quota at https://api.example.com/v1?key=abc")
    assert snapshot(failure) == CapturedException(
        f"{__name__}.{QuotaError.__qualname__}",
        "over quota at https://api.example.com/v1?[redacted]",
        ("over quota at https://api.example.com/v1?[redacted]",),
    )

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert snapshot(Unprintable("a")) == CapturedException(
        f"{__name__}.{Unprintable.__qualname__}", UNREPRESENTABLE, ("a",)
    )


def test_other_objects_become_their_type_and_repr() -> None:
    class Plain:
        def __repr__(self) -> str:
            return "Plain(token=sk-reprsecret-0123456789)"

    class NoRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    class Long:
        def __repr__(self) -> str:
            return "x" * 5000

    assert snapshot(Plain()) == CapturedObject(f"{__name__}.{Plain.__qualname__}", "Plain(token=[redacted])")
    assert snapshot(NoRepr()) == CapturedObject(f"{__name__}.{NoRepr.__qualname__}", UNREPRESENTABLE)
    long = snapshot(Long())
    assert len(long.repr) == 1000 and long.repr.endswith("…")
    assert snapshot(object()).type == "object"
    assert snapshot(len) == CapturedObject("builtin_function_or_method", "<built-in function len>")


def test_mocks_and_other_attribute_factories_are_not_asked_for_model_dump() -> None:
    fake = mock.MagicMock()
    taken = snapshot(fake)
    assert isinstance(taken, CapturedObject)
    assert not fake.model_dump.called


# -- exclusions ----------------------------------------------------------------------------------------------


def test_the_environment_and_header_and_cookie_objects_are_elided() -> None:
    message = email.message.EmailMessage()
    message["Authorization"] = "Bearer x"

    class MyHeaders(httpx.Headers):
        pass

    jar = http.cookiejar.CookieJar()
    taken = snapshot(
        [
            os.environ,
            httpx.Headers({"authorization": "x"}),
            MyHeaders({"authorization": "x"}),
            httpx.Cookies({"session": "x"}),
            requests.structures.CaseInsensitiveDict({"authorization": "x"}),
            requests.cookies.RequestsCookieJar(),
            http.client.HTTPMessage(),
            message,
            http.cookies.SimpleCookie("session=x"),
            jar,
        ]
    )
    assert taken == [ENVIRONMENT, HEADERS, HEADERS, COOKIE, HEADERS, COOKIE, HEADERS, HEADERS, COOKIE, COOKIE]


def test_sensitive_mapping_keys_keep_the_key_and_lose_the_value() -> None:
    taken = snapshot(
        {
            "Authorization": "Bearer abc",
            "X-Api-Key": "k",
            "openai_api_key": "k",
            "OPENAI_API_KEY": "k",
            "accessToken": "t",
            "client-secret": "s",
            "password": 1,
            "aws_secret_access_key": "s",
            "Cookie": "a=b",
            "Set-Cookie": "a=b",
            "headers": {"a": "b"},
            "env": {"HOME": "/root"},
            "environ": [],
            "max_tokens": 100,
            "input_tokens": 5,
            "completion_tokens": 6,
            "maxTokens": 7,
            "token_count": 8,
            "role": "user",
        }
    )
    assert taken == {
        "Authorization": CREDENTIAL,
        "X-Api-Key": CREDENTIAL,
        "openai_api_key": CREDENTIAL,
        "OPENAI_API_KEY": CREDENTIAL,
        "accessToken": CREDENTIAL,
        "client-secret": CREDENTIAL,
        "password": CREDENTIAL,
        "aws_secret_access_key": CREDENTIAL,
        "Cookie": COOKIE,
        "Set-Cookie": COOKIE,
        "headers": HEADERS,
        "env": ENVIRONMENT,
        "environ": ENVIRONMENT,
        "max_tokens": 100,
        "input_tokens": 5,
        "completion_tokens": 6,
        "maxTokens": 7,
        "token_count": 8,
        "role": "user",
    }


def test_urls_lose_user_info_query_and_fragment() -> None:
    text = (
        "see https://bob:pw@example.com:8443/a/b?x=1#frag, then HTTP://Example.com/plain and "
        "postgres://admin:secret@db:5432/app. Not a URL: mailto:bob@example.com"
    )
    assert snapshot(text) == (  # the comma is taken for part of the fragment
        "see https://[redacted]@example.com:8443/a/b?[redacted]#[redacted] then HTTP://Example.com/plain and "
        "postgres://[redacted]@db:5432/app. Not a URL: mailto:bob@example.com"
    )
    assert snapshot("https://example.com/a/b") == "https://example.com/a/b"
    assert snapshot("go to http://[::1/x?q=1 now") == "go to [redacted] now"  # malformed: all of it


CREDENTIALS = [
    "sk-proj-abcdefghijklmnop",
    "sk-ant-api03-abcdefghijklmnop",
    "rk-abcdefghijklmn1234",
    "sk_live_" + "a1B2" * 6,
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1" * 18,
    "github_pat_" + "A1_" * 10,
    "xoxb-1234-abcd",
    "AIza" + "Sy" * 17,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sgn-abc_DEF",
    "Bearer abc.DEF-123_xyz",
    "basic dXNlcjpwYXNz",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
    "-----BEGIN RSA PRIVATE KEY-----\ncut off here",
]


@pytest.mark.parametrize("secret", CREDENTIALS)
def test_credentials_in_text_are_redacted(secret: str) -> None:
    assert snapshot(f"key: {secret} end" if "\n" not in secret else f"key: {secret}") in (
        "key: [redacted] end",
        "key: [redacted]",
    )
    assert snapshot(secret) == "[redacted]"


PROSE = [
    "the token limit is 4096 tokens",
    "sk-short",
    "please ask-for the max_tokens parameter",
    "Basic understanding of Bearer bonds.",
    "mail bob@example.com about /home/bob/notes.txt and C:\\Users\\bob",
    "eyJ alone, AKIA alone, ghp_ alone",
    "pk_user_id and sk_learn_model and task_live_updates",
    "user",
    "",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_stays_unchanged(text: str) -> None:
    assert snapshot(text) == text


def test_media_over_the_limit_is_elided_with_its_size_and_digest() -> None:
    image = base64.b64encode(os.urandom(13 * 1024)).decode()
    url = f"data:image/png;base64,{image}"
    small = "data:image/png;base64,iVBORw0KGgo="
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))
    prose = " ".join(["word"] * 4000)
    numbers = "\n".join(str(i) for i in range(5000))
    taken = snapshot({"image": url, "small": small, "raw": image, "wrapped": wrapped, "prose": prose, "n": numbers})
    assert taken["image"] == media(url.encode())
    assert taken["small"] == small
    assert taken["raw"] == media(image.encode())
    assert taken["wrapped"] == media(wrapped.encode())
    assert taken["prose"] == prose and taken["n"] == numbers
    surrogate = "data:;base64," + "A" * 20_000 + "\udc80"
    assert snapshot(surrogate) == media(surrogate.encode("utf-8", "surrogatepass"))


def test_depth_beyond_the_limit_is_elided() -> None:
    limits = ContentLimits(max_depth=3)
    assert snapshot([[["kept"]]], limits) == [[["kept"]]]
    assert snapshot([[[["cut"]]]], limits) == [[[Elided(v.TOO_DEEP)]]]
    assert snapshot({"a": ({"b": [1]},)}, limits) == {"a": ({"b": Elided(v.TOO_DEEP)},)}
    deep: list[Any] = []
    node = deep
    for _ in range(100):
        node.append([])
        node = node[0]
    taken = snapshot(deep)
    for _ in range(63):
        taken = taken[0]
    assert taken == [Elided(v.TOO_DEEP)]


def test_recursion_beyond_the_stack_never_raises() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(20_000):
        node.append([])
        node = node[0]
    taken = snapshot(deep, ContentLimits(max_depth=1_000_000))
    encode(taken)  # whatever was kept is in the domain


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "8"])
def test_limits_are_positive_ints(bad: Any) -> None:
    with pytest.raises(ValueError, match="positive int"):
        ContentLimits(max_depth=bad)
    with pytest.raises(ValueError, match="positive int"):
        ContentLimits(media_bytes=bad)


# -- never raises --------------------------------------------------------------------------------------------


class Hostile:
    """Everything about it raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(name)


class LyingSequence(Sequence[int]):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: Any) -> int:
        raise RuntimeError("getitem")


class RaisingMapping(Mapping[str, int]):
    def __getitem__(self, key: str) -> int:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield "a"
        raise RuntimeError("iter")

    def __len__(self) -> int:
        return -1


class Model:
    """Pydantic-like, badly."""

    def model_dump(self, mode: str = "python") -> Any:
        return {"back": self, "password": "x"}


class Odd:
    """A class whose ``__module__`` is not a string."""


Odd.__module__ = 42  # type: ignore[assignment]


class OpaqueKey:
    """Hashable, but its repr raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr")


def nasty_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
        st.binary(max_size=40),
        st.builds(Hostile),
        st.builds(LyingSequence),
        st.builds(RaisingMapping),
        st.builds(Model),
        st.builds(Odd),
        st.builds(lambda: (i for i in range(3))),
        st.sampled_from([os.environ, httpx.Headers({"a": "b"}), sys, type, object(), Ellipsis, NotImplemented, 1j]),
        st.builds(ValueError, st.text()),
        st.builds(lambda: mock.Mock()),
    )


nasty = st.recursive(
    nasty_scalars(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.text(), st.integers(), st.builds(OpaqueKey)), inner, max_size=4),
        st.lists(inner, max_size=4).map(collections.deque),
    ),
    max_leaves=15,
)


@SETTINGS
@given(nasty)
def test_snapshot_never_raises_and_always_returns_domain_values(value: Any) -> None:
    taken = snapshot(value)
    data = encode(taken)  # raises TypeError for anything outside the domain
    project_json(taken)
    assert encode(decode(data)) == data


def test_a_hostile_root_is_an_opaque_object() -> None:
    assert snapshot(Hostile()) == CapturedObject(f"{__name__}.Hostile", UNREPRESENTABLE)
    assert snapshot(Odd()).type == "Odd"
    assert snapshot(LyingSequence()) == CapturedObject(f"{__name__}.LyingSequence", UNREPRESENTABLE)
