"""The shapes of secrets sagemem knows itself: vendors' token formats and the contexts that
say a value is a secret. `secrets.py` runs them; detect-secrets adds its own on a full scan.

Each shape is a regular expression kept as text, compiled only when a line holds one of its
`needles` (literals every match holds, lowercase for a case-insensitive shape): the prompt
hook imports this module, and most texts hold none of them. tests/test_secret_shapes.py
checks that the needles are implied by each pattern, and plants every shape.

A token's match need not cover all of it: a match grows to the whole run of token
characters it is in, so a minimum length is enough where a vendor documents an exact one.
Digits are `[0-9]`, not a digit class (which takes any script's): a token is ASCII, and every match
holds the run of 16 ASCII token characters that decides which lines a token shape reads.
The formats are the vendors' published ones (prefix, alphabet, length); where a vendor has
no prefix the key is found by its label instead (`HEROKU_API_KEY=<uuid>`, `token: ...`).
"""

from __future__ import annotations

from .records import Record

# How a finding is judged and named (the lowest rank names merged findings):
TOKEN = 0  # a vendor's token shape: its prefix says it all
URL = 1  # a password in a URL
LABEL = 2  # a value after a label that names a secret (`password:`, `token =`, 密码是)
KEY = 3  # a value after a label that only may (`signing_key:`): kept only if it looks random
PROSE = 4  # a password in a sentence (`the password is ...`): kept only if it looks like one


class Shape(Record):
    kind: str
    pattern: str  # the group named `value`, else group 1, if there is one, is the value; else the match
    needles: tuple[str, ...]
    rank: int = TOKEN
    fold: bool = False  # case-insensitive (its needles are lowercase)
    check: str = ""  # a further test of the value: "basic" (base64 of `user:password`)
    needs: tuple[str, ...] = ()  # one of these is in every line it matches, too (a separator)
    hanging: str = ""  # a line that ends with a label: its value is on the next line (YAML)


_AFTER = r"(?<![A-Za-z0-9])"  # a token may follow `_` or `-`: `reference_ghp_...`


def _tokens(kind: str, *patterns: str, needles: tuple[str, ...] = ()) -> list[Shape]:
    """Shapes of one kind, each found by `needles`, else by the literal its pattern starts
    with. A leading `\\b` becomes `_AFTER`."""
    found = []
    for pattern in patterns:
        if pattern.startswith("\\b"):
            pattern = _AFTER + pattern[2:]
        found.append(Shape(kind, pattern, needles or (_literal(pattern),)))
    return found


def _literal(pattern: str) -> str:
    """The literal text a pattern starts with, after a lookbehind."""
    at = pattern.index(")") + 1 if pattern.startswith("(?<") else 0
    literal = []
    while at < len(pattern):
        ch = pattern[at]
        if ch == "\\" and pattern[at + 1 : at + 2] in (".", "/", "-"):
            literal.append(pattern[at + 1])
            at += 2
        elif ch.isalnum() or ch in "_-/:~":
            literal.append(ch)
            at += 1
        else:
            break
    return "".join(literal)


