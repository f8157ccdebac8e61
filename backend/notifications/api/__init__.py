"""The REST API under /api/v1 (Django REST framework, OpenAPI 3 by drf-spectacular)."""
