"""Vendors mixed: 'default' on PostgreSQL, 'legacy' on MariaDB."""

from .base import *  # noqa: F403

DATABASES = {"default": POSTGRES, "legacy": MARIADB}  # noqa: F405
DATABASE_ROUTERS = ["tests.django.routers.LegacyRouter"]
