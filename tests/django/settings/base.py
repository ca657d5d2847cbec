"""Shared settings of the pytest-django test project; one module per backend imports this."""

import os
import tempfile

import django

SECRET_KEY = "seqid-orm-tests"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "tests.django.urls"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "seqid_orm.django",  # the ticket table; maps seqid's integer keys in REST framework serializers
    "rest_framework",
    "tests.django.testapp",
    "tests.django.thirdparty",  # stands for an installed package: its random keys are swapped (SEQID)
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
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
SEQID = {"SNOWFLAKE": {"worker_id": 3, "datacenter_id": 1}, "SWAP_RANDOM_KEY_APPS": ["thirdparty"]}

# Each settings module, Django version and user has test databases of its own, so that they can run
# at once (make test-django runs the settings modules side by side; CI runs the nox matrix's Django
# versions beside other steps; two users' suites share the servers): test_seqid_<module>_<django
# version>_u<uid>, e.g. test_seqid_postgres_52_u1000.
_MODULE = os.environ.get("DJANGO_SETTINGS_MODULE", "").rpartition(".")[2] or "base"
_RUN = f"{_MODULE}_{django.VERSION[0]}{django.VERSION[1]}_u{os.getuid()}"

POSTGRES = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("SEQID_DJANGO_PG_NAME", "test"),
    "USER": os.environ.get("SEQID_DJANGO_PG_USER", "postgres"),
    "PASSWORD": os.environ.get("SEQID_DJANGO_PG_PASSWORD", ""),
    "HOST": os.environ.get("SEQID_DJANGO_PG_HOST", "127.0.0.1"),
    "PORT": os.environ.get("SEQID_DJANGO_PG_PORT", "5432"),
    "TEST": {"NAME": f"test_seqid_{_RUN}"},
}
MARIADB = {
    "ENGINE": "django.db.backends.mysql",
    "NAME": os.environ.get("SEQID_DJANGO_MYSQL_NAME", "test"),
    "USER": os.environ.get("SEQID_DJANGO_MYSQL_USER", "root"),
    "PASSWORD": os.environ.get("SEQID_DJANGO_MYSQL_PASSWORD", ""),
    "HOST": os.environ.get("SEQID_DJANGO_MYSQL_HOST", "127.0.0.1"),
    "PORT": os.environ.get("SEQID_DJANGO_MYSQL_PORT", "3306"),
    "OPTIONS": {"charset": "utf8mb4"},
    "TEST": {"NAME": f"test_seqid_{_RUN}", "CHARSET": "utf8mb4", "COLLATION": "utf8mb4_general_ci"},
}
# A file, not Django's default in-memory test database: seqid's ticket and lease stores use a
# connection of their own, which cannot wait for the write lock of a shared in-memory database.
SQLITE = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": ":memory:",
    "TEST": {"NAME": os.path.join(tempfile.gettempdir(), f"seqid-django-tests-{os.getpid()}.sqlite3")},
}
