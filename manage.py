#!/usr/bin/env python
"""Django's command-line utility for the notification platform."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    from django.core.management import execute_from_command_line

    from backend.env import exit_on_configuration_error

    with exit_on_configuration_error():
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
