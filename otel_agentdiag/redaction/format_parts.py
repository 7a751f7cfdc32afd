"""The pieces the format expressions are built of: boundaries, values, secret names, the leads before a token.

Written, like the formats of :mod:`~otel_agentdiag.redaction.formats`, for Python's ``re`` and Go's RE2 both (no
lookaround, no backreference, no ``\\b``/``\\s``/``\\d``/``\\w``, flags only scoped).
"""

from __future__ import annotations

# Boundaries. A token that may appear inside a longer word is written with a lead: the character before it is
# not a letter or digit (an underscore is: ``my_sk-...`` is still a key).
NOT_ALNUM = r"(?:^|[^A-Za-z0-9])"
END_NOT_ALNUM = r"(?:$|[^A-Za-z0-9])"
H16 = r"[0-9A-Fa-f]{1,4}"
IPV6 = rf"(?:(?:{H16}:){{7}}{H16}|(?:{H16}(?::{H16}){{0,6}})?::(?:{H16}(?::{H16}){{0,6}})?)"
QUOTE = "[\"']"
VALUE = "[^ \"',;&]*[^ \"',;&)\\]}>]"
"""An unquoted value, or a quoted one without its closing quote: up to a space, quote, comma, semicolon or ``&``,
and not ending in a closing bracket (``Client(password=x)``)."""
PATH_LEAD = "(?:^|[ =:'\"(,])"
"""Where an absolute path starts: the start of the text, or after a space, ``=``, ``:``, a quote, ``(`` or ``,``."""
SECRET_NAMES = (
    r"(?i:password|passwd|pwd|passphrase|secrets?|client_?secret|api_?key|apikey|access_?key|access_?token"
    r"|refresh_?token|auth_?token|id_?token|session_?token|bearer_?token|private_?key|secret_?key"
    r"|credentials?|dsn|connection_?string|conn_?str)"
)
SECRET_LEAD = NOT_ALNUM + SECRET_NAMES + QUOTE + r"? *[:=] *" + QUOTE + "?"
"""A secret's name (prefixed too: ``OPENAI_API_KEY``, ``db.password``, as ``_`` and ``.`` are boundaries), ``=`` or
``:``, perhaps quotes."""
TOKEN_LEAD = NOT_ALNUM + r"(?i:token|auth)" + QUOTE + r"? *= *" + QUOTE + "?"
"""``token`` or ``auth`` (perhaps prefixed: ``GITLAB_TOKEN``) and ``=``: with ``:`` they are too often prose."""
AWS_LEAD = r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)" + QUOTE + r"? *[:=] *" + QUOTE + "?"
HEADER_LEAD = NOT_ALNUM + r"(?i:(?:proxy-)?authorization|x-api-key|api-key|x-auth-token|cookie2?|set-cookie2?) *[:=] *"
VARIABLE_NAME = (
    r"(?:[A-Za-z0-9_.-]*(?i:passw(?:or)?d|pwd|secret|credentials?)|[A-Za-z0-9_.-]*_(?i:pass|pw|key|auth|token)"
    r"|[A-Za-z0-9_.-]*[A-Za-z0-9](?:Key|Token|Pass))"
)
"""A variable or setting that names a credential by its ending, glued to a prefix (``PGPASSWORD``, ``MYSQL_PWD``,
``DB_PASS``, ``STRIPE_KEY``, ``GITHUB_TOKEN``, ``AzureOpenAIKey``, ``accessToken``): ``password``, ``passwd``,
``pwd``, ``secret``, ``credential`` anywhere at its end; ``pass``, ``pw``, ``key``, ``auth`` and ``token`` after
an ``_``, or as the capitalised last word of a camel-case name. ``max_tokens``, ``MONKEY`` and ``bypass`` do not
end so."""
VARIABLE_LEAD = "(?:^|[^A-Za-z0-9_.-])" + VARIABLE_NAME + QUOTE + r"? *[:=] *" + QUOTE + "?"
NETRC_LEAD = r"(?:^|[^A-Za-z0-9_-])(?i:machine +[^ ]+|default)(?: +(?i:login|account|port) +[^ ]+)* +(?i:password) +"
"""A ``.netrc`` entry up to its password: ``machine`` and the host (or ``default``), other tokens and their
values, ``password`` and spaces."""
CURL_USER_LEAD = r"(?:^|[ ;|&(])(?:-u|--user)(?: +|=)" + QUOTE + "?"
"""``curl -u`` / ``--user`` (and any command's ``-u``) before a ``user:password`` value."""
SESSION_COOKIES = (
    r"(?i:sessionid|phpsessid|jsessionid|connect\.sid|asp\.net_sessionid|laravel_session|ci_session"
    r"|[a-z0-9]*_session)"
)
AT = r"(?: ?@ ?| ?[(\[{<] ?(?i:at) ?[)\]}>] ?| (?i:at) )"
DOT = r"(?:\.| ?[(\[{<] ?(?i:dot) ?[)\]}>] ?| (?i:dot) )"
IBAN_COUNTRIES = (
    "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE GI GL GR GT HN HR HU IE IL "
    "IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE SI "
    "SK SM SO ST SV TL TN TR UA VA VG XK YE"
)
"""The countries of the SWIFT IBAN registry (and the partial-IBAN countries that publish one)."""
