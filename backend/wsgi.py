"""WSGI entry point of Django alone (runserver, tools); the HTTP web tier serves backend/web.py around it."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
application = get_wsgi_application()
