"""sagemem.store.secrets: planted secrets are found where they are, look-alikes are not, and
redaction, digests and the line gates keep their promises.

The planted values are generated (seeded, so stable) rather than written out: the shapes are
real, the values are nobody's.
"""

from __future__ import annotations

import base64
import builtins
import json
import random
import re
import socket
import string
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sagemem.store import secrets
from sagemem.store.secrets import MARKER, new_secrets, redact, scan

ROOT = Path(__file__).resolve().parent.parent
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
UPPER = string.ascii_uppercase + string.digits
DIGITS, LOWER, HEX = string.digits, string.ascii_lowercase, "0123456789abcdef"


class Planted(NamedTuple):
    name: str
    text: str
    value: str
    line: int
    kind: str


def fake(seed: str, n: int, alphabet: str = ALNUM) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def pem(seed: str, label: str, size: int = 600, indent: str = "") -> str:
    rng = random.Random(seed)
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(size))).decode()
    lines = [f"-----BEGIN {label}-----", *(body[i : i + 64] for i in range(0, len(body), 64))]
    return f"\n{indent}".join([*lines, f"-----END {label}-----"])


def jwt(seed: str) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': seed, 'iat': 1716000000})}.{fake(seed, 43)}"


PUTTY = "\n".join(
    ["PuTTY-User-Key-File-2: ssh-rsa", "Encryption: none", "Comment: rsa-key-20240101", "Public-Lines: 2"]
    + [fake("pu1", 64, B64), fake("pu2", 40, B64), "Private-Lines: 1", fake("pu3", 64, B64)]
    + ["Private-MAC: " + fake("pu4", 40, "0123456789abcdef")]
)
FM = "---\nname: {name}\ndescription: notes on {name}\ntype: reference\n---\n\n"


def planted(name: str, template: str, value: str, kind: str) -> Planted:
    """`template` with the secret at `§`; the line it is on, 1-based."""
    template = template.replace("{name}", name)
    line = template[: template.index("§")].count("\n") + 1
    return Planted(name, template.replace("§", value), value, line, kind)


