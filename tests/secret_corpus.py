"""The shared corpora of the credential detector (tests/unit/test_credentials.py and the real-path
tests in tests/integration/test_secret_paths.py).

Positives: forms of real secrets an agent meets, each a sentence or a line around a body drawn
from a seeded `random.Random` (alphabet and length right for its format), so no fixed string can be
special-cased and a failure reproduces from its seed. Every vendor prefix is put together at run
time, so secret scanners do not take this file for a leak. Negatives: text that must pass —
hashes, ids, paths, versions, images in base64, the eval's memories, 300 lines of engineering
notes, and prose about secrets that holds none.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

FAMILIES = ("vendor_token", "command_line", "header", "connection_string", "env_assignment", "pem_block", "jwt",
            "keyword_entropy")
ROOT = Path(__file__).resolve().parents[1]
NOTES = Path(__file__).parent / "fixtures" / "secrets" / "engineering_notes.txt"

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
PW_SYMBOLS = "!@#%^&*_-"


@dataclass(frozen=True)
class Form:
    family: str
    name: str
    make: Callable[[random.Random], tuple[str, str]]


def rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def password(rng: random.Random) -> str:
    """A person's password: 10-24 characters of letters, digits and a few symbols, every class present."""
    n = rng.randint(10, 24)
    core = [rng.choice(string.ascii_lowercase), rng.choice(string.ascii_uppercase), rng.choice(string.digits),
            rng.choice(PW_SYMBOLS)] + [rng.choice(ALNUM + PW_SYMBOLS) for _ in range(n - 4)]
    rng.shuffle(core)
    return "".join(core)


def b64(rng: random.Random, nbytes: int) -> str:
    return base64.b64encode(rng.randbytes(nbytes)).decode()


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    claims = {"sub": str(rng.randint(1, 10**9)), "iat": rng.randint(1_600_000_000, 1_800_000_000),
              "scope": rng.choice(["read", "admin", "billing:write"])}
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode()),
                     b64url(rng.randbytes(32))])


def pem(rng: random.Random, label: str) -> tuple[str, str]:
    body_lines = [b64(rng, 48) for _ in range(rng.randint(4, 9))]
    body = "\n".join(body_lines)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body_lines[1]


def vendor(name: str, prefix: tuple[str, ...], body: Callable[[random.Random], str],
           sentence: str = "Use {s} for it.") -> Form:
    def make(rng: random.Random) -> tuple[str, str]:
        secret = "".join(prefix) + body(rng)
        return sentence.format(s=secret), secret
    return Form("vendor_token", name, make)


def env_line(name: str, value: Callable[[random.Random], str], template: str = "{n}={v}",
             family: str = "env_assignment") -> Form:
    def make(rng: random.Random) -> tuple[str, str]:
        secret = value(rng)
        return template.format(n=name, v=secret), secret
    return Form(family, name.lower().replace("_", "-") + "-" + template[:6].strip("{}= "), make)


def shaped(family: str, name: str, template: str, value: Callable[[random.Random], str]) -> Form:
    def make(rng: random.Random) -> tuple[str, str]:
        secret = value(rng)
        return template.format(s=secret), secret
    return Form(family, name, make)


