"""Every environment variable the settings read is documented: in README's table and in deploy/env.example."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = (ROOT / "backend" / "settings.py").read_text()
READ = sorted(set(re.findall(r'env_[a-z_]+\(\s*"([A-Z_]+)"', SETTINGS)))


def test_the_settings_read_variables_at_all():
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "NOTIFY_PROVIDERS_FILE"} <= set(READ)


@pytest.mark.parametrize("name", READ)
def test_the_variable_is_in_the_readme(name):
    assert f"`{name}`" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", READ)
def test_the_variable_is_in_the_env_example(name):
    assert re.search(rf"^{name}=", (ROOT / "deploy" / "env.example").read_text(), re.MULTILINE)
