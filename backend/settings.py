"""Settings for the notification platform: one module, driven by environment variables.

Unset variables give the embedded default (SQLite, Huey on SQLite, the in-memory
channel layer, local-memory counters), which is what the demo runs. README lists
every variable; ``manage.py check --deploy`` refuses dangerous production values.
"""

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from backend.env import (
    env_bool,
    env_database,
    env_float,
    env_int,
    env_list,
    env_rate_limits,
    env_region,
    env_str,
    env_web_url,
)
from backend.notifications.locales import RightToLeft

BASE_DIR = Path(__file__).resolve().parent.parent

# Where the embedded default keeps its SQLite files and the demo its mail sink.
DATA_DIR = Path(env_str("NOTIFY_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

EMBEDDED_SECRET_KEY = "embedded-demo-secret-key-do-not-use-in-production"
SECRET_KEY = env_str("SECRET_KEY", EMBEDDED_SECRET_KEY)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "backend.admin_site.NotifyAdminConfig",  # django.contrib.admin, its autocomplete only where declared
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "csp",
    "channels",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "backend.notifications",
    "frontend",
    "inbox",
    "campaigns",
    "backend.support",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "backend.middleware.UnreadableRequestMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    # The staff pages are English: left to right whatever the browser asks (frontend/staff_language.py).
    "frontend.staff_language.StaffPagesInEnglish",
    "django.middleware.common.CommonMiddleware",
    # Django's empty 405 gets a page in the visitor's language (frontend/error_pages.py).
    "frontend.error_pages.MethodNotAllowedPageMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # A database outage in a view answers 503 with Retry-After, not a 500.
    "backend.notifications.api.errors.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authentication into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "backend.urls"
WSGI_APPLICATION = "backend.wsgi.application"
ASGI_APPLICATION = "backend.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context_processors.brand",
            ],
        },
    },
]

DATABASES = {
    "default": env_database(
        "DATABASE_URL",
        f"sqlite:///{DATA_DIR / 'notify.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and two worker pools write to one file: wait for the lock instead of
    # failing with "database is locked", and let readers run beside the writer.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif env_bool("DATABASE_POOL", False):
    # psycopg's pool (requirements/prod.txt) instead of one connection per request.
    DATABASES["default"]["OPTIONS"] = {"pool": True}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits for ever for a server that does not answer: a lost database must fail requests
    # (503, readiness) within seconds. ``?connect_timeout=N`` in DATABASE_URL overrides it.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
# Reused connections are checked before use, so a restarted PostgreSQL costs one error, not many.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Worker processes are long-lived and synchronous: a connection per thread, kept, beats a new
# PostgreSQL connection (a fork and an authentication) for every delivery. Seconds; 0 disables.
WORKER_CONN_MAX_AGE = env_int("NOTIFY_WORKER_CONN_MAX_AGE", 300, minimum=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis holds only what can be lost or rebuilt (DESIGN.md §3): the Huey queues,
# the channel layer and counters such as the idempotency fast path.
REDIS_URL = env_str("REDIS_URL", "")
# Seconds every Redis client (cache, counters, Huey, shared state) waits to connect and for an
# answer. redis-py waits for ever to connect by default: a dead Redis must cost a request
# milliseconds, then the caller's documented fallback (README "When Redis or PostgreSQL is down").
REDIS_CONNECT_TIMEOUT = env_float("REDIS_CONNECT_TIMEOUT", 0.25, minimum=0.01)
REDIS_SOCKET_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 0.5, minimum=0.01)
REDIS_CLIENT_OPTIONS = {
    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
    "socket_timeout": REDIS_SOCKET_TIMEOUT,
    # One immediate retry on a fresh connection heals a pooled connection that a Redis restart
    # closed; a Redis that is really down fails again within milliseconds. Timeouts are not retried.
    "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
}

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": REDIS_CLIENT_OPTIONS,
        }
    }
    # Redis pub/sub rather than channels-redis's list-based layer: measured with 1,000 sockets on
    # one daphne (backend/bench/inbox_ws.py), it delivers 1,000 events at once in 0.4 s instead of
    # 1.2 s, with no per-process capacity past which group_send drops events silently, no group
    # expiry, and none of the blocking BZPOPMIN reads that redis-py 8's 5 s default read timeout
    # breaks (django/channels_redis#422). Pub/sub keeps nothing for a subscriber that is
    # reconnecting: each daphne's catch-up poll (inbox/poller.py) delivers what it missed.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Huey: one queue per tier, each consumed by its own worker pool