def _vendor_forms() -> list[Form]:
    n = rand
    return [
        vendor("openai-key", ("sk-",), lambda r: n(r, 48), "The OpenAI key is {s}."),
        vendor("openai-project-key", ("sk-", "proj-"), lambda r: n(r, 56, URLSAFE)),
        vendor("anthropic-key", ("sk-", "ant-", "api03-"), lambda r: n(r, 80, URLSAFE), "ANTHROPIC_API_KEY={s}"),
        vendor("github-classic", ("gh", "p_"), lambda r: n(r, 36), "Clone with {s} as the password."),
        vendor("github-oauth", ("gh", "o_"), lambda r: n(r, 36)),
        vendor("github-app-user", ("gh", "u_"), lambda r: n(r, 36)),
        vendor("github-app-server", ("gh", "s_"), lambda r: n(r, 36), "GH_TOKEN={s}"),
        vendor("github-refresh", ("gh", "r_"), lambda r: n(r, 36)),
        vendor("github-fine-grained", ("github", "_pat_"), lambda r: n(r, 22) + "_" + n(r, 59)),
        vendor("gitlab-pat", ("gl", "pat-"), lambda r: n(r, 20, URLSAFE)),
        vendor("gitlab-deploy", ("gl", "dt-"), lambda r: n(r, 20, URLSAFE), "Deploy token: {s}"),
        vendor("gitlab-runner", ("gl", "rt-"), lambda r: n(r, 20, URLSAFE)),
        vendor("aws-akia", ("AK", "IA"), lambda r: n(r, 16, UPPER_ALNUM), "aws_access_key_id {s}"),
        vendor("aws-asia", ("AS", "IA"), lambda r: n(r, 16, UPPER_ALNUM), "The temporary key {s} expires at noon."),
        vendor("slack-bot", ("xo", "xb-"), lambda r: f"{r.randint(10**9, 10**10)}-{r.randint(10**9, 10**10)}-"
                                                     + n(r, 24)),
        vendor("slack-user", ("xo", "xp-"), lambda r: f"{r.randint(10**9, 10**10)}-" + n(r, 32)),
        vendor("slack-app", ("xa", "pp-"), lambda r: f"1-A{n(r, 10, UPPER_ALNUM)}-{r.randint(10**9, 10**10)}-"
                                                     + n(r, 64, HEX)),
        vendor("slack-webhook", ("https://hooks.", "slack.com/services/"),
               lambda r: f"T{n(r, 8, UPPER_ALNUM)}/B{n(r, 10, UPPER_ALNUM)}/{n(r, 24)}", "Alerts post to {s}"),
        vendor("stripe-live", ("sk", "_live_"), lambda r: n(r, r.randint(24, 99)), "Payments use {s} in production."),
        vendor("stripe-test", ("sk", "_test_"), lambda r: n(r, 24)),
        vendor("stripe-restricted", ("rk", "_live_"), lambda r: n(r, 24)),
        vendor("stripe-webhook", ("wh", "sec_"), lambda r: n(r, 32), "STRIPE_WEBHOOK_SECRET={s}"),
        vendor("npm", ("np", "m_"), lambda r: n(r, 36), "Publish with the npm token {s}."),
        vendor("pypi", ("py", "pi-", "AgEIcHlwaS5vcmc"), lambda r: n(r, 70, URLSAFE), "twine upload -p {s} dist/*"),
        vendor("huggingface", ("h", "f_"), lambda r: n(r, 34, string.ascii_letters), "The model hub token is {s}."),
        vendor("sendgrid", ("S", "G."), lambda r: n(r, 22, URLSAFE) + "." + n(r, 43, URLSAFE),
               "Mail goes out through SendGrid key {s}."),
        vendor("mailgun", ("ke", "y-"), lambda r: n(r, 32, HEX)),
        vendor("twilio", ("S", "K"), lambda r: n(r, 32, HEX), "Twilio API key {s}"),
        vendor("google-api", ("AI", "za"), lambda r: n(r, 35, URLSAFE), "Maps use {s} in the frontend."),
        vendor("google-oauth-secret", ("GOC", "SPX-"), lambda r: n(r, 28, URLSAFE)),
        vendor("google-oauth-token", ("ya", "29."), lambda r: n(r, 120, URLSAFE)),
        vendor("digitalocean", ("do", "p_v1_"), lambda r: n(r, 64, HEX)),
        vendor("shopify", ("shp", "at_"), lambda r: n(r, 32, HEX)),
        vendor("atlassian", ("ATA", "TT3"), lambda r: n(r, 180, URLSAFE + "=")),
        vendor("databricks", ("da", "pi"), lambda r: n(r, 32, HEX)),
        vendor("vault", ("hv", "s."), lambda r: n(r, 90, URLSAFE), "VAULT_TOKEN={s}"),
        vendor("doppler", ("dp", ".pt."), lambda r: n(r, 43)),
        vendor("linear", ("lin", "_api_"), lambda r: n(r, 40)),
        vendor("postman", ("PM", "AK-"), lambda r: n(r, 24, HEX) + "-" + n(r, 34, HEX)),
        vendor("grafana", ("gl", "sa_"), lambda r: n(r, 32) + "_" + n(r, 8, HEX)),
        vendor("newrelic", ("NR", "AK-"), lambda r: n(r, 27, UPPER_ALNUM)),
        vendor("docker-hub", ("dckr", "_pat_"), lambda r: n(r, 27, URLSAFE), "docker login -u ci --password {s}"),
        vendor("replicate", ("r", "8_"), lambda r: n(r, 37)),
        vendor("groq", ("gs", "k_"), lambda r: n(r, 52)),
        vendor("tailscale", ("ts", "key-"), lambda r: "auth-" + n(r, 12) + "-" + n(r, 33)),
        vendor("age", ("AGE-", "SECRET-KEY-1"), lambda r: n(r, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")),
        vendor("sentry", ("sntr", "ys_"), lambda r: n(r, 120, B64 + "=")),
        vendor("heroku", ("HR", "KU-"), lambda r: n(r, 60, URLSAFE)),
        vendor("supabase", ("sb", "p_"), lambda r: n(r, 40, HEX)),
        vendor("square", ("sq0", "atp-"), lambda r: n(r, 22, URLSAFE)),
        shaped("vendor_token", "telegram", "The bot token is {s}",
               lambda r: f"{r.randint(10**8, 10**10 - 1)}:AA{n(r, 33, URLSAFE)}"),
        shaped("vendor_token", "discord-webhook", "Notify {s} on deploy",
               lambda r: f"https://discord.com/api/webhooks/{r.randint(10**17, 10**18)}/{n(r, 68, URLSAFE)}"),
    ]


def _command_forms() -> list[Form]:
    f = "command_line"
    return [
        shaped(f, "pgpassword", "Connect with PGPASSWORD={s} psql -h db.internal -U app shop", password),
        shaped(f, "mysql-p", "Restore: mysql -u root -p{s} shop < dump.sql", password),
        shaped(f, "mysqldump-password", "mysqldump --password={s} --single-transaction shop > shop.sql", password),
        shaped(f, "curl-u", "Smoke test: curl -u admin:{s} https://admin.internal/health", password),
        shaped(f, "curl-user", "curl --user deploy:{s} -X POST https://ci.internal/job/build", password),
        shaped(f, "sshpass", "sshpass -p '{s}' ssh ops@10.0.3.7 uptime", password),
        shaped(f, "docker-login", "docker login -u ci -p {s} registry.internal", password),
        shaped(f, "redis-cli", "redis-cli -h cache -a {s} info", password),
        shaped(f, "mysql-pwd", "MYSQL_PWD={s} mysql -u app shop", password),
        shaped(f, "api-key-flag", "acme-cli --api-key {s} deploy", lambda r: rand(r, 32)),
        shaped(f, "token-flag", "gh-release --token={s} v1.2.0", lambda r: rand(r, 40)),
        shaped(f, "htpasswd", "htpasswd -b .htpasswd admin {s}", password),
        shaped(f, "git-clone-url", "git clone https://ana:{s}@github.com/acme/shop.git", password),
    ]


def _header_forms() -> list[Form]:
    f = "header"

    def basic(r: random.Random) -> str:
        return base64.b64encode(f"admin:{password(r)}".encode()).decode()
    return [
        shaped(f, "basic", "The admin API wants Authorization: Basic {s}", basic),
        shaped(f, "bearer", "Authorization: Bearer {s}", lambda r: rand(r, 40, URLSAFE)),
        shaped(f, "github-token-header", 'curl -H "Authorization: token {s}" https://api.github.com/user',
               lambda r: rand(r, 40, HEX)),
        shaped(f, "x-api-key", "X-API-Key: {s}", lambda r: rand(r, 32)),
        shaped(f, "private-token", "Private-Token: {s}", lambda r: rand(r, 26, URLSAFE)),
        shaped(f, "cookie", "Cookie: session={s}", lambda r: rand(r, 48, URLSAFE)),
    ]


def _connection_forms() -> list[Form]:
    f = "connection_string"
    return [
        shaped(f, "postgres-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", password),
        shaped(f, "mongodb-srv", "mongodb+srv://svc:{s}@cluster0.ab12c.mongodb.net/prod", password),
        shaped(f, "redis-url", "The cache is redis://:{s}@cache:6379/0", password),
        shaped(f, "amqp-url", "amqp://guest:{s}@rabbit.internal/", password),
        shaped(f, "azure-storage", "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey={s};"
                                   "EndpointSuffix=core.windows.net", lambda r: b64(r, 64)),
        shaped(f, "azure-servicebus", "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=Root;"
                                      "SharedAccessKey={s}", lambda r: b64(r, 32)),
        shaped(f, "azure-sas-string", "SharedAccessSignature={s}",
               lambda r: f"sv=2022-11-02&ss=b&srt=o&sp=r&sig={rand(r, 43, URLSAFE)}"),
        shaped(f, "ado-net", "Server=sql.internal;Database=shop;User Id=sa;Password={s};", password),
        shaped(f, "libpq-dsn", "host=db user=app password={s} dbname=shop sslmode=require", password),
        shaped(f, "jdbc", "jdbc:mysql://db/shop?user=app&password={s}", password),
    ]


def _env_forms() -> list[Form]:
    def long_random(r: random.Random) -> str:
        return rand(r, r.randint(32, 64), ALNUM + "_-")
    return [
        env_line("DB_PASSWORD", password),
        env_line("SECRET_KEY", long_random),
        env_line("DJANGO_SECRET_KEY", lambda r: rand(r, 50, ALNUM + "!@#%^&*(-_=+)")),
        env_line("JWT_SECRET", long_random),
        env_line("SESSION_SECRET", long_random),
        env_line("WEBHOOK_SECRET", long_random),
        env_line("CLIENT_SECRET", long_random),
        env_line("AUTH_TOKEN", long_random),
        env_line("API_KEY", long_random),
        env_line("PRIVATE_KEY", long_random),
        env_line("ENCRYPTION_KEY", lambda r: b64(r, 32)),
        env_line("SIGNING_KEY", lambda r: b64(r, 32)),
        env_line("AWS_SECRET_ACCESS_KEY", lambda r: rand(r, 40, B64), "export {n}={v}"),
        env_line("password", password, "{n}: {v}"),
        env_line("apiKey", long_random, '{{"{n}": "{v}"}}'),
        env_line("token", long_random, '{n} = "{v}"'),
        env_line("credentials", password, "{n}: {v}"),
    ]


def _pem_forms() -> list[Form]:
    def form(label: str) -> Form:
        return Form("pem_block", label.lower().replace(" ", "-"), lambda r: (lambda t: (f"The key:\n{t[0]}", t[1]))(
            pem(r, label)))
    return [form(label) for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                                      "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK")]


def _jwt_forms() -> list[Form]:
    return [shaped("jwt", "jwt-bare", "{s}", jwt),
            shaped("jwt", "jwt-prose", "The session cookie was {s} when it failed.", jwt)]


def _keyword_forms() -> list[Form]:
    f = "keyword_entropy"
    return [
        shaped(f, "api-key-is", "the staging API key is {s}", lambda r: rand(r, 32)),
        shaped(f, "password-for", "password for the admin panel: {s}", password),
        shaped(f, "use-secret", "use secret {s} for the webhook", lambda r: rand(r, 40, B64)),
        shaped(f, "db-pw-is", "the prod db pw is {s}", password),
        shaped(f, "auth-token-hex", "auth token {s}", lambda r: rand(r, 40, HEX)),
        shaped(f, "passphrase-is", "the signing passphrase is {s}", password),
        shaped(f, "creds-are", "creds are {s} for the test account", password),
    ]


POSITIVE_FORMS: list[Form] = (_vendor_forms() + _command_forms() + _header_forms() + _connection_forms()
                              + _env_forms() + _pem_forms() + _jwt_forms() + _keyword_forms())


def positives(seed: int) -> list[tuple[Form, str, str]]:
    """Every form made with its own seeded source: (form, text, the secret that must never be stored)."""
    out = []
    for form in POSITIVE_FORMS:
        text, secret = form.make(random.Random(f"{seed}:{form.name}"))
        assert secret in text, form.name
        out.append((form, text, secret))
    return out


# -- negatives ----------------------------------------------------------------------------------------

def _eval_memories() -> list[str]:
    texts = []
    for name in ("recall_set.yaml",):
        data = yaml.safe_load((ROOT / "src" / "memoryd" / "eval" / name).read_text())
        texts += [m["content"] for m in data["memories"]]
    return texts


def negatives() -> list[tuple[str, str]]:
    rng = random.Random("negatives")
    ulid_alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    rows: list[tuple[str, str]] = []
    for _ in range(20):
        sha = rand(rng, rng.choice([7, 8, 10, 12, 40]), HEX)
        rows.append(("commit_sha", rng.choice([f"fixed in {sha}", f"reverted {sha} after the outage",
                                               f"the token refresh fix landed in {sha}",
                                               f"bisect points at {sha}; the password reset test broke there"])))
        ulid = "01" + rand(rng, 24, ulid_alphabet)
        rows.append(("ulid", rng.choice([f"memory {ulid} was superseded", f"row id {ulid} is the duplicate"])))
        uuid = "-".join(rand(rng, k, HEX) for k in (8, 4, 4, 4, 12))
        rows.append(("uuid", rng.choice([f"request id {uuid}", f"the primary key column id {uuid}",
                                         f"trace {uuid} shows the slow span"])))
        rows.append(("file_hash", rng.choice([f"sha256 of the wheel: {rand(rng, 64, HEX)}",
                                              f"checksum {rand(rng, 64, HEX)}", f"md5 {rand(rng, 32, HEX)}"])))
        rows.append(("image_base64", f"![logo](data:image/png;base64,iVBORw0KGgo{b64(rng, 90)})"))
        rows.append(("version", rng.choice([f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}-rc.1",
                                            f"numpy=={rng.randint(1, 2)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
                                            f"node v{rng.randint(16, 22)}.{rng.randint(0, 20)}.0"])))
    rows += [("long_path", p) for p in (
        "/home/ana/src/shop/services/billing/internal/adapters/stripe/webhook_handler.py:142",
        r"C:\Users\ana\AppData\Local\Programs\Python\Python311\Lib\site-packages\pip\__init__.py",
        "node_modules/.pnpm/react@18.2.0_react-dom@18.2.0/node_modules/react/index.js",
        "~/.cache/pip/wheels/7f/3a/9e4b2c1d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f",
        "/var/lib/docker/overlay2/3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e/merged/etc")]
    rows += [("prose_about_secrets", t) for t in (
        "rotate the API key every 90 days", "password reset emails go through SES",
        "set PGPASSWORD in your shell, never in the script", "the token is read from $GITHUB_TOKEN",
        "Authorization: Bearer <token>", "API_KEY=${API_KEY}", "password: ********",
        "secret_key = os.environ['SECRET_KEY']", "use `curl -u $USER:$PASS`", "mysql -u root -p (it prompts)",
        "postgres://user:password@localhost/db is the docs' example", "sk_test_… keys go in .env.local")]
    rows += [("eval_memories", t) for t in _eval_memories()]
    rows += [("engineering_notes", line) for line in NOTES.read_text().splitlines() if line.strip()]
    return rows
