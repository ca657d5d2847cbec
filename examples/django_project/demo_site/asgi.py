"""The ASGI entry point: ``uvicorn demo_site.asgi:application --workers 4`` (from examples/django_project)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")
application = get_asgi_application()