# (backend/notifications/queues.py). Never immediate unless asked: an
# immediate Huey would deliver inside the API request.
HUEY_IMMEDIATE = env_bool("HUEY_IMMEDIATE", False)
HUEY_WORKERS = {
    "high": env_int("HUEY_HIGH_WORKERS", 4, minimum=1),
    "standard": env_int("HUEY_STANDARD_WORKERS", 4, minimum=1),
}
# Notifications a standard-tier worker thread takes off its queue and delivers as one batch
# (delivery/batch.py); 1 runs Huey's one-at-a-time consumer instead. The high tier always takes one.
STANDARD_BATCH = env_int("NOTIFY_STANDARD_BATCH", 200, minimum=1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ar", "العربية"), ("fa", "فارسی")]
# Which languages are written right to left: CLDR's answer (Babel), for ps, ckb, ug … as for ar.
LANGUAGES_BIDI = RightToLeft()
# Django's default would set the process time zone to America/Chicago.
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = ["backend.formats"]

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# The embedded demo has no nginx in front: daphne serves /static/ itself.
SERVE_STATIC = env_bool("SERVE_STATIC", DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

LOGIN_URL = "admin:login"

# Staff login throttling (django-axes): after NOTIFY_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is refused for NOTIFY_LOGIN_COOLOFF seconds; a success
# clears its count. The address is REMOTE_ADDR, which daphne --proxy-headers takes from the
# X-Forwarded-For that nginx overwrites with the client's address (deploy/nginx.conf): never a
# header a client chose. Per pair, not per address alone, so one office behind NAT is not locked
# out by one person, and not per username alone, so anyone cannot lock out the admin.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("NOTIFY_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(seconds=env_int("NOTIFY_LOGIN_COOLOFF", 900, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "frontend/login_locked.html"
AXES_VERBOSE = False

# Behind TLS (nginx or a load balancer terminating HTTPS): cookies only over HTTPS, HSTS, and
# X-Forwarded-Proto trusted as the scheme. Trusting that header is safe only because nginx always
# overwrites it (deploy/nginx.conf); daphne is never reachable directly in that set-up.
HTTPS = env_bool("NOTIFY_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
# Whatever ends TLS should also redirect port 80; this catches a request that reached Django over
# plain HTTP anyway. /healthz is probed over plain HTTP from inside the network.
SECURE_SSL_REDIRECT = HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("NOTIFY_HSTS_SECONDS", 365 * 86400 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("NOTIFY_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("NOTIFY_HSTS_PRELOAD", HTTPS)

# The brand on the pages people see without a login (preference center, unsubscribe, link and error
# pages): a name, and a logo shown beside it when set (an absolute http(s) URL, refused otherwise).
BRAND_NAME = env_str("NOTIFY_BRAND_NAME", "Notify").strip() or "Notify"
BRAND_LOGO_URL = env_web_url("NOTIFY_BRAND_LOGO_URL")
_logo = urlsplit(BRAND_LOGO_URL)
# The logo's site is the one other place pages may load an image from (img-src below).
_BRAND_LOGO_ORIGIN = [f"{_logo.scheme}://{_logo.netloc}"] if BRAND_LOGO_URL else []

# Content-Security-Policy (django-csp): scripts only from our own static files — no inline script,
# no eval — so injected markup cannot run. Styles may be inline: the inbox widget and htmx add
# <style> elements, and CSS cannot run code. 'self' covers the inbox WebSocket in connect-src.
_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:", *_BRAND_LOGO_ORIGIN],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
# Report-only first, to try the policy on a deployment with its own additions without breaking pages.
if env_bool("NOTIFY_CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = {"DIRECTIVES": _CSP}
else:
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": _CSP}

# Request bodies, in bytes. daphne reads a whole body into memory before the application sees it, so
# the guard for memory is in front (nginx client_max_body_size); in the web process
# backend/body_limit.py answers 413 before Django copies a larger body. 1 MiB fits the largest API
# body (a notification's params are capped at 16 KiB); a batch endpoint will need a few MiB.
MAX_REQUEST_BODY = env_int("NOTIFY_MAX_REQUEST_BODY", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY
# The one exception: /campaigns/segments/upload takes a CSV of up to 20 MB (campaigns/csv_upload.py)
# plus 64 KiB of multipart framing and form fields (backend/asgi.py; nginx: client_max_body_size 21m).
# A body or file over FILE_UPLOAD_MAX_MEMORY_SIZE is spooled to disk, by the ASGI handler and then by
# the upload handler, so a 20 MB file is never held in memory, let alone twice.
SEGMENT_UPLOAD_MAX_BODY = 20 * 1024 * 1024 + 64 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY
DATA_UPLOAD_MAX_NUMBER_FIELDS = env_int("NOTIFY_MAX_FORM_FIELDS", 1000, minimum=10)

# Email: Django's SMTP backend. The demo points it at the local sink
# (``manage.py smtp_sink``); production at a relay or an ESP's SMTP endpoint.
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = env_int("EMAIL_PORT", 1025, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Notify <notify@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# Delivery engine.
NOTIFY = {
    # Seconds a standard-tier notification may sit queued while its queue lacks
    # its task before the sweeper re-enqueues it (a lost queue, DESIGN.md §2).
    "VISIBILITY_TIMEOUT": env_float("NOTIFY_VISIBILITY_TIMEOUT", 120.0, minimum=0.1),
    # Seconds between two sweeps of the standard tier (and of scheduled rows).
    "SWEEP_INTERVAL": env_float("NOTIFY_SWEEP_INTERVAL", 10.0, minimum=0.1),
    # The same two for the high tier: an OTP popped by a worker that died
    # before claiming it is found within seconds, not minutes.
    "HIGH_VISIBILITY_TIMEOUT": env_float("NOTIFY_HIGH_VISIBILITY_TIMEOUT", 5.0, minimum=0.1),
    "HIGH_SWEEP_INTERVAL": env_float("NOTIFY_HIGH_SWEEP_INTERVAL", 1.0, minimum=0.1),
    # Campaign tasks the scheduler keeps waiting in the standard queue at most (campaigns/fanout.py):
    # the rest stay queued in PostgreSQL, so Redis holds about this many, whatever the campaign's size.
    "CAMPAIGN_FEED": env_int("NOTIFY_CAMPAIGN_FEED", 10000, minimum=1),
    # Seconds a claim (state sending) lasts unless its worker renews it; a live
    # worker renews every third of it, so only a dead worker's claims expire.
    "LEASE": {
        "high": env_float("NOTIFY_HIGH_LEASE", 3.0, minimum=0.3),
        "standard": env_float("NOTIFY_STANDARD_LEASE", 30.0, minimum=0.3),
    },
    # Retries of transient provider errors: full jitter, uniform(0, min(cap, base·2^n)).
    "MAX_ATTEMPTS": env_int("NOTIFY_MAX_ATTEMPTS", 5, minimum=1),
    "RETRY_BASE": env_float("NOTIFY_RETRY_BASE", 2.0, minimum=0.0),
    "RETRY_CAP": env_float("NOTIFY_RETRY_CAP", 300.0, minimum=0.0),
    # Seconds the idempotency fast-path key lives in Redis (DESIGN.md §2: 24 h).
    "IDEMPOTENCY_TTL": env_int("NOTIFY_IDEMPOTENCY_TTL", 86400, minimum=1),
    # Days a notification that ended is kept after its last change, then deleted with its history by the
    # scheduler every RETENTION_INTERVAL seconds (retention.py; DESIGN.md §3: 90 days). 0 keeps everything;
    # at most a hundred years (retention.MAX_DAYS).
    "RETENTION_DAYS": env_int("NOTIFY_RETENTION_DAYS", 90, minimum=0, maximum=36_500),
    "RETENTION_INTERVAL": env_float("NOTIFY_RETENTION_INTERVAL", 86400.0, minimum=60.0),
    "SMS_PRICES": env_str("NOTIFY_SMS_PRICES", str(BASE_DIR / "backend" / "notifications" / "data" / "sms_prices.csv")),
    # Providers, routes and budgets (TOML, see providers/config.py); unset → CHANNEL_PROVIDERS below.
    "PROVIDERS_FILE": env_str("NOTIFY_PROVIDERS_FILE", ""),
    # Active push devices a user keeps; registering another disables the least recently seen (actions.register_device).
    "MAX_DEVICES": env_int("NOTIFY_MAX_DEVICES", 20, minimum=1, maximum=1000),
    # Web Push endpoints come from browsers: refuse private addresses unless told (tests, demo).
    "ALLOW_PRIVATE_PUSH_ENDPOINTS": env_bool("NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS", False),
    # Circuit breaker per provider (state in Redis, shared by every worker).
    "BREAKER_CONSECUTIVE_FAILURES": env_int("NOTIFY_BREAKER_FAILURES", 5, minimum=1),
    "BREAKER_FAILURE_RATE": env_float("NOTIFY_BREAKER_FAILURE_RATE", 0.5, minimum=0.0),
    "BREAKER_MIN_CALLS": env_int("NOTIFY_BREAKER_MIN_CALLS", 20, minimum=1),
    "BREAKER_WINDOW": env_float("NOTIFY_BREAKER_WINDOW", 30.0, minimum=1.0),
    "BREAKER_COOLDOWN": env_float("NOTIFY_BREAKER_COOLDOWN", 30.0, minimum=0.1),
    # Each API client's own rate (DESIGN.md §2, "rate-limit caller"): notifications a second it may submit,
    # single and batch sends together, unless the client has its own ``rate_limit``; a token bucket holding
    # API_CLIENT_BURST_SECONDS of that rate, so a batch of 1,000 fits at the default.
    "API_CLIENT_RATE": env_int("NOTIFY_API_CLIENT_RATE", 5000, minimum=1),
    "API_CLIENT_BURST_SECONDS": env_float("NOTIFY_API_CLIENT_BURST_SECONDS", 2.0, minimum=0.001),
    # Policy (DESIGN.md §2): per-user limits for non-urgent traffic, per category.
    "RATE_LIMITS": env_rate_limits("NOTIFY_RATE_LIMITS", "marketing=3/h,10/d;transactional=30/h,200/d"),
    # Security SMS (OTP) per phone number: at most OTP_LIMIT per OTP_WINDOW seconds (SMS pumping).
    "OTP_LIMIT": env_int("NOTIFY_OTP_LIMIT", 3, minimum=1),
    "OTP_WINDOW": env_int("NOTIFY_OTP_WINDOW", 600, minimum=1),
    # OTP SMS per destination country per minute above which a velocity alarm is raised.
    "OTP_VELOCITY_PER_MINUTE": env_int("NOTIFY_OTP_VELOCITY_PER_MINUTE", 100, minimum=1),
    # Absolute base of links in messages (preference center, unsubscribe): the public URL of this service.
    "PUBLIC_URL": env_str("NOTIFY_PUBLIC_URL", "http://127.0.0.1:8000"),
    # The base URL of /webhooks/ as the SMS providers see it ("": PUBLIC_URL): Twilio signs the URL it
    # requested, which behind a proxy is not the one Django sees. demo_providers builds the callbacks from it.
    "WEBHOOK_BASE_URL": env_str("NOTIFY_WEBHOOK_BASE_URL", ""),
    # Bytes a delivery receipt's body may have (a real one is under 2 KB): 413 past it.
    "WEBHOOK_MAX_BODY": env_int("NOTIFY_WEBHOOK_MAX_BODY", 64 * 1024, minimum=1024),
    # The stub providers (manage.py provider_stub): seconds after a message until its signed receipts
    # are posted, and what they say: delivered, undelivered[:code] or none.
    "STUB_RECEIPT_DELAY": env_float("NOTIFY_STUB_RECEIPT_DELAY", 1.0, minimum=0.0),
    "STUB_RECEIPT_OUTCOME": env_str("NOTIFY_STUB_RECEIPT_OUTCOME", "delivered"),
    "PREFERENCE_LINK_TTL": env_int("NOTIFY_PREFERENCE_LINK_TTL", 7 * 86400, minimum=60),
    "UNSUBSCRIBE_LINK_TTL": env_int("NOTIFY_UNSUBSCRIBE_LINK_TTL", 365 * 86400, minimum=86400),
    "UNSUBSCRIBE_MAILTO": env_str("NOTIFY_UNSUBSCRIBE_MAILTO", "unsubscribe@localhost"),
    # DKIM signing of outgoing mail (backend/notifications/email_dkim.py): off unless all three are set;
    # the key is PEM, from NOTIFY_DKIM_PRIVATE_KEY or the file named by NOTIFY_DKIM_PRIVATE_KEY_FILE.
    "DKIM": {
        "DOMAIN": env_str("NOTIFY_DKIM_DOMAIN", ""),
        "SELECTOR": env_str("NOTIFY_DKIM_SELECTOR", ""),
        "PRIVATE_KEY": env_str("NOTIFY_DKIM_PRIVATE_KEY", ""),
    },
    # The template editor's preview worker (frontend/editor/worker.py): seconds a preview may take, and
    # MiB a render may allocate, before the worker is replaced / the render fails.
    "PREVIEW_TIMEOUT": env_float("NOTIFY_PREVIEW_TIMEOUT", 1.5, minimum=0.1),
    "PREVIEW_MEMORY_MB": env_int("NOTIFY_PREVIEW_MEMORY_MB", 256, minimum=16),
    # Seconds a segment count may take (live preview, the list, pre-flight, submit) before it is stopped and
    # the marketer asked to simplify the filter (campaigns/segment_query.py): well under the proxy's 60 s.
    "SEGMENT_COUNT_TIMEOUT": env_float("NOTIFY_SEGMENT_COUNT_TIMEOUT", 10.0, minimum=0.1),
    # Seconds the sent-marker lives in Redis after a provider accepted a message.
    "SENT_MARKER_TTL": env_int("NOTIFY_SENT_MARKER_TTL", 86400, minimum=60),
    # Which provider serves each channel without a providers file; a channel absent here is refused at the API.
    "CHANNEL_PROVIDERS": {
        "email": env_str("NOTIFY_EMAIL_PROVIDER", "smtp"),
        "sms": env_str("NOTIFY_SMS_PROVIDER", "fake-sms"),
        "push": env_str("NOTIFY_PUSH_PROVIDER", "fake-push"),
        "inapp": env_str("NOTIFY_INAPP_PROVIDER", "inapp"),
    },
}

# In-app inbox (inbox/, DESIGN.md §6): end users' signed tokens and the consumer's catch-up poll.
INBOX = {
    # Seconds a WebSocket / HTTP token from POST /api/v1/users/{id}/inbox-token stays valid.
    "TOKEN_TTL": env_int("NOTIFY_INBOX_TOKEN_TTL", 15 * 60, minimum=1),
    # Seconds a signed inbox page link (manage.py inbox_link) stays valid.
    "LINK_TTL": env_int("NOTIFY_INBOX_LINK_TTL", 7 * 24 * 3600, minimum=1),
    # Seconds between two catch-up polls of a daphne process (one query for all its sockets,
    # inbox/poller.py). The in-memory layer does not cross processes (worker → daphne), so the
    # embedded default polls every second; with Redis the poll only recovers dropped events.
    "POLL_INTERVAL": env_float("NOTIFY_INBOX_POLL_INTERVAL", 5.0 if REDIS_URL else 1.0, minimum=0.05),
    # Open sockets one person may hold on one daphne process (a tab each); one more is refused (4429).
    "MAX_SOCKETS_PER_USER": env_int("NOTIFY_INBOX_MAX_SOCKETS_PER_USER", 10, minimum=1),
    # Commands one person may send over all their sockets on one process: a burst of COMMAND_BURST, then
    # COMMANDS_PER_SECOND (a token bucket, kept across reconnects). Past it the socket is closed (4429): a
    # widget sends a command per click, a flood queued frames in daphne faster than the database thread,
    # which every socket of the process shares, could answer.
    "COMMAND_BURST": env_int("NOTIFY_INBOX_COMMAND_BURST", 20, minimum=1),
    "COMMANDS_PER_SECOND": env_float("NOTIFY_INBOX_COMMANDS_PER_SECOND", 5.0, minimum=0.1),
}

# Prometheus at /metrics (backend/notifications/metrics.py): with a token, scrapers send
# "Authorization: Bearer <token>"; without one, only requests from the loopback address are answered.
METRICS_TOKEN = env_str("NOTIFY_METRICS_TOKEN", "")

# The support explorer (backend/support/): the region whose national numbers a caller may read out
# without a country code ("0501234567" is +966501234567 with SA), a CLDR region code phonenumbers knows.
SUPPORT = {"DEFAULT_REGION": env_region("NOTIFY_DEFAULT_REGION", "SA")}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "backend.notifications.api.auth.ApiKeyAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["backend.notifications.api.auth.IsApiClient"],
    "DEFAULT_PARSER_CLASSES": ["backend.notifications.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "backend.notifications.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Notify API",
    "DESCRIPTION": (
        "Send notifications by kind and params; the platform picks channel, language, "
        "template, timing and provider, and records every attempt."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "backend.notifications.api.schema_hooks.common_answers",
    ],
    "ENUM_NAME_OVERRIDES": {
        "NotificationStateEnum": "backend.notifications.models.notification.State.choices",
        "CampaignStateEnum": "campaigns.serializers.CAMPAIGN_STATES",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"one_line_refusals": {"()": "backend.log_filters.OneLineRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # A 403 is an expected refusal: one line, not a 35-line traceback of PermissionDenied.
        "django.request": {"filters": ["one_line_refusals"]},
        "huey": {"level": env_str("LOG_LEVEL", "INFO")},
        # aiosmtpd logs every SMTP command of the demo sink at INFO.
        "mail.log": {"level": "WARNING"},
        # WeasyPrint logs each layout step of every campaign report at INFO.
        "weasyprint.progress": {"level": "WARNING"},
    },
}
