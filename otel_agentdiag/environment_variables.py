"""Every ``AGENTDIAG_*`` environment variable, once, with what it does.

Precedence everywhere is: explicit argument > environment variable > default.
For privacy settings, a malformed value selects the most private choice and logs a warning.
"""

AGENTDIAG_ENABLED = "AGENTDIAG_ENABLED"
"""
.. envvar:: AGENTDIAG_ENABLED

``false`` (also ``0``, ``no``, ``off``) turns otel-agentdiag into a no-op: :func:`otel_agentdiag.configure`
installs no processor, sets no provider and creates no file; the manual wrappers still run the user's code
unchanged. ``true`` (``1``, ``yes``, ``on``), empty or unset means enabled; any other value means enabled too,
with a warning that names the variable (never the value), as the other switches warn.
"""

AGENTDIAG_STORE = "AGENTDIAG_STORE"
"""
.. envvar:: AGENTDIAG_STORE

Path of the local SQLite trace store. Default: ``./.agentdiag/traces.db``. The folder is created mode 0700,
the database and its ``-wal``/``-shm`` companions mode 0600.
"""

AGENTDIAG_HASH_KEY = "AGENTDIAG_HASH_KEY"
"""
.. envvar:: AGENTDIAG_HASH_KEY

Secret key for the keyed HMAC-SHA256 pseudonyms of correlation IDs (conversation, user, agent, tool call,
response). Its UTF-8 bytes are the key. It must be 64+ hex digits or the base64 of 32+ random bytes
(``python -c "import secrets; print(secrets.token_hex(32))"``); a shorter or chosen key (a word, a sentence, a
pattern) is refused: ``configure()`` logs an error and turns off every destination that would have used it.
When unset, a 32-byte random key file named ``hash.key`` is created (mode 0600) beside the store and reused;
it is used only while it and its folder are yours and not writable by others.
"""

AGENTDIAG_OTLP_HASH_KEY = "AGENTDIAG_OTLP_HASH_KEY"
"""
.. envvar:: AGENTDIAG_OTLP_HASH_KEY

A separate key for the digests in the OTLP export, so that the exported data and the local store cannot be
joined on their digests (each digest names its key id). When unset, the OTLP export uses the local key.
Share it across a fleet to make one user's digests join in the collector while each machine keeps its own
local key. The same rules as :envvar:`AGENTDIAG_HASH_KEY` apply; a weak one turns the OTLP export off.
"""

AGENTDIAG_LOCAL_POLICY = "AGENTDIAG_LOCAL_POLICY"
"""
.. envvar:: AGENTDIAG_LOCAL_POLICY

Redaction policy of the local SQLite store: a preset name (``local``, the default, or ``strict``) or the
path of a TOML policy file (see ``docs/policy.md``). A value that cannot be used (a missing or invalid
file) is logged as an error and the strict policy is used: never a silent fallback to a weaker policy.
"""

AGENTDIAG_OTLP_POLICY = "AGENTDIAG_OTLP_POLICY"
"""
.. envvar:: AGENTDIAG_OTLP_POLICY

Redaction policy of the OTLP export: a preset name (``strict``, the default, or ``local``) or a TOML
policy file. ``summary = "debug"`` is refused here: listing removed key names is for local use only. An
unusable value is logged as an error and the strict policy is used.
"""

OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
"""The standard OpenTelemetry service name, used when ``configure(service_name=...)`` is not given."""