PLANTED = [
    # What today's hand-written list finds.
    planted(
        "rsa", FM + "Deploy key, do not lose:\n\n```\n§\n```\n", pem("rsa", "RSA PRIVATE KEY"), "private key"
    ),
    planted("openssh", "# bastion\n\n§\n", pem("openssh", "OPENSSH PRIVATE KEY", 400), "private key"),
    planted("ec", "```pem\n§\n```\n", pem("ec", "EC PRIVATE KEY", 120), "private key"),
    planted(
        "pkcs8-in-frontmatter",
        "---\nname: {name}\nsigning_key: |\n  §\n---\nbody\n",
        pem("pkcs8", "PRIVATE KEY", 300, indent="  "),
        "private key",
    ),
    planted(
        "pkcs8-json-escaped",
        '```json\n{"type": "service_account", "private_key": "§\\n"}\n```\n',
        pem("json", "PRIVATE KEY", 200).replace("\n", "\\n"),
        "private key",
    ),
    planted(
        "aws-id-prose",
        FM + "The deploy user's key id is § (rotated in March).\n",
        "AKIA" + fake("a1", 16, UPPER),
        "AWS key",
    ),
    planted(
        "aws-id-env", "```sh\nexport AWS_ACCESS_KEY_ID=§\n```\n", "ASIA" + fake("a2", 16, UPPER), "AWS key"
    ),
    planted("ghp", "Use `§` for the CI bot.\n", "ghp_" + fake("gh1", 36), "GitHub token"),
    planted("gho", "oauth token in the keychain: §\n", "gho_" + fake("gh2", 36), "GitHub token"),
    planted(
        "github-pat",
        "GITHUB_TOKEN=§\n",
        "github_pat_" + fake("gh3", 22) + "_" + fake("gh4", 59),
        "GitHub token",
    ),
    planted(
        "slack-bot",
        "- slack bot: §\n",
        "-".join(["xoxb", fake("s1", 12, DIGITS), fake("s2", 13, DIGITS), fake("s3", 24, LOWER + DIGITS)]),
        "Slack token",
    ),
    planted(
        "slack-user",
        "Slack user token (expires never): §\n",
        "-".join(["xoxp", fake("s4", 11, DIGITS), fake("s5", 12, DIGITS), fake("s6", 32, HEX)]),
        "Slack token",
    ),
    planted(
        "slack-webhook",
        "Alerts post to §\n",
        f"https://hooks.slack.com/services/T{fake('w1', 8, UPPER)}/B{fake('w2', 10, UPPER)}/{fake('w3', 24)}",
        "Slack token",
    ),
    planted(
        "openai",
        "```bash\nexport OPENAI_API_KEY=§\n```\n",
        "sk-" + fake("o1", 20) + "T3BlbkFJ" + fake("o2", 20),
        "OpenAI API key",
    ),
    planted(
        "openai-proj",
        "OpenAI project key for the evals: §\n",
        "sk-proj-" + fake("o3", 74, ALNUM + "-_") + "T3BlbkFJ" + fake("o4", 74, ALNUM + "-_"),
        "OpenAI API key",
    ),
    planted(
        "openai-svcacct",
        "the batch job uses §\n",
        "sk-svcacct-" + fake("o5", 48, ALNUM + "_-"),
        "OpenAI API key",
    ),
    planted("other-sk", "DeepSeek key: §\n", "sk-" + fake("ds", 32, "0123456789abcdef"), "API key"),
    planted(
        "anthropic",
        "ANTHROPIC_API_KEY=§\n",
        "sk-ant-api03-" + fake("an", 93, ALNUM + "-_") + "AA",
        "Anthropic API key",
    ),
    planted(
        "google",
        "Maps key § (restricted to our domain)\n",
        "AIza" + fake("g1", 35, ALNUM + "_-"),
        "Google API key",
    ),
    planted(
        "jwt",
        'curl -H "Authorization: Bearer §" https://api.internal/v1/jobs\n',
        jwt("svc-deploy"),
        "JSON web token",
    ),
    planted("api-key-python", '```python\nclient = Client(api_key="§")\n```\n', fake("k1", 32), "API key"),
    planted("api-key-assign", "api_key = §\n", fake("k2", 40, "0123456789abcdef"), "API key"),
    planted(
        "token-yaml", FM + "```yaml\nsentry:\n  token: §\n```\n", fake("t1", 64, "0123456789abcdef"), "token"
    ),
    planted("secret-env", "secret=§\n", fake("t2", 24), "secret"),
    planted("client-secret", 'oauth:\n  client_secret: "§"\n', fake("t3", 30), "secret"),
    # What today's list misses: passwords in URLs.
    planted(
        "postgres",
        "DATABASE_URL=postgres://app:§@db.internal:5432/app\n",
        fake("u1", 16),
        "password in a URL",
    ),
    planted(
        "https",
        "Clone from https://deploy:§@git.example.org/team/repo.git\n",
        fake("u2", 20),
        "password in a URL",
    ),
    planted(
        "mongodb-srv",
        "mongodb+srv://reporting:§@cluster0.ab1cd.mongodb.net/prod\n",
        fake("u3", 14),
        "password in a URL",
    ),
    planted("redis", "REDIS_URL=redis://:§@cache.internal:6379/0\n", fake("u4", 18), "password in a URL"),
    planted(
        "mysql",
        "The legacy box: mysql://root:§@10.0.0.5/app\n",
        "Hunter2!" + fake("u5", 4),
        "password in a URL",
    ),
    planted("amqp", "`amqp://worker:§@rabbit:5672/`\n", fake("u6", 12), "password in a URL"),
    # AWS secret keys and passwords assigned to a key.
    planted(
        "aws-secret-env", ".env:\n\nAWS_SECRET_ACCESS_KEY=§\n", fake("as1", 40, B64), "AWS secret access key"
    ),
    planted(
        "aws-secret-ini",
        "[default]\naws_secret_access_key = §\n",
        fake("as2", 40, B64),
        "AWS secret access key",
    ),
    planted("db-password-env", "DB_PASSWORD=§\n", fake("p1", 14), "password"),
    planted("password-yaml", "```yaml\ndb:\n  user: app\n  password: §\n```\n", "hunter2", "password"),
    planted(
        "db-password-frontmatter", "---\nname: {name}\ndb_password: §\n---\n", fake("p2", 12), "password"
    ),
    planted("pgpassword", "Run `PGPASSWORD=§ psql -h db`\n", fake("p3", 15), "password"),
    planted("json-password", '{"user": "etl", "password": "§"}\n', fake("p4", 16), "password"),
    planted("password-bold", "- **Password**: §\n", "Tr0ub4dor&3", "password"),
    planted("api-key-prose", "API key: §\n", fake("k3", 32), "API key"),
    planted("chinese-prose", FM + "数据库密码是 §，别外传。\n", "Qw3rty!9x", "password"),
    planted("chinese-colon", "测试环境的密码：§\n", "Zx9" + fake("cn", 8), "password"),
    # PGP, vendors.
    planted("pgp", "Signing key backup:\n\n§\n", pem("pgp", "PGP PRIVATE KEY BLOCK", 900), "private key"),
    planted("encrypted-pkcs8", "§\n", pem("enc", "ENCRYPTED PRIVATE KEY", 300), "private key"),
    planted("stripe-live", "STRIPE_SECRET_KEY=§\n", "sk_live_" + fake("st1", 99), "Stripe key"),
    planted(
        "stripe-restricted", "restricted key for reports: §\n", "rk_live_" + fake("st2", 24), "Stripe key"
    ),
    planted(
        "huggingface", "HF_TOKEN=§\n", "hf_" + fake("hf", 34, string.ascii_letters), "Hugging Face token"
    ),
    planted("gitlab", "GitLab PAT (read_api): §\n", "glpat-" + fake("gl", 20, ALNUM + "-_"), "GitLab token"),
    planted("npm-bare", "NPM_TOKEN=§\n", "npm_" + fake("n1", 36), "npm token"),
    planted(
        "npmrc", "~/.npmrc:\n\n    //registry.npmjs.org/:_authToken=§\n", "npm_" + fake("n2", 36), "npm token"
    ),
    planted(
        "sendgrid",
        "SendGrid: §\n",
        f"SG.{fake('sg1', 22, ALNUM + '-_')}.{fake('sg2', 43, ALNUM + '-_')}",
        "SendGrid API key",
    ),
    planted(
        "azure",
        "AZURE_STORAGE=DefaultEndpointsProtocol=https;AccountName=notesprod;AccountKey=§;EndpointSuffix=core.windows.net\n",
        fake("az", 86, B64) + "==",
        "Azure storage account key",
    ),
    planted(
        "telegram",
        "bot token §\n",
        fake("tg1", 10, string.digits) + ":AA" + fake("tg2", 33, ALNUM + "_-"),
        "Telegram bot token",
    ),
    planted("bearer", "curl -H 'Authorization: Bearer §' https://api.example.net\n", fake("br", 40), "token"),
    planted(
        "pypi",
        "~/.pypirc password = §\n",
        "pypi-AgEIcHlwaS5vcmc" + fake("py", 80, ALNUM + "-_"),
        "PyPI token",
    ),
    planted("artifactory", "artifactory: §\n", "AKCp8" + fake("af", 68), "Artifactory credential"),
    # Once known misses: a password in a sentence, in a flag, in a table.
    planted("prose", "The admin password is §, do not share it.\n", "Pw7&" + fake("pr", 8), "password"),
    planted("mysql-flag", "mysql -u root -p§ app\n", "Tr0ub4dor3", "password"),
    planted("table-row", "| password | § |\n", "hunter2Xy!", "password"),
    planted(
        "table-column",
        "| env | user | password |\n|---|---|---|\n| prod | admin | § |\n",
        "Zx9!" + fake("tc", 8),
        "password",
    ),
    planted("putty", "```\n§\n```\n", PUTTY, "private key"),
    # Separators, labels and places once missed: `=>` and `:=` read as `=`, the table labels
    # that the other label lists knew, a value on the line after its label.
    planted("php-array", "'password' => '§',\n", "Xy9!" + fake("php", 8), "password"),
    planted("go-assign", 'password := "§"\n', "Xy9!" + fake("go", 8), "password"),
    planted("php-semicolon", "$password = '§';\n", "Xy9!" + fake("php2", 8), "password"),
    planted("comparison", 'if "§" == password:\n', "Xy9!" + fake("cmp", 8), "password"),
    planted("quoted-with-blanks", 'secret = "§"\n', "Pq8 zz Lm2 " + fake("qb", 6), "secret"),
    planted("table-credentials", "| credentials | § |\n", "Xy9!" + fake("tcr", 8), "secret"),
    planted("table-passcode", "| passcode | § |\n", "Xy9!" + fake("tpc", 8), "password"),
    planted("table-pingju", "| 凭据 | § |\n", "Xy9!" + fake("tpj", 8), "secret"),
    planted("table-miyao", "| 密匙 | § |\n", "Xy9!" + fake("tmy", 8), "secret"),
    planted("passcode", "passcode: §\n", "Xy9!" + fake("pcd", 8), "password"),
    planted("next-line", "db:\n  password:\n    §\n", "Xy9!" + fake("nl", 8), "password"),
    planted("block-scalar", "password: |\n  §\n", "Xy9!" + fake("bs", 8), "password"),
    planted("emphasis", "- **token**: **§**\n", fake("em", 24), "token"),
    planted("prose-emphasis", "the password is **§**\n", "Xy9!" + fake("pe", 8), "password"),
    planted(
        "encrypted-pem-cut",
        "§\n",
        "\n".join(pem("encpem", "RSA PRIVATE KEY").split("\n")[:1])
        + "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
        + fake("dek", 32, "0123456789ABCDEF")
        + "\n\n"
        + "\n".join(pem("encpem", "RSA PRIVATE KEY").split("\n")[1:4]),
        "private key",
    ),
    planted(
        "pgp-cut",
        "§\n",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: backup of the signing key\n\n"
        + "\n".join(pem("pgpcut", "X").split("\n")[1:4]),
        "private key",
    ),
]
VALUES = [p.value for p in PLANTED]


