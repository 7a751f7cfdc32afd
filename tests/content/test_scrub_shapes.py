"""The content scrubber knows every shape the public-safety table knows, and the assignments and command lines
issue 33 found it missing: ``KEY=value`` for credential-like variable names, ``.netrc`` lines, ``curl -u``,
``Authorization``/``Cookie``/``Cookie2``/``Set-Cookie`` headers, session cookies, ``hf_``/``gsk_`` tokens inside
text, Telegram bot tokens, Azure OpenAI keys and IBANs.

Each attack is a made-up secret (seeded generator) in a prompt, a tool argument and a tool result; it must be cut
by :func:`~otel_agentdiag.content.scrub.scrub` and be absent from the store's bytes after a real capture, while
the prose around it stays.
"""

from __future__ import annotations

import random
import secrets
import string
from pathlib import Path

import pytest

import otel_agentdiag as agentdiag
from otel_agentdiag.content.scrub import REDACTED, scrub
from otel_agentdiag.redaction.formats import CREDENTIAL, FORMATS

RNG = random.Random(33_3026)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def iban(country: str, bban: str) -> str:
    digits = "".join(str(int(char, 36)) for char in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


# (template, secret): the template's {} is the secret; the secret's text must be gone after scrubbing.
ATTACKS: dict[str, tuple[str, str]] = {
    "pgpassword": ("run it with PGPASSWORD={} psql -h db", rand(ALNUM, 14)),
    "pgpassword_export": ("export PGPASSWORD='{}'", rand(ALNUM, 16)),
    "mysql_pwd": ("MYSQL_PWD={} mysql -u root", rand(ALNUM, 12)),
    "db_pass": ("DB_PASS={}\nDB_HOST=db", rand(ALNUM, 12)),
    "db_pass_yaml": ("  db_pass: {}\n  db_port: 5432", rand(ALNUM, 12)),
    "redis_pw": ("REDIS_PW={} redis-cli", rand(ALNUM, 10)),
    "service_token": ("set DEPLOY_TOKEN: {} in CI", rand(ALNUM, 24)),
    "app_secret": ("APP_SECRET={}", rand(ALNUM, 20)),
    "stripe_key_var": ("STRIPE_KEY={} then", rand(ALNUM, 20)),
    "azure_openai_key_var": ("AzureOpenAIKey={};Endpoint=x", rand(HEX, 32)),
    "azure_openai_key_bare": ("the key is {} for eastus", rand(HEX, 32)),
    "azure_api_key_header": ("api-key: {}", rand(HEX, 32)),
    "camel_access_token": ('{{"accessToken": "{}"}}', rand(ALNUM, 24)),
    "netrc": ("machine api.example.com login jane password {}\n", rand(ALNUM, 14)),
    "netrc_default": ("default login anonymous password {}", rand(ALNUM, 10)),
    "netrc_account": ("machine ftp.example.org login bob account acct password {} port 21", rand(ALNUM, 10)),
    "curl_u": ("curl -u jane:{} https://api.example.com", rand(ALNUM, 14)),
    "curl_user": ("curl --user=jane:{} https://api.example.com", rand(ALNUM, 14)),
    "curl_user_quoted": ("curl --user 'jane:{}' https://api.example.com", rand(ALNUM, 14)),
    "authorization": ("Authorization: Bearer {}", rand(ALNUM, 32)),
    "proxy_authorization": ("Proxy-Authorization: Basic {}", rand(ALNUM, 24)),
    "cookie": ("Cookie: {}", "theme=dark; sid=" + rand(ALNUM, 20)),
    "cookie2": ("Cookie2: {}", "$Version=1; token=" + rand(ALNUM, 20)),
    "set_cookie": ("Set-Cookie: {}; HttpOnly", "session=" + rand(ALNUM, 24)),
    "sessionid": ("then sessionid={} was set", rand(ALNUM, 32)),
    "phpsessid": ("PHPSESSID={}; path=/", rand("abcdefghijklmnopqrstuv0123456789", 26)),
    "jsessionid": ("jsessionid={} in the URL", rand(HEX, 32).upper()),
    "connect_sid": ("connect.sid={}; Path=/", "s%3A" + rand(ALNUM, 32) + "." + rand(ALNUM, 20)),
    "rails_session": ("_shop_session={}; path=/", rand(ALNUM + "%-", 60)),
    "hf_in_text": ("my token is{} thanks", "hf_" + rand(string.ascii_letters, 34)),
    "hf_in_word": ("HF_TOKEN_VALUE_hf_{}", rand(string.ascii_letters, 34)),
    "gsk_in_text": ("(groq: gsk_{})", rand(ALNUM, 52)),
    "gsk_in_json": ('{{"k":"gsk_{}"}}', rand(ALNUM, 52)),
    "telegram": ("bot token {} for the channel", rand(string.digits, 10) + ":AA" + rand(ALNUM + "_-", 33)),
    "telegram_url": ("https://api.telegram.org/bot{}/getMe", rand(string.digits, 9) + ":AA" + rand(ALNUM, 33)),
    "iban": ("wire it to {} today", iban("DE", "370400440532013000")),
    "iban_grouped": ("IBAN: {}.", " ".join(iban("FR", "20041010050500013M02606")[i : i + 4] for i in range(0, 27, 4))),
}


def test_every_credential_shape_of_the_table_is_cut_from_content() -> None:
    """One table, two readers: a credential format the public-safety check knows is one the scrubber cuts."""
    assert all(fmt.content for fmt in FORMATS if fmt.kind == CREDENTIAL)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_scrubber_cuts_each_attack(name: str) -> None:
    template, secret = ATTACKS[name]
    text = template.format(secret)
    scrubbed = scrub(text)
    assert REDACTED in scrubbed, scrubbed
    core = secret[-8:] if "=" not in secret else secret.rpartition("=")[2][-8:]
    assert core not in scrubbed, scrubbed
    # The prose around it stays (the first word of the template, when it has one).
    first = template.split()[0]
    if "{}" not in first and not first.startswith(("{", "(", "HF_")):
        assert first in scrubbed, scrubbed


@pytest.mark.parametrize(
    "text",
    ["the password is in the vault", "max_tokens=512 and top_p=1", "MONKEY=banana", "bypass=true",
     "sort -u names.txt", "session_id=42 is a conversation", "a cookie recipe: flour, sugar",
     "machine learning models need a password manager", "look at 0123456789abcdef0123", "token: the next one",
     "DE89 is a route number"],
)  # fmt: skip
def test_ordinary_prose_near_the_shapes_stays(text: str) -> None:
    assert scrub(text) == text


def test_captured_content_loses_every_attack_in_the_store(tmp_path: Path) -> None:
    """Through a real capture into the SQLite store: prompt, tool arguments and tool result."""
    store = tmp_path / "content.db"
    texts = {name: template.format(secret) for name, (template, secret) in ATTACKS.items()}
    handle = agentdiag.configure(store=store, hash_key=secrets.token_hex(32), capture_content=True, set_global=False)
    try:
        with agentdiag.agent_run("shapes-agent"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_content(
                    input_messages=[{"role": "user", "content": "please help. " + " | ".join(texts.values())}]
                )
            with agentdiag.tool_call("run_shell", arguments={"command": texts["curl_u"], "env": "ok"}) as tool:
                tool.record_result("stdout: " + texts["netrc"] + texts["pgpassword"] + " done")
    finally:
        handle.shutdown()
    blob = b"".join(path.read_bytes() for path in (store, Path(f"{store}-wal")) if path.exists())
    assert b"please help" in blob and b"done" in blob  # the content is there
    for name, (_, secret) in ATTACKS.items():
        core = secret[-8:]
        assert core.encode() not in blob, f"the {name} secret is in the stored content"
