from .base import *  # noqa: F403

DATABASES = {"default": POSTGRES}  # noqa: F405