def covering(p: Planted) -> list[secrets.Secret]:
    return [s for s in scan(p.text) if s.line == p.line and p.value in p.text[s.start : s.end]]


def test_the_planted_set_is_large_and_distinct() -> None:
    assert len(PLANTED) >= 40
    assert len({p.name for p in PLANTED}) == len(PLANTED)
    assert len(set(VALUES)) == len(VALUES)


@pytest.mark.parametrize("p", PLANTED, ids=[p.name for p in PLANTED])
def test_planted_secret_is_found_on_its_line(p: Planted) -> None:
    found = covering(p)
    assert found, [(s.line, s.kind, p.text[s.start : s.end]) for s in scan(p.text)]
    assert found[0].kind == p.kind
    assert found[0].digest == secrets._digest(p.text[found[0].start : found[0].end])


@pytest.mark.parametrize("p", PLANTED, ids=[p.name for p in PLANTED])
def test_the_pattern_pass_finds_every_planted_secret_too(p: Planted) -> None:
    """The prompt hook's pass, without detect-secrets: what it redacts in a file it indexes
    itself is what a full scan would."""
    every = secrets.scan_patterns(p.text)
    found = [s for s in every if s.line == p.line and p.value in p.text[s.start : s.end]]
    assert found, [(s.line, s.kind, p.text[s.start : s.end]) for s in every]


