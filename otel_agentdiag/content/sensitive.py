"""Which mapping keys name a secret (credentials, headers, cookies, the environment) and what replaces their value.

A key is compared after :func:`normal_key`; its value is never kept but replaced by an
:class:`~otel_agentdiag.content.values.Elided` marker naming the reason (the key itself stays).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from otel_agentdiag.content.values import COOKIE, CREDENTIAL, ENVIRONMENT, HEADERS, Elided

__all__ = ["ELIDED_BY_REASON", "SENSITIVE_KEYS", "SENSITIVE_KEY_SUFFIXES", "key_elision", "normal_key"]

SENSITIVE_KEYS: Mapping[str, str] = {
    **dict.fromkeys(("headers", "http_headers", "request_headers", "response_headers"), HEADERS),
    **dict.fromkeys(("cookie", "cookies", "set_cookie", "cookie_jar"), COOKIE),
    **dict.fromkeys(("env", "environ", "environment_variables", "env_vars"), ENVIRONMENT),
    **dict.fromkeys(
        (
            "authorization",
            "proxy_authorization",
            "auth",
            "api_key",
            "apikey",
            "x_api_key",
            "api_token",
            "access_token",
            "access_key",
            "refresh_token",
            "id_token",
            "auth_token",
            "session_token",
            "csrf_token",
            "csrftoken",
            "xsrf_token",
            "token",
            "bearer",
            "secret",
            "client_secret",
            "secret_key",
            "secret_access_key",
            "password",
            "passwd",
            "pwd",
            "passphrase",
            "pin",
            "private_key",
            "signing_key",
            "encryption_key",
            "credentials",
            "credential",
            "connection_string",
            "conn_str",
            "dsn",
        ),
        CREDENTIAL,
    ),
}
"""Normalised mapping keys (see :func:`normal_key`) whose value is never kept, and the reason recorded instead."""

SENSITIVE_KEY_SUFFIXES = (
    "_api_key",
    "_apikey",
    "_access_key",
    "_auth",
    "_secret",
    "_secret_key",
    "_secret_access_key",
    "_private_key",
    "_password",
    "_passwd",
    "_pwd",
    "_pass",
    "_passphrase",
    "_token",
    "_credentials",
    "_credential",
    "_connection_string",
    "_conn_str",
    "_dsn",
    "_cookie",
)
"""Normalised key endings that also name a credential (``openai_api_key``, ``x_auth_token``, ``db_password``,
``db_pass``, ``sentry_dsn``). ``max_tokens`` and ``input_tokens`` do not match: ``_tokens`` is not ``_token``.
(``pass`` and ``session_id`` alone are not credentials: a test result, a conversation id.)"""

_SQUASHED_KEYS = frozenset(key.replace("_", "") for key, reason in SENSITIVE_KEYS.items() if reason == CREDENTIAL)
"""The credential names without separators (``APIKEY``, ``accesstoken``, ``x-apikey``): also credential keys."""

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def normal_key(key: str) -> str:
    """A mapping key as it is compared: camelCase split (``accessToken`` → ``access_token``, ``XApiKey`` →
    ``x_api_key``), lower-cased, every run of other characters (``-``, ``.``, spaces) one ``_``, no ``_`` at
    either end (``__Password__`` → ``password``)."""
    return _SEPARATORS.sub("_", _CAMEL_BOUNDARY.sub("_", key).lower()).strip("_")


ELIDED_BY_REASON = {reason: Elided(reason) for reason in (CREDENTIAL, HEADERS, COOKIE, ENVIRONMENT)}
"""One shared marker per reason a value is withheld (markers are immutable)."""


def key_elision(key: str) -> Elided | None:
    """The marker replacing the value of entry ``key``, or None when the key names nothing sensitive."""
    normal = normal_key(key)
    reason = SENSITIVE_KEYS.get(normal)
    if reason is None and (normal.endswith(SENSITIVE_KEY_SUFFIXES) or normal.replace("_", "") in _SQUASHED_KEYS):
        reason = CREDENTIAL
    return None if reason is None else ELIDED_BY_REASON[reason]