SHAPES: tuple[Shape, ...] = (
    # --- AI providers
    *_tokens("OpenAI API key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    *_tokens("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    *_tokens("OpenRouter API key", r"\bsk-or-v1-[0-9a-f]{32,}"),
    *_tokens("API key", r"\bsk-[A-Za-z0-9]{32,}"),  # OpenAI's older keys, DeepSeek, Moonshot, DashScope
    *_tokens("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    *_tokens("Groq API key", r"\bgsk_[A-Za-z0-9]{40,}"),
    *_tokens("xAI API key", r"\bxai-[A-Za-z0-9]{60,}"),
    *_tokens("Perplexity API key", r"\bpplx-[A-Za-z0-9]{40,}"),
    *_tokens("Replicate API token", r"\br8_[A-Za-z0-9]{30,}"),
    *_tokens("Baidu Qianfan API key", r"\bbce-v3/ALTAK-[A-Za-z0-9]{16,}/[0-9a-f]{32,}"),
    # --- code hosts and package registries
    *_tokens(
        "GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}", needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
    ),
    *_tokens("GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    *_tokens(
        "GitLab token",
        r"\bgl(?:pat|dt|rt|ptt|ft|soat|oas|cbt|imt|agent|ffct|wt)-[A-Za-z0-9_-]{20,}",
        needles=tuple(f"gl{t}-" for t in "pat dt rt ptt ft soat oas cbt imt agent ffct wt".split()),
    ),
    *_tokens("GitLab token", r"\bGR1348941[A-Za-z0-9_-]{20,}"),
    *_tokens("Bitbucket app password", r"\bATBB[A-Za-z0-9]{28,}"),
    *_tokens("Atlassian API token", r"\bAT(?:ATT|CTT)3[A-Za-z0-9_=-]{60,}", needles=("ATATT3", "ATCTT3")),
    *_tokens("npm token", r"\bnpm_[A-Za-z0-9]{36}"),
    *_tokens("PyPI token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    *_tokens("RubyGems API key", r"\brubygems_[0-9a-f]{48}"),
    *_tokens("NuGet API key", r"\boy2[a-z0-9]{43}"),
    *_tokens("Docker Hub token", r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"),
    *_tokens("Artifactory credential", r"\bAKCp[A-Za-z0-9]{64,}", r"\bcmVmdGtuOjAxOj[A-Za-z0-9]{40,}"),
    *_tokens(
        "Terraform Cloud token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", needles=(".atlasv1.",)
    ),
    *_tokens("Buildkite token", r"\bbkua_[0-9a-f]{40}"),
    *_tokens("CircleCI token", r"\bCCIPAT_[A-Za-z0-9]{20,}_[0-9a-f]{40}"),
    *_tokens("Sourcegraph token", r"\bsgp_[0-9a-f]{16,}_?[0-9a-f]{40}"),
    # --- clouds
    *_tokens(
        "AWS key",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        needles=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    *_tokens("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    *_tokens("Google OAuth client secret", r"\bGOCSPX-[A-Za-z0-9_-]{24,}"),
    *_tokens("Google OAuth token", r"\bya29\.[A-Za-z0-9_-]{30,}", r"\b1//0[A-Za-z0-9_-]{40,}"),
    Shape(
        "Azure storage account key",
        r"(?i)\baccountkey=([A-Za-z0-9+/]{80,}={0,2})",
        ("accountkey=",),
        fold=True,
    ),
    Shape(
        "Azure shared access key",
        r"(?i)\bsharedaccesskey=([A-Za-z0-9+/]{40,}={0,2})",
        ("sharedaccesskey=",),
        fold=True,
    ),
    Shape("Azure SAS signature", r"[?&]sig=([A-Za-z0-9%+/]{30,}(?:%3D|=){0,2})", ("sig=",)),
    Shape("Azure client secret", r"\b[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", ("Q~",)),
    *_tokens("DigitalOcean token", r"\bdo[opr]_v1_[0-9a-f]{64}", needles=("_v1_",)),
    *_tokens("Cloudflare API token", r"\bcf(?:k|ut|at)_[A-Za-z0-9]{40}", needles=("cfk_", "cfut_", "cfat_")),
    *_tokens("Cloudflare origin CA key", r"\bv1\.0-[0-9a-f]{24}-[0-9a-f]{100,}", needles=("v1.0-",)),
    *_tokens("Heroku API key", r"\bHRKU-[A-Za-z0-9_-]{20,}"),
    *_tokens("Fly.io token", r"\bfm[12][ar]?_[A-Za-z0-9+/=_-]{40,}", needles=("fm1", "fm2")),
    *_tokens("Fly.io token", r"\bfo1_[A-Za-z0-9_-]{40,}"),
    *_tokens("Netlify token", r"\bnfp_[A-Za-z0-9]{36,}"),
    *_tokens("Alibaba Cloud AccessKey", r"\bLTAI[A-Za-z0-9]{12,28}\b"),
    *_tokens("Tencent Cloud SecretId", r"\bAKID[A-Za-z0-9]{28,40}\b"),
    *_tokens("Volcengine AccessKey", r"\bAKLT[A-Za-z0-9_-]{30,}"),
    *_tokens("JD Cloud AccessKey", r"\bJDC_[0-9A-F]{28}\b"),
    # --- databases, secrets managers, infrastructure
    *_tokens("Databricks token", r"\bdapi[0-9a-f]{32}"),
    *_tokens("Vault token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}", needles=("hvs.", "hvb.", "hvr.")),
    *_tokens(
        "Doppler token",
        r"\bdp\.(?:st|pt|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,60}\.)?[A-Za-z0-9]{40,}",
        needles=("dp.",),
    ),
    *_tokens("Pulumi token", r"\bpul-[0-9a-f]{40}"),
    *_tokens("PlanetScale token", r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}"),
    *_tokens("Supabase token", r"\bsbp_[0-9a-f]{40}", r"\bsb_secret_[A-Za-z0-9_-]{20,}"),
    *_tokens("Tailscale key", r"\btskey-(?:api|auth|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{10,}"),
    *_tokens("age secret key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    *_tokens("Grafana token", r"\bglsa_[A-Za-z0-9]{32}_[0-9a-f]{8}", r"\bglc_[A-Za-z0-9+/=_-]{32,}"),
    *_tokens("New Relic key", r"\bNR(?:AK|AA|II)-[A-Z0-9]{27}", needles=("NRAK-", "NRAA-", "NRII-")),
    *_tokens("New Relic key", r"\bNRJS-[0-9a-f]{19}"),
    *_tokens("Sentry token", r"\bsntry[su]_[A-Za-z0-9+/=_-]{40,}"),
    *_tokens("Dynatrace token", r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    *_tokens("Okta token", r"\bSSWS[ \t]+00[A-Za-z0-9_-]{40}"),
    Shape(
        "SoftLayer credential",
        r"(?i)\b(?:softlayer|sl)[_-]?(?:api[_-]?)?(?:key|pwd|password|pass|token)\w*[ \t]*[:=]+[ \t]*"
        r"['\"]?([a-z0-9]{64})\b",
        ("softlayer", "sl"),
        fold=True,
    ),
    # --- payments, commerce, mail, messaging
    *_tokens("Stripe key", r"\b[rs]k_live_[A-Za-z0-9]{20,}", needles=("k_live_",)),
    *_tokens("Stripe key", r"\b[rs]k_test_[A-Za-z0-9]{32,}", needles=("k_test_",)),
    *_tokens("Stripe webhook secret", r"\bwhsec_[A-Za-z0-9+/]{32,}"),
    *_tokens("Square token", r"\bsq0(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}", r"\bEAAA[A-Za-z0-9_-]{60,}"),
    *_tokens("Shopify token", r"\bshp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}"),
    *_tokens("Shippo token", r"\bshippo_(?:live|test)_[0-9a-f]{40}"),
    *_tokens("Mailgun API key", r"(?<![\w-])key-[0-9a-f]{32}"),
    Shape("Mailgun API key", r"(?<![\w-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w-])", ("-",)),
    *_tokens("SendGrid API key", r"\bSG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{40,}", needles=("SG.",)),
    Shape("Mailchimp key", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b", ("-us",)),
    *_tokens(
        "Brevo API key",
        r"\bx(?:keysib|smtpsib)-[0-9a-f]{64}-[A-Za-z0-9]{16}",
        needles=("keysib-", "smtpsib-"),
    ),
    *_tokens("Postman API key", r"\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    *_tokens("Twilio API key", r"\bSK[0-9a-fA-F]{32}\b", r"\bAC[0-9a-f]{32}\b"),
    *_tokens(
        "Slack token",
        r"\bxox[abposre]-[0-9]+-[A-Za-z0-9-]{10,}",  # its digit groups: `xoxb-token-notes` is a page's name
        r"\bxoxe\.xox[bp]-[0-9]+-[A-Za-z0-9-]{10,}",
        r"\bxapp-[0-9]-[A-Z0-9]{6,}-[0-9]{6,}-[0-9a-f]{20,}",
        r"\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
    ),
    *_tokens(
        "Discord webhook",
        r"\bhttps://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{15,22}/[A-Za-z0-9_-]{40,}",
        needles=("/api/webhooks/",),
    ),
    Shape("Discord bot token", r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}", (".",)),
    Shape("Telegram bot token", r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{32,}", (":AA",)),
    Shape(
        "Microsoft Teams webhook",
        r"\bhttps://[A-Za-z0-9.-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{60,}",
        (".webhook.office.com/",),
    ),
    *_tokens(
        "WeCom webhook", r"\bhttps://qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?key=[A-Za-z0-9-]{20,}"
    ),
    *_tokens(
        "Feishu webhook",
        r"\bhttps://open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/[A-Za-z0-9-]{20,}",
        needles=("/open-apis/bot/v2/hook/",),
    ),
    *_tokens("DingTalk webhook", r"\bhttps://oapi\.dingtalk\.com/robot/send\?access_token=[0-9a-f]{40,}"),
    *_tokens("DingTalk robot secret", r"\bSEC[0-9a-f]{64}\b"),
    *_tokens("Facebook access token", r"\bEAA[A-Za-z0-9]{100,}"),
    *_tokens("Twitter bearer token", r"\bAAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,}"),
    *_tokens("Mapbox secret token", r"\bsk\.eyJ[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,}", needles=("sk.eyJ",)),
    # --- work tools
    *_tokens("Linear API key", r"\blin_(?:api|oauth)_[A-Za-z0-9]{40,}"),
    *_tokens("Notion token", r"\bntn_[A-Za-z0-9]{40,}", r"\bsecret_[A-Za-z0-9]{43}\b"),
    *_tokens("Airtable token", r"\bpat[A-Za-z0-9]{14}\.[0-9a-f]{64}"),
    *_tokens("Dropbox token", r"\bsl\.(?:u\.)?[A-Za-z0-9_-]{100,}", needles=("sl.",)),
    *_tokens("Figma token", r"\bfigd_[A-Za-z0-9_-]{38,}"),
    *_tokens("Contentful token", r"\bCFPAT-[A-Za-z0-9_-]{40,}"),
    *_tokens("Typeform token", r"\btfp_[A-Za-z0-9_.-]{40,}"),
    Shape("Asana token", r"\b[12]/[0-9]{10,}(?:/[0-9]{10,})?:[0-9a-f]{32}\b", (":",)),
    # --- keys and JSON web tokens
    Shape(
        "private key",
        r"BEGIN[ A-Z0-9]{0,40}PRIVATE KEY|PuTTY-User-Key-File-[0-9]",
        ("BEGIN", "PuTTY-User-Key-File-"),
    ),
    Shape("JSON web token", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("eyJ",)),
    # --- passwords in URLs and command lines
    Shape(
        "password in a URL",
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#\[\]@]*:([^\s/?#\[\]@]+)@",
        ("://",),
        URL,
    ),
    Shape(
        "password",
        r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?[ \t]-p([^\s'\"-][^\s'\"]{5,})",
        ("mysql", "mariadb"),
        LABEL,
        True,
    ),
    Shape("password", r"(?i)\bsshpass[ \t]+-p[ \t]*['\"]?([^\s'\"]{6,})", ("sshpass",), LABEL, True),
    Shape(
        "password",
        r"(?i)\bcurl\b[^\n]*?[ \t](?:-u|--user)[ \t]*['\"]?[^\s:'\"]+:([^\s'\"@]{6,})",
        ("curl",),
        LABEL,
        True,
    ),
    Shape(
        "password", r"(?i)\blogin[ \t]+\S+[ \t]+password[ \t]+['\"]?([^\s'\"]{6,})", ("login",), LABEL, True
    ),
    Shape(
        "secret",
        r"(?i)(?<![\w-])--(?:password|passwd|pass|pwd|token|auth-token|api-key|secret|client-secret)"
        r"(?:=|[ \t]+)['\"]?([^\s'\"]{6,})",
        ("--",),
        LABEL,
        True,
    ),
    Shape(
        "password in a Basic auth header",
        r"(?i)\bbasic[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
        ("basic",),
        LABEL,
        True,
        "basic",
    ),
    Shape("token", r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)", ("bearer",), LABEL, True),
)

# --- labels: one table of the words that name a secret; every label pattern below, and how
# secrets.py judges and names a label, is built from these tables.


class Word(Record):
    pattern: str  # a regular expression: lowercase ASCII, matched case-insensitively, or CJK
    kind: str  # what a value after it is named
    prose: bool = True  # it names a secret in a sentence too (`the password is ...`)


# A word may sit inside a longer name (`DB_PASSWORD`, `SECRET_KEY_BASE`, `appSecret`, `PGPASSWORD`).
WORDS: tuple[Word, ...] = (
    Word("password", "password"),
    Word("passwd", "password"),
    Word("passphrase", "password"),
    Word("passcode", "password"),
    Word("pwd", "password"),
    Word(r"(?<![a-z])pass(?![a-z])", "password", prose=False),  # `DB_PASS`, not `passport`
    Word(r"(?:db|database|key)[ _.-]?pass", "password", prose=False),
    Word("contrase(?:ñ|n)a", "password"),
    Word("secret", "secret"),
    Word("token", "token"),
    Word("credentials?", "secret"),
    Word(r"api[ _.-]?keys?", "API key"),
    Word(r"(?:access|auth|priv(?:ate)?|client|service|account|db|database|secret)[ _.-]?keys?", "secret"),
)
# Chinese labels are a shape of their own: its pattern is compiled only for a text that holds
# one of them, and a Chinese note need not pay for the English alternation.
CHINESE_WORDS: tuple[Word, ...] = (
    Word("密码", "password"),
    Word("口令", "password"),
    Word("密钥", "secret"),
    Word("秘钥", "secret"),
    Word("密匙", "secret"),
    Word("令牌", "token"),
    Word("凭证", "secret"),
    Word("凭据", "secret"),
)
# Words after a label's word that make it name something about the secret or around it, not
# the secret: what it is called or is (`token_type`, `secret_name`), where it is or comes from
# (`token_endpoint`, `credentials_provider`), what handles it (`token_verifier`), facts about it
# (`password_min_length`, `token_hash`, `db_password_rotation`, `token_limits`).
NOT_THE_SECRET = frozenset(
    """name names type types kind class format label alias version scheme algorithm alg
    url urls uri endpoint path file files dir folder location env var variable header field param
    parameter arg source store ref reference provider manager service backend client server host
    issuer audience verifier validator handler factory generator helper loader reader writer cache
    callback hook command method mode strategy hash hashed digest fingerprint checksum salt hint
    prompt length size strength policy rule rules regex pattern min max count limit limits budget
    quota usage details info stats ttl expiry expires expiration expired lifetime age rotation
    rotated reset changed updated created enabled disabled required set exists per""".split()
)
# Words before it that make it another kind of token: a page's, a stream's, a model's.
NOT_THE_SECRET_BEFORE = frozenset(
    """page next prev previous continuation resumption cursor pagination progress sync max min
    input output total num prompt completion cached reasoning context special stop pad eos bos unk
    mask sep cls""".split()
)
CHINESE_NOT_THE_SECRET: tuple[str, ...] = (
    "长度",
    "版本",
    "类型",
    "名称",
    "名字",
    "格式",
    "位数",
    "算法",
    "有效期",
    "过期",
)
CHINESE_NOT_THE_SECRET += ("路径", "地址", "文件", "策略", "强度", "规则", "提示", "管理", "轮换")
# A name for a value after a label, by the last of these before it (else the word's kind).
NAMES = (("AWS secret access key", r"aws\w*secret|secret\w*access\w*key"),)
# Words before `key` that say the key is a secret one (`signing_key`, `ENCRYPTION_KEY`), and
# words that say it is not (`public_key`, `sort_key`, `cache_key`, a fingerprint).
KEY_QUALIFIERS = (
    "api auth access secret private priv master signing sign encryption encrypt enc crypt hmac client"
    " app service account session license licence deploy webhook admin root cookie jwt aes rsa gpg"
    " pgp ssh storage shared server"
).split()
NOT_SECRET_KEYS = (
    "pub fingerprint hash checksum digest sort primary foreign partition cache idempoten shard"
    " routing lookup index unique dedup object bucket redis cursor etag"
).split()
# What may stand between a label and its value, longest first (`:=` before `:`). A character
# class holding a non-ASCII character costs milliseconds to compile, so CJK separators stand
# in alternatives of their own.
SEPARATORS: tuple[str, ...] = (
    "===",
    "!==",
    "==",
    "!=",
    "=>",
    ":=",
    ":",
    "=",
    "：",
    "就是",
    "设置为",
    "改成",
    "改为",
    "设为",
)
SEPARATORS += ("是", "为")


def _alternation(words: tuple[Word, ...], prose: bool = False) -> str:
    return "|".join(w.pattern for w in words if w.prose or not prose)


_STRONG_WORDS = _alternation(WORDS)
_CHINESE_WORDS = _alternation(CHINESE_WORDS)
_SEPARATOR = "(?:" + "|".join(SEPARATORS) + ")"
# Printable ASCII up to a quote or backtick, not beginning with emphasis (`**Password**: ...`).
_VALUE = r"(?P<value>(?![\"'`*])[!-~](?:(?![\"'`])[!-~])*)"
_AFTER_LABEL = (
    rf"[\w.-]{{0,40}}?[*_]{{0,2}}(?:[\])'\"]|）){{0,2}}[ \t]*{_SEPARATOR}"  # `DB_PASSWORD`, `"password":`
    rf"[*_]{{0,2}}[ \t]*[*_]{{0,2}}['\"`]?{_VALUE}"  # `: **hunter2**`, `= "hunter2"`
)
_NEEDS = (":", "=", "：", "是", "为", "改")
# A label that ends its line, its value on the next (`password:` then `  hunter2`, or a YAML
# block scalar, `password: |`).
_HANGING = r"[\w.-]{0,40}?['\"]?[ \t]*(?::|=|：)[ \t]*(?:[|>][-+]?)?[ \t]*$"
_KEY_LINE = r"^[ \t]*(?:-[ \t]+)?['\"]?[\w.-]*?"  # the line holds the key alone (not `class X:`)
LABELLED = Shape(
    "secret",
    rf"(?i)(?:{_STRONG_WORDS}){_AFTER_LABEL}",
    ("pass", "pwd", "secret", "token", "key", "credential", "contrase"),
    LABEL,
    True,
    needs=_NEEDS,
    hanging=rf"(?i){_KEY_LINE}(?:{_STRONG_WORDS}){_HANGING}",
)
LABELLED_CHINESE = Shape(
    "secret",
    f"(?:{_CHINESE_WORDS}){_AFTER_LABEL}",
    tuple(w.pattern for w in CHINESE_WORDS),
    LABEL,
    needs=_NEEDS,
    hanging=f"{_KEY_LINE}(?:{_CHINESE_WORDS}){_HANGING}",
)
# A quoted value compared with a label (`"..." == password`), and a quoted value ending a
# statement after one (`setPassword("...");`): detect-secrets' other two keyword rules.
COMPARED = Shape(
    "secret",
    rf"(?i)(?P<quote>['\"`])(?P<value>\w[^'\"\n]*[^,'\"`\n]|\w)(?P=quote)[ \t]*(?:===|!==|==|!=)[ \t]*\w*"
    rf"(?:{_STRONG_WORDS})",
    ("pass", "pwd", "secret", "token", "key", "credential", "contrase"),
    LABEL,
    True,
    needs=("==", "!="),
)
STATEMENT = Shape(
    "secret",
    rf"(?i)(?:{_STRONG_WORDS})\w*\S{{0,50}}?[ \t]*(?P<quote>['\"`])(?P<value>\w[^'\"\n]*[^,'\"`\n]|\w)"
    r"(?P=quote);",
    ("pass", "pwd", "secret", "token", "key", "credential", "contrase"),
    LABEL,
    True,
    needs=(";",),
)
# A label that may name a key: `signing_key`, `ENCRYPTION_KEY`, `masterKey`, `key` alone.
_KEY_WORDS = rf"(?:{'|'.join(KEY_QUALIFIERS)})[ _.-]?keys?|(?<![a-z])keys?(?![a-z])"
KEYLIKE = Shape(
    "key",
    rf"(?i)(?:{_KEY_WORDS})(?:[_.-](?:b64|base64|hex|value|data))?[*_]{{0,2}}[\]'\"]{{0,2}}[ \t]*"
    rf"(?:=>|[:=]|：)[*_]{{0,2}}[ \t]*['\"`]?(?:base64:)?([A-Za-z0-9+/_-]{{16,}}={{0,2}})",
    ("key",),
    KEY,
    True,
    needs=(":", "=", "："),
)
# A password in a sentence: `the password is ...`, `password for the admin console is ...`.
PROSE_SHAPE = Shape(
    "password",
    rf"(?i)\b(?:{_alternation(WORDS, prose=True)})s?"
    r"(?:[ \t]+(?:for|of|to|on)[ \t]+(?:the[ \t]+)?[\w.@-]+(?:[ \t]+[\w.@-]+){0,3}?)?"
    r"[ \t]+(?:is|was|are|reads|=)[ \t]+(?:now[ \t]+|still[ \t]+|set[ \t]+to[ \t]+)?[*_]{0,2}['\"`]?"
    + _VALUE,
    ("pass", "pwd", "key", "secret", "token", "credential", "contrase"),
    PROSE,
    True,
    needs=("is", "was", "are", "reads", "="),
)
SHAPES += (LABELLED, LABELLED_CHINESE, COMPARED, STATEMENT, KEYLIKE, PROSE_SHAPE)

# Labels of Markdown tables: `| password | hunter2Xy! |`, or a column headed so.
TABLE_LABEL = rf"(?i)^[\s*_`]*(?:[\w-]+[ _-]){{0,2}}?(?:{_STRONG_WORDS}|{_CHINESE_WORDS})[\s*_`]*$"
