"""Settings of the example project: SQLite unless SEQID_EXAMPLE_DB names a local server."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "demo_site.urls"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "seqid_orm.django",  # the ticket and lease tables' migrations
    "library",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"

# Snowflake ids: every process needs a worker id of its own.  Under a server of several processes
# (uvicorn --workers, gunicorn) lease them from the database: SEQID_LEASE_NAMESPACE names the lease
# namespace (the first process of a new one waits 35 s before its first id).  Otherwise one process
# takes its worker id from the environment.
if os.environ.get("SEQID_LEASE_NAMESPACE"):
    SEQID = {"SNOWFLAKE": {"lease": {"namespace": os.environ["SEQID_LEASE_NAMESPACE"], "using": "default"}}}
else:
    SEQID = {"SNOWFLAKE": {"worker_id": int(os.environ.get("SEQID_WORKER_ID", "1"))}}

_DATABASES = {
    "sqlite": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SEQID_EXAMPLE_SQLITE", str(BASE_DIR / "example.sqlite3")),
    },
    "postgres": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("SEQID_EXAMPLE_DB_NAME", "test"),
        "USER": os.environ.get("SEQID_EXAMPLE_DB_USER", "postgres"),
        "PASSWORD": os.environ.get("SEQID_EXAMPLE_DB_PASSWORD", ""),
        "HOST": os.environ.get("SEQID_EXAMPLE_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SEQID_EXAMPLE_DB_PORT", "5432"),
    },
    "mariadb": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("SEQID_EXAMPLE_DB_NAME", "test"),
        "USER": os.environ.get("SEQID_EXAMPLE_DB_USER", "root"),
        "PASSWORD": os.environ.get("SEQID_EXAMPLE_DB_PASSWORD", ""),
        "HOST": os.environ.get("SEQID_EXAMPLE_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SEQID_EXAMPLE_DB_PORT", "3306"),
        "OPTIONS": {"charset": "utf8mb4"},
    },
}
DATABASES = {"default": _DATABASES[os.environ.get("SEQID_EXAMPLE_DB", "sqlite")]}
