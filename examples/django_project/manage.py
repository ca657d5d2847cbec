#!/usr/bin/env python
"""A minimal Django project using seqid_orm fields.

    cd examples/django_project
    python manage.py migrate
    python manage.py seed_library          # creates a few rows and prints their ids in pk order
    python manage.py createsuperuser && python manage.py runserver   # then open /admin/

SQLite by default; set SEQID_EXAMPLE_DB=postgres or SEQID_EXAMPLE_DB=mariadb to use the local servers.
"""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
