# Sourced by bin/demo and bin/drill: the embedded default's environment for the demo.
# DEBUG stays off: the demo shows the product's own error answers; daphne serves /static/ itself.
export DEBUG=${DEBUG:-0} SERVE_STATIC=${SERVE_STATIC:-1} NOTIFY_DATA_DIR=${NOTIFY_DATA_DIR:-$PWD/var}
export WEB_PORT=${WEB_PORT:-8000} EMAIL_PORT=${EMAIL_PORT:-1025} STUB_PORT=${STUB_PORT:-8025}
export PYTHONUNBUFFERED=1
# Links in mail and the preference link must point at this demo, whatever its port.
export NOTIFY_PUBLIC_URL=${NOTIFY_PUBLIC_URL:-http://127.0.0.1:$WEB_PORT}
# Demo pacing: short timeouts, retries and recovery so `manage.py drill` ends in about a minute.
export NOTIFY_PROVIDERS_FILE=${NOTIFY_PROVIDERS_FILE:-$NOTIFY_DATA_DIR/providers.toml}
export NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS=1 EMAIL_TIMEOUT=${EMAIL_TIMEOUT:-3}
export NOTIFY_RETRY_BASE=${NOTIFY_RETRY_BASE:-1} NOTIFY_VISIBILITY_TIMEOUT=${NOTIFY_VISIBILITY_TIMEOUT:-20}
export NOTIFY_SWEEP_INTERVAL=${NOTIFY_SWEEP_INTERVAL:-2} NOTIFY_BREAKER_COOLDOWN=${NOTIFY_BREAKER_COOLDOWN:-5}
export NOTIFY_STANDARD_LEASE=${NOTIFY_STANDARD_LEASE:-10}
