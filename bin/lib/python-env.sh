# Sourced by bin/demo and bin/test: a virtualenv in .venv with the pinned requirements.

ensure_python_env() {  # $1: requirements file
  local req=$1
  local stamp=.venv/.installed-$(basename "$req" .txt)
  if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv (Python $(python3 -c 'import sys; print(sys.version.split()[0])'))"
    python3 -m venv .venv
  fi
  # Reinstall only when a requirements file changed since the last install.
  if [ ! -f "$stamp" ] || [ -n "$(find requirements -newer "$stamp" -name '*.txt')" ]; then
    echo "==> installing $req"
    .venv/bin/pip install --quiet --disable-pip-version-check -r "$req"
    touch "$stamp"
  fi
  export PATH="$PWD/.venv/bin:$PATH"
}