def test_recall_on_the_planted_set() -> None:
    missed = [p.name for p in PLANTED if not covering(p)]
    print(f"recall: {len(PLANTED) - len(missed)}/{len(PLANTED)}; missed: {missed}")
    assert not missed


# What nothing here finds, kept honest: if one starts being found, move it to PLANTED.
KNOWN_MISSES = [
    "| prod | admin | Tr0ub4dor&3 |",  # a table cell under no header
    "password: correct horse battery staple",  # an unquoted passphrase of plain words
    "password: sunshine",  # a password that is a plain word
    "pwd: ab12c",  # shorter than 6
]


@pytest.mark.parametrize("line", KNOWN_MISSES)
@pytest.mark.xfail(strict=True, reason="beyond what the detectors can tell from one line")
def test_known_misses(line: str) -> None:
    assert scan(line)


NOT_SECRETS = [
    "version: 3f2a9c1d4b5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
    "base: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Fixed in commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, see also abc1234.",
    "id: 123e4567-e89b-12d3-a456-426614174000",
    "session_id: 7f9c2ba4-e88f-11e4-9d2f-7a1b2c3d4e5f",
    "The API answers from 203.0.113.7 and 10.0.0.5.",
    "password: ${DB_PASSWORD}",
    "token: <your token>",
    "api_key: {{ secret }}",
    "API_KEY=xxxxxxxxxxxxxxxxxxxxxxxx",
    "password: ****",
    "secret: your-secret-here",
    'api_key = "example-key-123"',
    "password: changeme",
    "token: placeholder",
    "password: [REDACTED]",
    "api_key: sk-...4f2a",
    "Use AKIAIOSFODNN7EXAMPLE in docs (AWS's own example key).",
    "Reset your password from the admin panel; tokens expire after an hour.",
    "The API key is stored in 1Password, never in this repo.",
    "Password: ask Dana, it lives in Vault.",
    "**Password**: ask the on-call",
    "The secret: keep the index under 200 lines.",
    "Email dana@example.com about the token rotation: it runs on Mondays.",
    "See https://docs.python.org/3/library/secrets.html?highlight=token#module-secrets",
    "Clone with https://deploy@git.example.org/team/repo.git (no password, uses the SSH agent).",
    "git@github.com:org/repo.git",
    "http://localhost:8080/path?q=a:b@c",
    "postgres://user:password@localhost:5432/dev",
    "redis://localhost:6379/0",
    "The key is at /home/dana/.ssh/id_ed25519 and ~/.aws/credentials.",
    "private_key_path: ~/.ssh/id_ed25519",
    "api_key_env: OPENAI_API_KEY",
    'password = os.environ["DB_PASSWORD"]',
    'secret = get_secret("db")',
    "password: $DB_PASSWORD",
    "token = f'{TOKEN}'",
    "passwordless: true",
    "max_tokens: 4096",
    "tokenizer: jieba",
    "secret_santa: 2024-12-20",
    "token_url: https://auth.example.com/oauth/token",
    "auth header: X-Api-Key",
    "password_min_length: 12",
    "-----BEGIN PUBLIC KEY-----",
    "The deploy key file must start with `-----BEGIN OPENSSH PRIVATE KEY-----`.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGm1kQyW3n8yT0bq1v3Xk0u9Yk6mCk2a0hJtYp8r1Q2Z dana@laptop",
    "![chart](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "数据库密码在 Vault 里，不要写在这里。",
    "密码：见 1Password",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "password: hunter2  # pragma: allowlist secret",
    # Names in code: types, dotted paths, identifiers made of words.
    "token: AccessToken",
    "password: SecretStr",
    "def refresh(self, token: OAuthToken | None = None) -> None:",
    "api_key: _AzureApiKeyT | None,",
    "client_secret = self._client.client_secret",
    "api_key = cfg.openaiApiKey",
    "clientSecret: process.env.CLIENT_SECRET!",
    "secret: SecretString,",
    "keep_old_secret_active_for_24_hours: keep_old_secret_active_for_24_hours,",
    "private_key: Ed25519PrivateKey | Ed448PrivateKey",
    "credentials: AsyncCredentials,",
    "_X509_SUBJECT_TOKEN_TYPE = _X509_SUBJECT_TOKEN_TYPE",
    # Labels that name something about a secret, or another kind of token.
    "tokenizer: cl100k_base",
    "token_type: bearer",
    "secret_name: prod-db-creds-v2",
    "secretName: tls-cert-2024",
    "db_password_rotation: every-90-days",
    "token_endpoint: /oauth/token",
    "aws_credentials_provider: AwsCredentialsProvider",
    "token_hash: sha256 of the token, hex",
    "max_tokens_per_1_minute: 150000",
    "next_page_token: CiAKGjBpNDd2Nmp2Zml2cXRicnNrcGxwdm1iaQ",
    "curl https://api.example.com/v1/items?page_token=CiAKGjBpNDd2Nmp2Zml2cXRicnNrcGxwdm1iaQ",
    "continuation token: eyJwYWdlIjoyLCJzaXplIjo1MH0",
    "密钥长度：2048bit",
    "密钥版本为 v2-2024q3",
    # Slugs, paths and references, after labels that name a secret.
    "Tokens: tiktoken-0.7",
    "secret: k8s/prod-db",
    "S3 key: uploads/2024/03/report.pdf",
    "| Admin password | Vault:kv/admin |",
    "| Token | Scope |\n|---|---|\n| ci-deploy-2024 | repo |",
    "docker build --secret id=npmrc,src=$HOME/.npmrc .",
    'TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"',
    "cvs -d :pserver:anoncvs@cvs.example.org:/cvs/src login",
    'url = "https://jo%40email.com:a%20secret@www.example.com"',
    # Words with digits in a sentence, and names that look like vendors' tokens.
    "The token is RS256-signed.",
    "The OTP secret is base32 (RFC 4648).",
    "The secret to fast builds is sccache+S3.",
    "See the xoxb-token-rotation-runbook page before rotating.",
    "We use xoxe.xoxp-refresh-flow-notes from the wiki.",
    "The dp.st.prod-config-sync-service-account-v2 name is the Doppler service token's name.",
    # Emphasis that closes after a plain word, and a quoted phrase of words.
    "- It counts as **0 if fewer than 2 tokens are shared**.",
    '    "OpenAI Token": "OpenAI API key",',
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_look_alike_is_not_reported(text: str) -> None:
    assert scan(text) == [], [(s.kind, text[s.start : s.end]) for s in scan(text)]


def test_the_negative_set_is_large() -> None:
    assert len(NOT_SECRETS) >= 25


def test_memory_fixtures_hold_no_secret() -> None:
    for path in sorted((ROOT / "fixtures").rglob("*.md")):
        assert scan(path.read_text(encoding="utf-8")) == [], path


@pytest.mark.parametrize("alphabet", [ALNUM, ALNUM + "-_", string.ascii_letters, HEX, B64])
def test_random_values_after_a_label_are_still_found(alphabet: str) -> None:
    """The rules that drop names in code (`AccessToken`) must not drop what a generator makes:
    of random values after a label, almost all are found (a fixed seed: the count is exact)."""
    rng = random.Random(alphabet)
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(8, 41))) for _ in range(400)]
    missed = [v for v in values if not scan(f"password: {v}") or not scan(f'api_key = "{v}"')]
    assert len(missed) <= 400 * 5 // 100, missed[:10]