OTEL_EXPORTER_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""The standard OTLP base endpoint; when set, ``configure()`` adds the OTLP branch (strict policy). For
http/protobuf ``/v1/traces`` is appended; for gRPC it is ``[http[s]://]host:port``."""

OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""The standard OTLP traces endpoint (for http/protobuf the full URL, used as it is); when set, ``configure()``
adds the OTLP branch. It wins over ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

OTEL_EXPORTER_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
"""
.. envvar:: OTEL_EXPORTER_OTLP_PROTOCOL

The standard OTLP transport: ``http/protobuf`` (the default) or ``grpc`` (both in the ``otlp`` extra). Used
when ``configure(otlp_protocol=...)`` and ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` are not given. ``http/json``
(the Python SDK has no such exporter) and any unknown value log a warning and select ``http/protobuf``.
"""

OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
"""
.. envvar:: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL

The standard OTLP transport for traces; wins over ``OTEL_EXPORTER_OTLP_PROTOCOL``, loses to
``configure(otlp_protocol=...)``. Same values and fallback.
"""

OTEL_BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
"""The SDK's batch span processor setting, honoured by ``configure()``'s batch processors: how many ended spans
each destination may queue (default 2,048); a span beyond it is dropped and counted as ``queue_full``. A value
that is not a positive integer is ignored with a warning (as the SDK does)."""

OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
"""The most spans one export carries (default 512). At most ``OTEL_BSP_MAX_QUEUE_SIZE``: a larger value is
lowered to it, with a warning."""

OTEL_BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
"""Milliseconds between two exports of a queue that has not filled a batch (default 500, where the SDK's is
5,000: a local store can take small batches, and a short delay keeps the CLI's view of a live agent fresh)."""

AGENTDIAG_MAX_DROP_SESSIONS = "AGENTDIAG_MAX_DROP_SESSIONS"
"""How many sessions' drop and rejection counts each batch processor keeps apart while the store cannot be
written (default 1,024). Counts of further sessions are folded into one overflow row per observer
(``session_stats`` key ``agentdiag:overflow``): every span stays counted, and the receipt of a session whose
drops may be there is never ``valid``: it gives their reasons and counts them (``unattributed_drops`` in its
JSON). Bounds memory under a stalled store whatever the number of sessions. A value that is not a positive
integer is ignored with a warning."""

AGENTDIAG_CAPTURE_CONTENT = "AGENTDIAG_CAPTURE_CONTENT"
"""Capture prompts, model outputs, tool definitions, tool arguments and tool results into the local store.

.. envvar:: AGENTDIAG_CAPTURE_CONTENT

   ``true`` (any case) turns local content capture on when ``configure()`` has no ``capture_content``
   argument. Every other value means off: ``false``/``0``/``no``/``off``/empty silently, anything else
   (``1`` and ``yes`` included: this switch is deliberately strict) with a warning. Captured content goes to
   the SQLite store only, never to OTLP, a support bundle, ``push`` or ``export``.
"""

AGENTDIAG_METRICS = "AGENTDIAG_METRICS"
"""
.. envvar:: AGENTDIAG_METRICS

``true`` (also ``1``, ``yes``, ``on``) records the GenAI metrics (token usage, operation duration, time to first
chunk, cost) from the spans when ``configure()`` has no ``metrics`` argument (see ``docs/metrics.md``). Default
off. They go over OTLP beside the trace branch, or to the global ``MeterProvider`` when there is no OTLP branch. A
malformed value means off, with a warning.
"""

OTEL_EXPORTER_OTLP_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
"""The standard OTLP metrics endpoint (full URL for http/protobuf), read by the SDK's metric exporter when metrics
are on: it wins over ``OTEL_EXPORTER_OTLP_ENDPOINT`` (which gets ``/v1/metrics`` appended). Without either, metrics
go where the trace branch sends (its endpoint argument, or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` with
``/v1/metrics`` in place of ``/v1/traces``)."""

AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS = "AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS"
"""
``true`` keeps the OpenAI Agents SDK's own trace processors (which send every trace, content included, to
OpenAI's tracing backend) next to ours when ``OpenAIAgentsInstrumentor`` instruments. Default ``false``: ours
replace them. Loses to ``instrument(keep_sdk_processors=...)``. A malformed value means ``false``, with a warning.
"""

AGENTDIAG_PRICES = "AGENTDIAG_PRICES"
"""
.. envvar:: AGENTDIAG_PRICES

Path of a TOML price table (``docs/cost.md``) whose entries override the bundled table's for the same provider and
model (or model pattern) and add the others; ``off`` (also ``false``, ``0``, ``no``, ``none``) turns cost off
(no ``agentdiag.cost.usd``, no cost roll-ups, no cost budget). A file that cannot be used is logged as one error
line naming the file and the line, and the bundled table is used. Unset: the bundled table.
"""

AGENTDIAG_BUDGET_USD = "AGENTDIAG_BUDGET_USD"
"""
.. envvar:: AGENTDIAG_BUDGET_USD

A budget per agent run, in US dollars (a positive number, e.g. ``0.50``): a run whose cost roll-up goes over it is
marked ``agentdiag.budget.exceeded`` (an event, and attributes). Never changes what the agent does. A malformed
value is ignored with a warning. ``configure(budget=...)`` wins over it.
"""

AGENTDIAG_BUDGET_TOKENS = "AGENTDIAG_BUDGET_TOKENS"
"""
.. envvar:: AGENTDIAG_BUDGET_TOKENS

A budget per agent run, in tokens (input plus output, a positive integer): a run whose token roll-ups go over it is
marked ``agentdiag.budget.exceeded``. Never changes what the agent does. A malformed value is ignored with a
warning. ``configure(budget=...)`` wins over it.
"""

AGENTDIAG_DEBUG = "AGENTDIAG_DEBUG"
"""
.. envvar:: AGENTDIAG_DEBUG

``true`` (also ``1``, ``yes``, ``on``): when otel-agentdiag contains one of its own failures (logged as a warning
naming the step and the exception type), it also logs where the exception was raised, at ``DEBUG`` on the
``otel_agentdiag`` logger: the traceback's frames as file, line and function names, and the types of the
exceptions it was chained to. Never the exception's message, a source line or a local variable (they may hold
the data otel-agentdiag protects). It also lets through the SDK OTLP exporter's own line per failed export attempt,
which our batch worker otherwise drops (it counts every attempt and says what was lost in one line). Default off;
a malformed value means off, with a warning.
"""

DEFAULT_STORE = ".agentdiag/traces.db"
"""Default store path, relative to the current working directory."""

_FALSE_VALUES = frozenset({"false", "0", "no", "off"})
_TRUE_VALUES = frozenset({"true", "1", "yes", "on"})


def is_disabled(value: str | None) -> bool:
    """Whether an ``AGENTDIAG_ENABLED`` value switches otel-agentdiag off."""
    return value is not None and value.strip().lower() in _FALSE_VALUES


def is_malformed_switch(value: str | None) -> bool:
    """Whether a boolean switch's value is neither true nor false (nor empty): worth a warning."""
    if value is None or not value.strip():
        return False
    word = value.strip().lower()
    return word not in _TRUE_VALUES and word not in _FALSE_VALUES


def parse_bool(name: str, value: str | None, *, default: bool) -> bool:
    """A boolean environment variable: ``true/1/yes/on`` or ``false/0/no/off`` (any case), ``default`` when
    unset or empty. A malformed value gives the *more private* choice, ``False``, and logs a warning."""
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word in _TRUE_VALUES:
        return True
    if word not in _FALSE_VALUES:
        import logging

        logging.getLogger("otel_agentdiag").warning("otel-agentdiag: %s is not true or false; using false", name)
    return False


def parse_positive_int(name: str, value: str | None, *, default: int) -> int:
    """A positive integer environment variable; ``default`` when unset or empty. Anything else (not an integer,
    zero, negative) gives ``default`` and logs a warning that names the variable, never the value."""
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number > 0:
        return number
    import logging

    logging.getLogger("otel_agentdiag").warning("otel-agentdiag: %s is not a positive integer; using %d", name, default)
    return default


def parse_capture_content(value: str | None) -> bool:
    """``AGENTDIAG_CAPTURE_CONTENT``: only ``true`` (any case, surrounding blanks ignored) is on. A value that
    is neither ``true`` nor an ordinary "off" word is off too, with a warning naming the variable only."""
    if value is None:
        return False
    word = value.strip().lower()
    if word == "true":
        return True
    if word and word not in _FALSE_VALUES:
        import logging

        logging.getLogger("otel_agentdiag").warning(
            "otel-agentdiag: %s is not 'true'; content capture stays off", AGENTDIAG_CAPTURE_CONTENT
        )
    return False


AGENTDIAG_SERVE_TOKEN = "AGENTDIAG_SERVE_TOKEN"
"""
.. envvar:: AGENTDIAG_SERVE_TOKEN

The token every request to ``agentdiag serve`` must carry, loopback included, when ``--token-file`` is not
given: ``Authorization: Bearer <token>``, or the cookie a browser is given for the URL ``serve`` prints (which
carries the token). At least 16 characters (``python -c "import secrets; print(secrets.token_urlsafe(32))"``).
Unset, a loopback server makes a random token each start; a server bound to an address that is not loopback
(``--allow-remote``) requires this or ``--token-file``. ``--insecure-no-token`` (loopback only) ignores it.
"""
