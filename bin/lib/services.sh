# Sourced by bin/test: install (when missing) and start throwaway PostgreSQL and Redis servers.
# Each lives in a temporary folder on a free loopback port and is removed by stop_services.

SERVICES_DIR=""

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

apt_install() {  # installs the named Debian packages, once per run
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: $*; install them (as root: apt-get install $*)" >&2
    return 1
  fi
  echo "==> apt-get install $*"
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pg_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

ensure_system_packages() {
  local missing=()
  # Only when no server is there: naming postgresql-15 would upgrade an installed one.
  [ -n "$(pg_bindir)" ] || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v "${CHROMIUM_PATH:-/usr/bin/chromium}" >/dev/null || missing+=(chromium)
  # DejaVu has Arabic glyphs: without it screenshots and PDFs show boxes.
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
  # pdftotext: the campaign report's tests read the text back out of the PDF.
  command -v pdftotext >/dev/null || missing+=(poppler-utils)
  if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
}

as_postgres() {  # initdb and pg_ctl refuse to run as root
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# NOTIFY_TEST_PG_OPTIONS: more "-c name=value" server settings (bin/bench passes deploy/'s production ones).
start_postgres() {
  local bin; bin=$(pg_bindir)
  PGPORT=${NOTIFY_TEST_PGPORT:-$(free_port)}
  mkdir -p "$SERVICES_DIR/pg"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    chown postgres "$SERVICES_DIR" "$SERVICES_DIR/pg"
  fi
  as_postgres "$bin/initdb" -D "$SERVICES_DIR/pg" -U notify -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
  as_postgres "$bin/pg_ctl" -D "$SERVICES_DIR/pg" -l "$SERVICES_DIR/pg.log" -w -o \
    "-p $PGPORT -k $SERVICES_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 ${NOTIFY_TEST_PG_OPTIONS:-}" \
    start >/dev/null
  "$bin/createdb" -h 127.0.0.1 -p "$PGPORT" -U notify notify
  export DATABASE_URL="postgres://notify@127.0.0.1:$PGPORT/notify"
  echo "==> PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PGPORT"
}

start_redis() {
  REDIS_PORT=${NOTIFY_TEST_REDIS_PORT:-$(free_port)}
  redis-server --save '' --appendonly no --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" \
    --dir "$SERVICES_DIR" --pidfile "$SERVICES_DIR/redis.pid" --logfile "$SERVICES_DIR/redis.log"
  for _ in $(seq 50); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
  echo "==> Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2) on 127.0.0.1:$REDIS_PORT"
}

start_services() {
  SERVICES_DIR=$(mktemp -d /tmp/notify-services.XXXXXX)
  chmod 755 "$SERVICES_DIR"
  trap stop_services EXIT
  start_postgres
  start_redis
}

stop_services() {
  [ -n "$SERVICES_DIR" ] || return 0
  [ -f "$SERVICES_DIR/redis.pid" ] && redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
  [ -f "$SERVICES_DIR/pg/postmaster.pid" ] && as_postgres "$(pg_bindir)/pg_ctl" -D "$SERVICES_DIR/pg" -m immediate stop >/dev/null 2>&1
  rm -rf "$SERVICES_DIR"
}
