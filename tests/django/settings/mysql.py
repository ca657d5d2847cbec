from .base import *  # noqa: F403

DATABASES = {"default": MARIADB}  # noqa: F405