# --- spans, lines, digests -----------------------------------------------------------------


def test_a_token_is_its_whole_run() -> None:
    """detect-secrets' GitHub pattern reports `ghp` alone; two tokens must not share a digest."""
    one, two = "ghp_" + fake("x1", 36), "ghp_" + fake("x2", 36)
    found = scan(f"{one}\n{two}\n")
    assert [f"{one}\n{two}\n"[s.start : s.end] for s in found] == [one, two]
    assert found[0].digest != found[1].digest


def test_the_same_secret_elsewhere_has_the_same_digest() -> None:
    key = pem("same", "RSA PRIVATE KEY")
    token = "glpat-" + fake("same", 20)
    a = scan(f"x\n{token}\n{key}\n")
    b = scan(f"{key.replace(chr(10), chr(13) + chr(10) + '    ')}\r\n\r\nnote: {token} moved\r\n")
    assert {s.digest for s in a} == {s.digest for s in b} and len(a) == 2


def test_the_private_key_is_the_whole_block() -> None:
    key = pem("block", "OPENSSH PRIVATE KEY")
    text = f"before\n{key}\nafter\n"
    [found] = scan(text)
    assert text[found.start : found.end] == key and found.line == 2
    assert redact(text) == "before\n" + "\n".join([MARKER] * key.count("\n") + [MARKER]) + "\nafter\n"


