from .base import *  # noqa: F403

DATABASES = {"default": SQLITE}  # noqa: F405
