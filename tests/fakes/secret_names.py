"""Fake credentials that are shaped like names: each passes the registry's name pattern, so only the public-safety
check stands between it and an exported span.

Every call makes a fresh value (random tail), so a test never meets a name an earlier test registered or had
refused in the process-wide registry. The values follow the public formats of each vendor's keys (prefix, length,
alphabet); none is a real key.

* :data:`RECOGNISED`: formats the public-safety check knows today; tests must see each of them refused.
* :data:`PENDING`: formats a newer recogniser is meant to learn (Stripe, Hugging Face, GitLab, ...); a test
  that takes them skips a shape the check does not flag yet, and runs it as soon as the check does.
* :data:`WITH_SPACES`: shapes only a framework definition may declare (:data:`DECLARED_NAME_PATTERN`: up to four
  words), such as ``Agent(name="Bearer ...")``.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
URLSAFE = ALNUM + "-_"


def tail(length: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _jwt() -> str:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(json.dumps({"sub": tail(8)}).encode()).rstrip(b"=").decode()
    return f"{header}.{body}.{tail(43, URLSAFE)}"


RECOGNISED: dict[str, Callable[[], str]] = {
    "openai_project_key": lambda: f"sk-proj-{tail(48, URLSAFE)}",
    "openai_legacy_key": lambda: f"sk-{tail(48)}",
    "anthropic_key": lambda: f"sk-ant-api03-{tail(86, URLSAFE)}-{tail(6)}AA",
    "openai_service_account_key": lambda: f"sk-svcacct-{tail(64, URLSAFE)}",
    "github_classic_token": lambda: f"ghp_{tail(36)}",
    "github_oauth_token": lambda: f"gho_{tail(36)}",
    "github_fine_grained_token": lambda: f"github_pat_{tail(22)}_{tail(59)}",
    "aws_access_key_id": lambda: f"AKIA{tail(16, UPPER_DIGITS)}",
    "aws_session_key_id": lambda: f"ASIA{tail(16, UPPER_DIGITS)}",
    "slack_bot_token": lambda: f"xoxb-{tail(12, string.digits)}-{tail(13, string.digits)}-{tail(24)}",
    "google_api_key": lambda: f"AIza{tail(35, URLSAFE)}",
    "jwt": _jwt,
}

PENDING: dict[str, Callable[[], str]] = {
    "stripe_secret_key": lambda: f"sk_live_{tail(24)}",
    "stripe_restricted_key": lambda: f"rk_live_{tail(24)}",
    "stripe_test_key": lambda: f"sk_test_{tail(24)}",
    "huggingface_token": lambda: f"hf_{tail(34)}",
    "gitlab_token": lambda: f"glpat-{tail(20, URLSAFE)}",
    "npm_token": lambda: f"npm_{tail(36)}",
    "sendgrid_key": lambda: f"SG.{tail(22, URLSAFE)}.{tail(43, URLSAFE)}",
    "groq_key": lambda: f"gsk_{tail(52)}",
    "google_oauth_token": lambda: f"ya29.{tail(60, URLSAFE)}",
    "aws_key_inside_a_name": lambda: f"deploy_AKIA{tail(16, UPPER_DIGITS)}",
    "github_token_inside_a_name": lambda: f"ci_ghp_{tail(36)}",
}

WITH_SPACES: dict[str, Callable[[], str]] = {
    "bearer_header": lambda: f"Bearer {tail(40, URLSAFE)}",
    "token_header": lambda: f"token ghp_{tail(36)}",
    "key_among_words": lambda: f"triage agent sk-proj-{tail(40, URLSAFE)}",
    "basic_auth": lambda: f"Basic {tail(24)}",
}


def every_shape() -> dict[str, Callable[[], str]]:
    return {**RECOGNISED, **PENDING, **WITH_SPACES}