def test_a_key_header_with_its_body_but_no_end_is_found() -> None:
    key = pem("cut", "RSA PRIVATE KEY")
    cut = "\n".join(key.split("\n")[:4])
    [found] = scan(f"pasted:\n{cut}\n")
    assert found.line == 2 and f"pasted:\n{cut}\n"[found.start : found.end] == cut


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_scan_takes_any_text(text: str) -> None:
    found = scan(text)
    assert [s.start for s in found] == sorted(s.start for s in found)
    for s, after in zip(found, found[1:], strict=False):
        assert s.end <= after.start
    for s in found:
        assert 0 <= s.start < s.end <= len(text)
        assert s.line == text.count("\n", 0, s.start) + 1


@pytest.mark.parametrize(
    "text",
    ["", "\n", "\r\n", "\ud800 lone surrogate password: Tr0ub\ud800dor3", "数据库" * 1000, "x" * 100_000],
)
def test_scan_takes_odd_texts(text: str) -> None:
    found = scan(text)
    assert redact(text, found).count("\n") == text.count("\n")
    assert all(s.digest for s in found)


def test_scan_takes_a_file_at_the_size_cap() -> None:
    corpus = "\n".join(p.text for p in PLANTED)
    text = (corpus * (512 * 1024 // len(corpus) + 1))[: 512 * 1024]
    found = scan(text)
    assert found and all(s.line == text.count("\n", 0, s.start) + 1 for s in found[:50])


@pytest.mark.parametrize("at", [0, 780, 795, 800, 990, 1000, 1590, 5000])
def test_a_labelled_value_in_a_long_line_is_found_wherever_it_is(at: int) -> None:
    """A line over 1000 characters is read in overlapping windows; none loses a short value."""
    line = "x " * (at // 2) + "password: Tr0ub4dor&3 " + "y " * 3000
    [found] = scan(line)
    assert line[found.start : found.end] == "Tr0ub4dor&3"


@pytest.mark.parametrize(
    "unit",
    ["secret", "secret: ; ", "pwd=!", 'api_key="', "AKIA", "ghp_", "eyJ", "token", "BEGIN PRIVATE KEY"],
)
def test_a_long_line_of_look_alikes_is_scanned_to_the_end(unit: str) -> None:
    """detect-secrets' keyword and JWT regexes, run as it runs them, take minutes on these
    (quadratic in the line). The scan runs in a process of its own with a generous limit, so
    a relapse fails here instead of stalling the suite; its speed is measured elsewhere, not
    asserted (docs/performance.md)."""
    code = f"from sagemem.store.secrets import scan; scan({unit!r} * (200_000 // {len(unit)})); print('done')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr


# --- redaction and new secrets -------------------------------------------------------------

filler = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
separators = st.sampled_from(["\n", "\r\n", " ", "\n\n", "\t", ": ", ""])


@st.composite
def notes(draw: st.DrawFn) -> str:
    """Planted lines and values among random text."""
    parts = draw(
        st.lists(
            st.one_of(filler, st.sampled_from(VALUES), st.sampled_from([p.text for p in PLANTED])),
            max_size=8,
        )
    )
    return "".join(part + draw(separators) for part in parts)


GLUED = PUTTY + next(p.value for p in PLANTED if p.name == "openai-proj")  # a key after `Private-MAC: <hex>`


@given(notes())
@example(GLUED)
@settings(max_examples=300, deadline=None)
def test_redaction_leaves_no_secret(text: str) -> None:
    assert scan(redact(text)) == []


@pytest.mark.parametrize("scanner", [scan, secrets.scan_patterns])
def test_a_secret_glued_to_another_is_redacted_with_it(scanner: Any) -> None:
    """Redaction must not leave half a run of token characters: `Private-MAC: <hex>sk-proj-...`
    is one run, and the key block that ends inside it takes in the rest."""
    found = scanner(GLUED)
    assert len(found) == 1 and GLUED[found[0].start : found[0].end].endswith(GLUED[-20:])
    assert scanner(redact(GLUED, found)) == []


@given(notes())
@settings(max_examples=300, deadline=None)
def test_redaction_keeps_every_other_character_and_every_line_ending(text: str) -> None:
    assert MARKER not in text
    found = scan(text)
    redacted = redact(text, found)
    expected, done = [], 0
    for s in found:
        expected += [text[done : s.start], re.sub(r"[^\r\n]", "", text[s.start : s.end])]
        done = s.end
    assert "".join(redacted.split(MARKER)) == "".join(expected) + text[done:]
    assert redacted.count("\n") == text.count("\n") and redacted.count("\r") == text.count("\r")


@given(notes())
@settings(max_examples=200, deadline=None)
def test_a_text_adds_nothing_to_itself(text: str) -> None:
    assert new_secrets(text, text) == []
    assert new_secrets(None, text) == scan(text)


@given(st.lists(st.sampled_from(PLANTED), min_size=2, max_size=5, unique=True), st.randoms())
@settings(max_examples=100, deadline=None)
def test_a_moved_secret_is_not_new_and_an_added_one_is(chosen: list[Planted], rng: random.Random) -> None:
    lines = ["# notes", *(p.text.rstrip("\n") for p in chosen[:-1]), "the end"]
    old = "\n".join(lines) + "\n"
    rng.shuffle(lines)
    assert new_secrets(old, "\n".join(lines) + "\n") == []
    added = chosen[-1]
    new = new_secrets(old, "\n".join(lines) + "\n" + added.text)
    assert (
        len(new) == 1 and added.value in (("\n".join(lines) + "\n" + added.text)[new[0].start : new[0].end])
    )


def test_a_placeholder_replaced_by_a_secret_is_new() -> None:
    old = "db:\n  password: ${DB_PASSWORD}\n"
    [added] = new_secrets(old, old.replace("${DB_PASSWORD}", "hunter2"))
    assert added.kind == "password" and added.line == 2


# --- faithful to detect-secrets -------------------------------------------------------------

line_fragments = st.one_of(
    st.sampled_from(VALUES),
    st.sampled_from(
        ["password", "PASSWD", "secret", "api_key", "apikey", "key_pass", "db_pass", "contraseña", "pwd"]
        + ["eyJ", "eyJhbGciOiJIUzI1NiJ9", "AKIA", "ghp_", "://", ":", "=", "==", "!=", ":=", "=>", ";"]
        + ['"', "'", "`", " ", "_", "-", ".", "@", "x", "7", "ſ", "\u212a", "(", ")", "[0]"]
    ),
    st.text(max_size=4),
)
lines = st.lists(line_fragments, max_size=14).map("".join).filter(lambda line: "\n" not in line)


@given(lines)
@settings(max_examples=600, deadline=None)
def test_each_plugin_finds_what_its_analyze_string_finds(line: str) -> None:
    """Our finders report spans where detect-secrets reports values; the values are the same."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.keyword import REGEX_BY_FILETYPE, KeywordDetector
    from detect_secrets.util.filetype import FileType

    classes = sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__)
    classes = [c for c in classes if c.__name__ not in secrets._LEFT_OUT]
    for cls, detector in zip(classes, secrets.detectors(), strict=False):  # built in this order, first
        plugin = cls()
        assert detector.kind == secrets._KINDS.get(plugin.secret_type, plugin.secret_type)
        if isinstance(plugin, KeywordDetector):
            theirs = plugin.analyze_string(line, denylist_regex_to_group=REGEX_BY_FILETYPE[FileType.YAML])
        else:
            theirs = plugin.analyze_string(line)
        assert {line[s:e] for s, e in detector.find(line)} == set(theirs) - {""}, cls.__name__


DENYLIST = ["api_key", "apikey", "auth_key", "service_key", "account_key", "db_key", "database_key"]
DENYLIST += ["priv_key", "private_key", "client_key", "db_pass", "database_pass", "key_pass", "password"]
DENYLIST += ["passwd", "pwd", "secret", "contraseña", "contrasena", "PASSWORD", "Secret", "ApiKey"]
plain_values = st.text(alphabet=ALNUM + "!#%&*+-./:=?@^_~$", min_size=1, max_size=24)
labelled_lines = st.builds(
    "{}{}{}{}{}{}{}{}".format,
    st.sampled_from(["", "DB_", "my", "app.", '"', "  - ", "export "]),
    st.sampled_from(DENYLIST),
    st.sampled_from(["", "_PROD", "Value", "_2", '"', "']", "]"]),
    st.sampled_from([":", ": ", " = ", "=", "==", " != ", "===", ":=", " := ", "=>", " => ", ":\t"]),
    st.shared(st.sampled_from(["", '"', "'", "`"]), key="quote"),
    st.one_of(
        st.sampled_from([v for v in VALUES if "\n" not in v] + ["Pq8 zz Lm2 kk", "ask Dana", "hunter2"]),
        plain_values,
        st.lists(plain_values, min_size=1, max_size=4).map(" ".join),
    ),
    st.shared(st.sampled_from(["", '"', "'", "`"]), key="quote"),
    st.sampled_from(["", ",", ";", " # note", ")", " and more", "  "]),
)
LABEL_KINDS = {"secret", "password", "API key", "token", "AWS secret access key", "key"}


@given(labelled_lines)
@settings(max_examples=500, deadline=None)
def test_the_pattern_pass_finds_what_detect_secrets_keyword_rule_finds(line: str) -> None:
    """What the full scan adds to the pattern pass in practice is detect-secrets' keyword rule
    (its token patterns find the same tokens as our shapes): after a label, quoted or not, with
    any of its separators, the pattern pass finds every value it finds, where it finds it."""
    full = {(s.start, s.end) for s in scan(line) if s.kind in LABEL_KINDS}
    assert full <= {(s.start, s.end) for s in secrets.scan_patterns(line)}


# --- the gates: reading only the marked lines loses nothing ---------------------------------


def test_every_detector_has_a_gate() -> None:
    """What makes a 512 KiB file cheap: no detector reads every line."""
    detectors = secrets.detectors()
    assert all(d.gate for d in detectors), [d.kind for d in detectors if not d.gate]


NEEDLES = sorted({needle for d in secrets.detectors() for needle, _ in d.gate or ()})
fragments = st.one_of(
    st.sampled_from(NEEDLES),
    st.sampled_from(NEEDLES).map(str.upper),
    st.sampled_from(VALUES),
    st.sampled_from(["ſ", "K", "İ", "ı", ": ", "=", "://", "@", '"', " ", "_", "-", "."]),
    st.text(max_size=6),
)


@given(st.lists(st.lists(fragments, max_size=8).map("".join), max_size=6).map("\n".join))
@settings(max_examples=500, deadline=None)
def test_gated_scan_finds_what_reading_every_line_finds(text: str) -> None:
    assert scan(text) == scan(text, gated=False)


def test_gated_scan_on_notes_and_shouted_notes() -> None:
    texts = [p.text for p in PLANTED] + [p.text.upper() for p in PLANTED]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.md"))]
    texts += [t.replace("s", "ſ").replace("k", "\u212a") for t in texts[: len(PLANTED)]]
    assert [scan(t) for t in texts] == [scan(t, gated=False) for t in texts]


def test_fold_matches_case_insensitive_regex_for_every_character() -> None:
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    folded = secrets._fold(everything)
    assert len(folded) == len(everything)
    lowercase = set(string.ascii_lowercase)
    as_letter = {m.start() for m in re.finditer("(?i)[a-z]", everything)}
    assert as_letter == {i for i, c in enumerate(folded) if c in lowercase}
    assert all(re.fullmatch("(?i)" + folded[i], everything[i]) for i in as_letter)
    ascii_elsewhere = {i for i, c in enumerate(folded) if c.isascii()} - as_letter
    assert ascii_elsewhere == {i for i in range(128)} - as_letter


# --- no network, no disk, no heavy imports -------------------------------------------------


def test_scanning_touches_neither_network_nor_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from detect_secrets.plugins.base import BasePlugin

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network or disk touched")

    real_open = builtins.open

    def read_only_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(c in mode for c in "wax+"):
            refuse()
        return real_open(file, mode, *args, **kwargs)

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(BasePlugin, "verify", refuse)
    monkeypatch.setattr(builtins, "open", read_only_open)
    secrets.detectors.cache_clear()
    try:
        assert all(covering(p) for p in PLANTED)
    finally:
        secrets.detectors.cache_clear()
    assert list(work.iterdir()) == []


def test_the_module_imports_nothing_heavy_until_it_scans() -> None:
    """Nor does the pattern pass, which the prompt hook runs: only a full scan loads detect-secrets."""
    code = (
        "import sys\n"
        "import sagemem.store.secrets as m\n"
        "names = {'detect_secrets', 'yaml', 'click', 'jieba', 'rjieba'}\n"
        "heavy = lambda: sorted({n.split('.')[0] for n in sys.modules} & names)\n"
        "print(heavy()); m.scan_patterns('password: hunter2'); print(heavy())\n"
        "m.scan('password: hunter2'); print(heavy())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]", "['detect_secrets']"]


def test_a_full_scan_leaves_pythons_warnings_as_they_were() -> None:
    """Importing detect-secrets captures warnings into logging, which silenced sagemem's own
    (a memory saved without its index line printed plain success): the scan undoes it."""
    code = (
        "import warnings\n"
        "shown = warnings.showwarning\n"
        "from sagemem.store.secrets import scan\n"
        "scan('password: hunter2x')\n"
        "print(warnings.showwarning is shown)\n"
        "warnings.warn('still heard')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "True\n" and "UserWarning: still heard" in done.stderr


def test_two_tokens_a_blank_apart_are_two_secrets() -> None:
    """Artifactory's pattern takes the blank after a token, which the next token's match
    needs before it: both are found, and redaction leaves neither."""
    token = "AKCp8rMGn2aPiBqOtAe6LzXgI3jrqKMxt40eDVa8onU8ujHonmJTvosBsdJ2T24Xct4NvCOM0"
    text = f"\n\n{token} {token}\n"
    assert [s.start for s in scan(text)] == [2, 3 + len(token)]
    assert scan(redact(text)) == []
