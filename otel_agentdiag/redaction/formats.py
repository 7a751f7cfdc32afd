"""The table of what a credential, a piece of personal data or a location looks like (data for ``recognizers``).

Each :class:`Format` is one shape: an id (what :func:`~otel_agentdiag.redaction.recognizers.recognise` returns,
never the value), what it is, the expression, and where the shape is documented. The expressions are our own;
the sources are named so a reviewer can compare coverage: the public rule ids of gitleaks
(``config/gitleaks.toml``, written ``gitleaks:<id>``), the plugins of Yelp's detect-secrets
(``detect-secrets:<Detector>``), or the vendor's page about its token format.

Every expression is written for two engines: Python's ``re`` (the SDK) and Go's RE2 (the Collector's
``redaction`` processor, see :mod:`otel_agentdiag.redaction.collector`). So: no lookaround, no backreference,
no ``\\b``/``\\s``/``\\d``/``\\w`` (their meaning differs between the engines outside ASCII), and flags only
scoped, ``(?i:...)``. A format is ``lead`` + ``body`` + ``trail``: ``lead`` and ``trail`` are the boundaries
around the token (a character that is not part of it, or the start or end of the text); ``body`` is the token,
the part cut from captured content (so for ``password=hunter2`` the lead holds the name and the ``=``, and only
the value is cut).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from otel_agentdiag.redaction import format_checks as checks
from otel_agentdiag.redaction.format_parts import (
    AT,
    AWS_LEAD,
    CURL_USER_LEAD,
    DOT,
    END_NOT_ALNUM,
    HEADER_LEAD,
    IBAN_COUNTRIES,
    IPV6,
    NETRC_LEAD,
    NOT_ALNUM,
    PATH_LEAD,
    SECRET_LEAD,
    SESSION_COOKIES,
    TOKEN_LEAD,
    VALUE,
    VARIABLE_LEAD,
)

CREDENTIAL: Final = "credential"
"""A secret: a key, token, password or private key."""
PERSONAL: Final = "personal"
"""Personal data: an e-mail address, a card number, a phone number, an IP address."""
LOCATION: Final = "location"
"""Where something lives: a URL or an absolute path (they carry host and user names and query strings)."""

KINDS: Final = (CREDENTIAL, PERSONAL, LOCATION)


@dataclass(frozen=True, slots=True)
class Format:
    """One shape of sensitive text.

    :param anchors: space-separated lower-case literals: the lower-cased text holds one of them wherever the
        format matches (empty: no literal is certain). Only formats whose anchor is found are tried.
    :param needs: another cheap test that every text the format matches (and its ``check`` confirms) passes,
        a key of ``recognizers._GUARDS``: ``digits`` (the shape of a card or phone number), ``assign`` (an ``=``
        or ``:``), ...
    :param check: confirms a candidate the expression found (given the ``body`` match), for what an expression
        cannot say: the Luhn digit of a card number, a phone number's digit count. The Collector, which runs the
        expression alone, masks every candidate: a superset.
    :param prose: in captured content only: a match (the ``body``) for which this says True is prose and stays.
    :param content: also cut from captured content (``otel_agentdiag.content``): credentials and card numbers.
        E-mail addresses, phone numbers, IP addresses, URLs and paths are ordinary content.
    """

    id: str
    kind: str
    description: str
    body: str
    source: str
    anchors: str = ""
    needs: str = "always"
    lead: str = ""
    trail: str = ""
    check: Callable[[str], bool] | None = None
    content: bool = False
    prose: Callable[[str], bool] | None = None

    @property
    def pattern(self) -> str:
        """The whole expression, as the Collector runs it."""
        return self.lead + self.body + self.trail


FORMATS: Final[tuple[Format, ...]] = (
    # --- model providers ------------------------------------------------------------------------------------------
    Format(
        "openai_scoped_key", CREDENTIAL, "OpenAI project, service-account and admin keys; OpenRouter keys",
        r"sk-(?:proj|svcacct|admin|None|or-v1)-[A-Za-z0-9_-]{16,}",
        "gitleaks:openai-api-key; detect-secrets:OpenAIDetector; "
        "platform.openai.com/docs/api-reference/authentication", anchors="sk-", content=True,
    ),
    Format(
        "anthropic_key", CREDENTIAL, "Anthropic API and admin keys (sk-ant-api03-..., sk-ant-admin01-...)",
        r"sk-ant-[A-Za-z0-9_-]{16,}", "gitleaks:anthropic-api-key, anthropic-admin-api-key", anchors="sk-",
        content=True,
    ),
    Format(
        "openai_key", CREDENTIAL, "OpenAI-style key: sk- and 20 or more letters and digits, inside any word",
        r"sk-[A-Za-z0-9]{20,}", "gitleaks:openai-api-key; detect-secrets:OpenAIDetector", anchors="sk-", content=True,
    ),
    Format(
        "dash_key", CREDENTIAL, "sk-/pk-/rk- followed by 12 or more key characters, at the start of a token",
        r"(?i:sk|pk|rk)-[A-Za-z0-9_-]{12,}", "the sk-/pk-/rk- convention of OpenAI, Anthropic, DeepSeek, ...",
        lead=NOT_ALNUM, anchors="sk- pk- rk-", content=True,
    ),
    Format(
        "google_api_key", CREDENTIAL, "Google API key (AIza...)", r"AIza[0-9A-Za-z_-]{30,}",
        "gitleaks:gcp-api-key; cloud.google.com/docs/authentication/api-keys", anchors="aiza", content=True,
    ),
    Format(
        "google_oauth_access_token", CREDENTIAL, "Google OAuth 2.0 access token (ya29.)", r"ya29\.[0-9A-Za-z_-]{20,}",
        "developers.google.com/identity/protocols/oauth2", anchors="ya29.", content=True,
    ),
    Format(
        "google_oauth_refresh_token", CREDENTIAL, "Google OAuth 2.0 refresh token (1//)", r"1//[0-9A-Za-z_-]{20,}",
        "developers.google.com/identity/protocols/oauth2", anchors="1//", content=True,
    ),
    Format(
        "google_oauth_client_secret", CREDENTIAL, "Google OAuth client secret (GOCSPX-)", r"GOCSPX-[0-9A-Za-z_-]{20,}",
        "Google Cloud OAuth client secrets (GOCSPX- prefix since 2021)", anchors="gocspx-", content=True,
    ),
    Format(
        "huggingface_token", CREDENTIAL, "Hugging Face user (hf_) and organisation (api_org_) tokens",
        r"(?:hf|api_org)_[A-Za-z0-9]{30,}", "gitleaks:huggingface-access-token, huggingface-organization-api-token; "
        "huggingface.co/docs/hub/security-tokens", anchors="hf_ api_org_", content=True,
    ),
    Format(
        "groq_key", CREDENTIAL, "Groq API key (gsk_)", r"gsk_[A-Za-z0-9]{40,}", "console.groq.com/docs/api-keys",
        anchors="gsk_", content=True,
    ),
    Format(
        "xai_key", CREDENTIAL, "xAI API key (xai-)", r"xai-[A-Za-z0-9]{40,}", "docs.x.ai (API keys)", anchors="xai-",
        content=True,
    ),
    Format(
        "perplexity_key", CREDENTIAL, "Perplexity API key (pplx-)", r"pplx-[A-Za-z0-9]{40,}",
        "gitleaks:perplexity-api-key", anchors="pplx-", content=True,
    ),
    Format(
        "nvidia_key", CREDENTIAL, "NVIDIA API key (nvapi-)", r"nvapi-[A-Za-z0-9_-]{40,}",
        "build.nvidia.com (API keys)", anchors="nvapi-", content=True,
    ),
    Format(
        "replicate_token", CREDENTIAL, "Replicate API token (r8_)", r"r8_[A-Za-z0-9]{30,}",
        "replicate.com/docs/topics/security/api-tokens", lead=NOT_ALNUM, anchors="r8_", content=True,
    ),
    # --- code hosts and package registries ------------------------------------------------------------------------
    Format(
        "github_token", CREDENTIAL, "GitHub personal, OAuth, user-to-server, server-to-server, refresh tokens",
        r"gh[pousr]_[A-Za-z0-9]{20,}", "gitleaks:github-pat, github-oauth, github-app-token, github-refresh-token; "
        "detect-secrets:GitHubTokenDetector; "
        "github.blog/2021-04-05-behind-githubs-new-authentication-token-formats", anchors="ghp_ gho_ ghu_ ghs_ ghr_",
        content=True,
    ),
    Format(
        "github_fine_grained_pat", CREDENTIAL, "GitHub fine-grained personal access token",
        r"github_pat_[A-Za-z0-9_]{20,}", "gitleaks:github-fine-grained-pat", anchors="github_pat_", content=True,
    ),
    Format(
        "gitlab_token", CREDENTIAL, "GitLab tokens by prefix (glpat-, gloas-, gldt-, glrt-, glptt-, glft-, ...)",
        r"gl(?:pat|oas|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|cd|wt)-[A-Za-z0-9_-]{20,}",
        "docs.gitlab.com/ee/security/tokens/ (token prefixes); gitleaks:gitlab-pat, gitlab-ptt, gitlab-rrt, "
        "gitlab-deploy-token, gitlab-feed-token, ...; detect-secrets:GitLabTokenDetector",
        anchors="glpat- gloas- gldt- glrt- glrtr- glcbt- glptt- glft- glimt- glagent- glsoat- glffct- glcd- glwt-",
        content=True,
    ),
    Format(
        "gitlab_runner_registration_token", CREDENTIAL, "GitLab runner registration token (GR1348941)",
        r"GR1348941[A-Za-z0-9_-]{20,}", "gitleaks:gitlab-rrt", anchors="gr1348941", content=True,
    ),
    Format(
        "npm_token", CREDENTIAL, "npm access token (npm_)", r"npm_[A-Za-z0-9]{30,}",
        "gitleaks:npm-access-token; github.blog/changelog/2021-09-23-npm-has-a-new-access-token-format",
        anchors="npm_", content=True,
    ),
    Format(
        "pypi_token", CREDENTIAL, "PyPI and TestPyPI upload tokens (pypi-AgEIcHlwaS5vcmc...)",
        r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{20,}",
        "gitleaks:pypi-upload-token; detect-secrets:PypiTokenDetector; pypi.org/help/#apitoken", anchors="pypi-ag",
        content=True,
    ),
    Format(
        "rubygems_token", CREDENTIAL, "RubyGems API key (rubygems_)", r"rubygems_[a-f0-9]{48}",
        "gitleaks:rubygems-api-token", anchors="rubygems_", content=True,
    ),
    Format(
        "docker_hub_pat", CREDENTIAL, "Docker Hub personal access token (dckr_pat_)", r"dckr_pat_[A-Za-z0-9_-]{20,}",
        "docs.docker.com/security/for-developers/access-tokens/", anchors="dckr_pat_", content=True,
    ),
    # --- chat and messaging ---------------------------------------------------------------------------------------
    Format(
        "slack_token", CREDENTIAL, "Slack bot, user, app, refresh and configuration tokens (xox*-, xapp-)",
        r"(?:xox[abeoprs](?:\.xox[a-z])?-|xapp-[0-9]+-)[A-Za-z0-9-]*",
        "gitleaks:slack-bot-token, slack-user-token, slack-app-token, slack-config-access-token; "
        "detect-secrets:SlackDetector", anchors="xox xapp-", content=True,
    ),
    Format(
        "slack_webhook", CREDENTIAL, "Slack incoming-webhook and workflow URL path",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]+",
        "gitleaks:slack-webhook-url; detect-secrets:SlackDetector", anchors="hooks.slack.com/", content=True,
    ),
    Format(
        "discord_bot_token", CREDENTIAL, "Discord bot token (three base64url parts)",
        r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
        "gitleaks:discord-api-token; detect-secrets:DiscordBotTokenDetector", lead=NOT_ALNUM, anchors=".",
        needs="discord", content=True,
    ),
    Format(
        "discord_webhook", CREDENTIAL, "Discord webhook URL path",
        r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]+", "discord.com/developers/docs/resources/webhook",
        anchors="/api/webhooks/", content=True,
    ),
    Format(
        "telegram_bot_token", CREDENTIAL, "Telegram bot token (<bot id>:AA...)", r"[0-9]{5,16}:AA[A-Za-z0-9_-]{30,}",
        "gitleaks:telegram-bot-api-token; detect-secrets:TelegramBotTokenDetector; core.telegram.org/bots/api",
        lead=r"(?:^|[^0-9])", anchors=":aa", content=True,
    ),
    Format(
        "sendgrid_key", CREDENTIAL, "SendGrid API key (SG.<id>.<secret>)",
        r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        "gitleaks:sendgrid-api-token; detect-secrets:SendGridDetector", lead=NOT_ALNUM, anchors="sg.", content=True,
    ),
    Format(
        "twilio_api_key", CREDENTIAL, "Twilio API key SID (SK + 32 hex)", r"SK[0-9a-fA-F]{32}",
        "gitleaks:twilio-api-key; detect-secrets:TwilioKeyDetector", lead=NOT_ALNUM, trail=END_NOT_ALNUM,
        anchors="sk", needs="SK", content=True,
    ),
    Format(
        "mailgun_key", CREDENTIAL, "Mailgun private and public API keys (key-, pubkey- + 32 hex)",
        r"(?:pub)?key-[0-9a-f]{32}", "gitleaks:mailgun-private-api-token, mailgun-pub-key", lead=NOT_ALNUM,
        trail=END_NOT_ALNUM, anchors="key-", content=True,
    ),
    Format(
        "brevo_key", CREDENTIAL, "Brevo (Sendinblue) API key (xkeysib-)", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "gitleaks:sendinblue-api-token", anchors="xkeysib-", content=True,
    ),
    # --- clouds and platforms -------------------------------------------------------------------------------------
    Format(
        "aws_access_key_id", CREDENTIAL, "AWS access key id (AKIA, ASIA and the other key-id prefixes)",
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AKPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}",
        "gitleaks:aws-access-token; detect-secrets:AWSKeyDetector; "
        "docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids", lead=NOT_ALNUM,
        trail=END_NOT_ALNUM, anchors="akia asia abia acca agpa aida aipa akpa anpa anva apka aroa asca", content=True,
    ),
    Format(
        "aws_secret_access_key", CREDENTIAL, "an AWS secret access key (40 base64 characters) assigned to its name",
        r"[A-Za-z0-9/+]{40}", "detect-secrets:AWSKeyDetector; gitleaks:aws-access-token", lead=AWS_LEAD,
        trail=r"(?:$|[^A-Za-z0-9/+])", anchors="secret", needs="assign", content=True,
    ),
    Format(
        "azure_storage_key", CREDENTIAL, "Azure storage or Service Bus key in a connection string",
        r"[A-Za-z0-9+/]{20,}={0,2}", "detect-secrets:AzureStorageKeyDetector; "
        "learn.microsoft.com/azure/storage/common/storage-configure-connection-string",
        lead=r"(?:AccountKey|SharedAccessKey)=", anchors="accountkey= sharedaccesskey=", content=True,
    ),
    Format(
        "azure_sas_signature", CREDENTIAL, "Azure shared access signature (sig= of a SAS token)",
        r"[A-Za-z0-9%+/=]{20,}", "learn.microsoft.com/azure/storage/common/storage-sas-overview",
        lead=r"(?:^|[?&; ])sig=", anchors="sig=", content=True,
    ),
    Format(
        "azure_ad_client_secret", CREDENTIAL, "Microsoft Entra ID (Azure AD) client secret (the Q~ marker)",
        r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", "gitleaks:azure-ad-client-secret", anchors="q~",
        content=True,
    ),
    Format(
        "digitalocean_token", CREDENTIAL,
        "DigitalOcean personal, OAuth and refresh tokens (dop_v1_, doo_v1_, dor_v1_)", r"do[opr]_v1_[a-f0-9]{64}",
        "gitleaks:digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token", anchors="_v1_",
        content=True,
    ),
    Format(
        "shopify_token", CREDENTIAL, "Shopify access tokens and shared secrets (shpat_, shpca_, shppa_, shpss_)",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        "gitleaks:shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, "
        "shopify-shared-secret", anchors="shpat_ shpca_ shppa_ shpss_", content=True,
    ),
    Format(
        "databricks_token", CREDENTIAL, "Databricks personal access token (dapi + 32 hex)",
        r"dapi[a-f0-9]{32}(?:-[0-9]+)?",
        "gitleaks:databricks-api-token; docs.databricks.com/en/dev-tools/auth/pat.html", anchors="dapi", content=True,
    ),
    Format(
        "stripe_key", CREDENTIAL, "Stripe secret, restricted and publishable keys (sk_live_, rk_test_, ...)",
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",
        "gitleaks:stripe-access-token; detect-secrets:StripeDetector; docs.stripe.com/keys", lead=NOT_ALNUM,
        anchors="k_live_ k_test_", content=True,
    ),
    Format(
        "stripe_webhook_secret", CREDENTIAL, "Stripe webhook signing secret (whsec_)", r"whsec_[A-Za-z0-9]{20,}",
        "docs.stripe.com/webhooks (signing secrets)", anchors="whsec_", content=True,
    ),
    Format(
        "vault_token", CREDENTIAL, "HashiCorp Vault service and batch tokens (hvs., hvb.)",
        r"hv[sb]\.[A-Za-z0-9_-]{20,}", "gitleaks:vault-service-token, vault-batch-token", lead=NOT_ALNUM,
        anchors="hvs. hvb.", content=True,
    ),
    Format(
        "doppler_token", CREDENTIAL, "Doppler tokens (dp.pt., dp.st., dp.sa., dp.ct., ...)",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{30,}", "gitleaks:doppler-api-token", anchors="dp.", content=True,
    ),
    Format(
        "pulumi_token", CREDENTIAL, "Pulumi access token (pul- + 40 hex)", r"pul-[a-f0-9]{40}",
        "gitleaks:pulumi-api-token", lead=NOT_ALNUM, anchors="pul-", content=True,
    ),
    Format(
        "planetscale_token", CREDENTIAL, "PlanetScale tokens and passwords (pscale_tkn_, pscale_oauth_, pscale_pw_)",
        r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_.=-]{30,}",
        "gitleaks:planetscale-api-token, planetscale-oauth-token, planetscale-password", anchors="pscale_",
        content=True,
    ),
    Format(
        "sentry_token", CREDENTIAL, "Sentry organisation and user auth tokens (sntrys_, sntryu_)",
        r"sntry[su]_[A-Za-z0-9_=+/-]{30,}", "gitleaks:sentry-org-token, sentry-user-token", anchors="sntry",
        content=True,
    ),
    Format(
        "grafana_token", CREDENTIAL, "Grafana service-account and cloud tokens (glsa_, glc_)",
        r"gl(?:sa|c)_[A-Za-z0-9_+/=-]{30,}", "gitleaks:grafana-service-account-token, grafana-cloud-api-token",
        anchors="glsa_ glc_", content=True,
    ),
    Format(
        "linear_key", CREDENTIAL, "Linear API key (lin_api_)", r"lin_api_[A-Za-z0-9]{30,}", "gitleaks:linear-api-key",
        anchors="lin_api_", content=True,
    ),
    Format(
        "atlassian_token", CREDENTIAL, "Atlassian API token (ATATT3)", r"ATATT3[A-Za-z0-9_=-]{30,}",
        "gitleaks:atlassian-api-token", anchors="atatt3", content=True,
    ),
    Format(
        "onepassword_service_token", CREDENTIAL, "1Password service-account token (ops_eyJ)",
        r"ops_eyJ[A-Za-z0-9+/=_-]{30,}", "gitleaks:1password-service-account-token", anchors="ops_eyj", content=True,
    ),
    # --- generic shapes -------------------------------------------------------------------------------------------
    Format(
        "jwt", CREDENTIAL, "JSON Web Token (eyJ header, a dot, the rest)", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_.-]*",
        "gitleaks:jwt; detect-secrets:JwtTokenDetector; RFC 7519", lead=NOT_ALNUM, anchors="eyj", content=True,
    ),
    Format(
        "private_key", CREDENTIAL, "PEM armour (private keys, certificates): from BEGIN to END, or to the end",
        r"-----BEGIN[A-Z0-9 ]*(?:-----(?s:.*?)-----END[A-Z0-9 ]*-----|(?s:.*))",
        "gitleaks:private-key; detect-secrets:PrivateKeyDetector; RFC 7468", anchors="-----begin", content=True,
    ),
    Format(
        "age_or_putty_key", CREDENTIAL, "age secret key and PuTTY key file header",
        r"(?:AGE-SECRET-KEY-1[0-9A-Z]{20,}|PuTTY-User-Key-File-[0-9]+:)",
        "gitleaks:age-secret-key; the PuTTY .ppk format", anchors="age-secret-key-1 putty-user-key-file-",
        content=True,
    ),
    Format(
        "authorization_value", CREDENTIAL,
        "an authorization scheme and what follows it (Bearer, Basic, Token); in captured content only a "
        "token-shaped one (8 or more characters, not an ordinary word)", r"(?i:bearer|basic|token) +[^ ]+",
        "RFC 9110 §11 (HTTP authentication); gitleaks:curl-auth-header", lead=NOT_ALNUM,
        prose=checks.prose_after_scheme, anchors="bearer basic token", needs="space", content=True,
    ),
    Format(
        "credential_header", CREDENTIAL,
        "a credential-bearing header with a value (Authorization, Cookie, Cookie2, Set-Cookie, X-Api-Key, ...); "
        "a cookie header's every name=value pair", r"(?:(?i:bearer|basic|token|digest) +)?[^ ;]+(?:; *[^ ;]+)*;?",
        "RFC 9110 §11.6; RFC 6265 §4 (Cookie, Set-Cookie); RFC 2965 (Cookie2)", lead=HEADER_LEAD,
        anchors="authorization api-key x-auth-token cookie", needs="assign", content=True,
    ),
    Format(
        "secret_assignment", CREDENTIAL,
        "a value assigned to a secret's name (password=, api_key: ..., OPENAI_API_KEY=..., \"client_secret\": ...)",
        VALUE, "detect-secrets:KeywordDetector; gitleaks:generic-api-key", lead=SECRET_LEAD,
        anchors="pass pwd secret key token credential dsn conn", needs="assign", content=True,
    ),
    Format(
        "token_assignment", CREDENTIAL, "a value given to a token or auth setting with = (GITLAB_TOKEN=..., auth=...)",
        VALUE, "detect-secrets:KeywordDetector", lead=TOKEN_LEAD, anchors="token auth", needs="assign",
        content=True,
    ),
    Format(
        "credential_variable", CREDENTIAL,
        "a value assigned to a variable whose name ends like a credential's (PGPASSWORD=, MYSQL_PWD=, DB_PASS=, "
        "STRIPE_KEY=, GITHUB_TOKEN: ..., AzureOpenAIKey=...)", VALUE,
        "detect-secrets:KeywordDetector; gitleaks:generic-api-key; the PostgreSQL and MySQL client variables",
        lead=VARIABLE_LEAD, anchors="pass pwd _pw secret credential key token _auth", needs="assign", content=True,
    ),
    Format(
        "netrc_password", CREDENTIAL, "the password of a .netrc entry (machine HOST login USER password ...)",
        "[^ ]+", "the netrc file format (GNU inetutils, curl)", lead=NETRC_LEAD, anchors="machine default",
        needs="space", content=True,
    ),
    Format(
        "curl_user_password", CREDENTIAL, "the user:password of curl -u / --user (and of any command's -u)",
        "[^ \"':]+:[^ \"']*", "gitleaks:curl-auth-user; curl(1) --user", lead=CURL_USER_LEAD,
        anchors="-u --user", needs="assign", content=True,
    ),
    Format(
        "session_cookie", CREDENTIAL, "a session cookie's value (sessionid=, PHPSESSID=, JSESSIONID=, connect.sid=, "
        "..._session=)", "[^ \"',;&]+", "RFC 6265 §4.1 (Set-Cookie); the frameworks' default session cookie names",
        lead=NOT_ALNUM + SESSION_COOKIES + " *=", anchors="sessionid sessid connect.sid _session", needs="assign",
        content=True,
    ),
    Format(
        "connection_credentials", CREDENTIAL,
        "user:password@host:port or user:password@host/path without a scheme (a database or broker "
        "address with its password)",
        r"[A-Za-z0-9._~%+-]+:[^ @/:]+@(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(?::[0-9]{1,5}|/[^ ]*)",
        "RFC 3986 §3.2.1 (user information); detect-secrets:BasicAuthDetector", lead="(?:^|[^A-Za-z0-9._~%+-])",
        trail=END_NOT_ALNUM, anchors="@", content=True,
    ),
    Format(
        "azure_openai_key", CREDENTIAL,
        "Azure OpenAI and Azure AI services key (32 hex digits that look random: not all decimal, varied)",
        r"[0-9a-fA-F]{32}", "learn.microsoft.com/azure/ai-services/openai/reference (api-key header); "
        "detect-secrets:HexHighEntropyString (its 3.0-bit limit)", lead=NOT_ALNUM, trail=END_NOT_ALNUM,
        check=checks.random_hex, needs="hex32", content=True,
    ),
    # --- personal data --------------------------------------------------------------------------------------------
    Format(
        "email_address", PERSONAL, "an e-mail address", r"[^@ /:]+@[^@ /]+\.[A-Za-z]{2,}",
        "RFC 5322 §3.4 (addr-spec), loosely", lead="(?:^|[@ /:])", anchors="@",
    ),
    Format(
        "email_obfuscated", PERSONAL,
        "an e-mail address written to dodge a filter: (at), [at], {at}, <at>, ' at ', ' @ ' for @, and (dot), "
        "[dot], ' dot ' for the dots", "[A-Za-z0-9._%+-]+" + AT + "[A-Za-z0-9-]+(?:" + DOT + "[A-Za-z0-9-]+)+",
        "the munged address forms of mailing-list archives and web pages", lead="(?:^|[^A-Za-z0-9._%+-])",
        check=checks.email_tld, anchors="at @", needs="at_word",
    ),
    Format(
        "iban", PERSONAL,
        "an International Bank Account Number: a registry country code, two check digits and 11-30 letters and "
        "digits (grouped by four or not) whose mod-97 check is right",
        "(?:" + "|".join(IBAN_COUNTRIES.split()) + r")[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?",
        "ISO 13616-1 (IBAN, mod-97 check digits, ISO 7064); the SWIFT IBAN registry", lead=NOT_ALNUM,
        trail=END_NOT_ALNUM, check=checks.iban, needs="digits", content=True,
    ),
    Format(
        "card_number", PERSONAL,
        "a payment card number: 13-19 digits starting with 2-6 (the major networks), contiguous or "
        "grouped 4-4-4-x or 4-6-5, passing the Luhn check",
        r"(?:[2-6][0-9]{12,18}|[2-6][0-9]{3}(?:[ -][0-9]{4}){2}[ -][0-9]{1,7}|3[47][0-9]{2}[ -][0-9]{6}[ -][0-9]{5})",
        "ISO/IEC 7812-1 (issuer identification numbers, Luhn check digit)", lead=r"(?:^|[^A-Za-z0-9.])",
        trail=END_NOT_ALNUM, check=checks.luhn, needs="digits", content=True,
    ),
    Format(
        "phone_international", PERSONAL,
        "an international number: +, then 7-15 digits, with single spaces, dots or dashes, or the area "
        "code in parentheses", r"\+[1-9](?:(?:[ .-]?[0-9]){6,14}|[0-9]{0,2}[ .-]?\([0-9]{1,4}\)(?:[ .-]?[0-9]){4,12})",
        "ITU-T E.164 and E.123", lead=r"(?:^|[^A-Za-z0-9+])", trail=r"(?:$|[^0-9])", anchors="+",
    ),
    Format(
        "phone_nanp", PERSONAL, "a North American number with separators: (555) 123-4567, 555-123-4567, 555.123.4567, "
        "1-555-123-4567", r"(?:1[ .-])?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .-])[0-9]{3}[ .-][0-9]{4}",
        "the North American Numbering Plan (NANPA)", lead=r"(?:^|[^A-Za-z0-9.+-])", trail=r"(?:$|[^A-Za-z0-9.-])",
        needs="digits",
    ),
    Format(
        "phone_national", PERSONAL,
        "a national number with a trunk 0 and separators (020 7946 0958, 06-12345678, 01 23 45 67 89, "
        "(0151) 1234567), 9-12 digits",
        r"(?:\(0[1-9][0-9]{0,4}\) ?|0[1-9][0-9]{0,4}(?:[ -]|/ ?))[0-9]{2,8}(?:[ -][0-9]{2,8}){0,3}",
        "ITU-T E.123 (national notation)", lead=r"(?:^|[^A-Za-z0-9.+/-])", trail=r"(?:$|[^A-Za-z0-9.:/-])",
        check=checks.national_phone, needs="digits",
    ),
    Format(
        "ipv4_address", PERSONAL,
        "an IPv4 address: a dotted quad, each part 0-255 (so the four-part version 1.2.3.4 is one; 1.37.0 "
        "is not); loopback and 0.0.0.0 pass",
        r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}",
        "RFC 791; detect-secrets:IPPublicDetector", lead=r"(?:^|[^A-Za-z0-9.])", trail=r"(?:$|[^0-9.]|\.(?:$|[^0-9]))",
        check=checks.public_ipv4, anchors=".", needs="dotted_digits",
    ),
    Format(
        "ipv6_address", PERSONAL, "an IPv6 address, full or compressed (::), with a digit; loopback and :: pass",
        IPV6, "RFC 4291 §2.2, RFC 5952", lead=r"(?:^|[^A-Za-z0-9:.])", trail=r"(?:$|[^0-9A-Za-z:])", check=checks.ipv6,
        anchors=":", needs="colon",
    ),
    # --- locations ------------------------------------------------------------------------------------------------
    Format(
        "url", LOCATION, "a URL (scheme://): it may carry user info, a host and a query string",
        r"[A-Za-z0-9+.-]+://[^ ]*", "RFC 3986", lead="(?:^|[^A-Za-z0-9+.-])", anchors="://",
    ),
    Format(
        "absolute_path", LOCATION, "an absolute path: POSIX, home (~/), Windows drive, UNC",
        r"(?:/|~/|[A-Za-z]:[\\/]|\\\\)[^ ]*", "POSIX.1 pathname resolution; Windows path formats", lead=PATH_LEAD,
        anchors="/ \\",
    ),
    Format(
        "user_layout_path", LOCATION, "a path naming a user or a host's layout (/home/, /Users/, /tmp/, ...)",
        r"/(?i:home|users|root|private|var|tmp|etc)/[^ ]*", "the Filesystem Hierarchy Standard", anchors="/",
    ),
)  # fmt: skip
"""Every format, credentials first. Ids are unique; ``recognise`` reports the first (in this order) that matches."""
