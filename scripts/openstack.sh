#!/usr/bin/env bash
# A real Keystone + Glance + Barbican on 127.0.0.1 for tests, benchmarks and demos, from Debian's
# packages, with sqlite databases and file stores in one directory and no systemd. Glance checks
# image signatures (img_signature*) on upload against certificates it reads from this Barbican.
#
#   scripts/openstack.sh up DIR [--owner PID]   start everything, write DIR/clouds.yaml and DIR/env
#   scripts/openstack.sh down DIR               stop everything started in DIR (by PID)
#   scripts/openstack.sh stop-glance DIR one|two    kill one Glance (SIGKILL: "Glance went away")
#   scripts/openstack.sh start-glance DIR one|two   start it again on the same port
#
# Layout of the catalog (region: services):
#   RegionOne:   identity, image (glance "one"), key-manager (barbican)
#   RegionTwo:   image (glance "two": its own database and store), key-manager on a port where
#                nothing listens (a Barbican that is down)
#   RegionThree: identity only (no image service)
#   RegionFour:  image on a port where nothing listens (unreachable)
# clouds.yaml names: local, local-two, local-noimage, local-down, local-badpass, local-appcred.
# With --owner PID, a watchdog stops everything when that process goes away (a killed test run
# leaves no stray processes behind). KEYSTONE_LISTEN (default 127.0.0.1) is the address Keystone
# listens on: internal/testing/novatest sets 0.0.0.0 inside its namespace, where guests reach it.
set -euo pipefail
PY=/usr/bin/python3 # a pyenv python3 may shadow Debian's, which has the OpenStack modules

die() { echo "openstack.sh: $*" >&2; exit 1; }

free_port() {
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_http() { # URL SECONDS PIDFILE
  local deadline=$((SECONDS + $2))
  until curl -s -o /dev/null "$1"; do
    [ -f "$3" ] && kill -0 "$(cat "$3")" 2>/dev/null || die "process for $1 died; see logs in $(dirname "$3")"
    ((SECONDS < deadline)) || die "$1 did not answer within $2 s"
    sleep 0.2
  done
}

write_keystone_conf() {
  local d=$1
  mkdir -p "$d/fernet-keys" "$d/credential-keys" "$d/policy.d"
  # Fernet keys written directly: keystone-manage fernet_setup costs seconds for nothing.
  for k in 0 1; do
    $PY -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())' >"$d/fernet-keys/$k"
    $PY -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())' >"$d/credential-keys/$k"
  done
  chmod 700 "$d/fernet-keys" "$d/credential-keys"
  cat >"$d/keystone.conf" <<EOF
[DEFAULT]
log_file = $d/keystone.log
[database]
connection = sqlite:///$d/keystone.sqlite
[token]
provider = fernet
[identity]
# bcrypt's cheapest cost: every token request hashes the password, and tests make many.
password_hash_rounds = 4
[fernet_tokens]
key_repository = $d/fernet-keys
[fernet_receipts]
key_repository = $d/fernet-keys
[credential]
key_repository = $d/credential-keys
[oslo_policy]
# An empty policy_dirs makes keystone read keystone.conf as policy: point at an empty dir.
policy_file = $d/policy.yaml
policy_dirs = $d/policy.d
EOF
}

write_glance_conf() { # DIR PORT KEYSTONE_URL PASSWORD BARBICAN_URL
  local d=$1
  mkdir -p "$d/images" "$d/staging" "$d/tasks" "$d/policy.d" "$d/lock"
  cat >"$d/glance-api.conf" <<EOF
[DEFAULT]
bind_host = 127.0.0.1
bind_port = $2
workers = 0
log_file = $d/glance-api.log
enabled_backends = fs:file
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $d/images
[os_glance_staging_store]
filesystem_store_datadir = $d/staging
[os_glance_tasks_store]
filesystem_store_datadir = $d/tasks
[database]
connection = sqlite:///$d/glance.sqlite
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[keystone_authtoken]
www_authenticate_uri = $3
auth_url = $3
auth_type = password
username = admin
password = $4
project_name = admin
user_domain_name = Default
project_domain_name = Default
# A short cache: a revoked token is refused soon (the re-authentication test relies on it).
token_cache_time = 2
[oslo_policy]
policy_file = $d/policy.yaml
policy_dirs = $d/policy.d
[oslo_concurrency]
lock_path = $d/lock
# Signature verification: cursive reads img_signature_certificate_uuid's certificate from Barbican
# with the caller's token.
[key_manager]
backend = barbican
[barbican]
barbican_endpoint = $5
barbican_api_version = v1
auth_endpoint = $3/v3
EOF
}

write_barbican_conf() { # DIR PORT KEYSTONE_URL PASSWORD
  local d=$1
  mkdir -p "$d/home/.barbican" "$d/policy.d"
  # oslo.config finds ~/.barbican/barbican.conf first: HOME=$d/home keeps /etc/barbican out of it.
  cat >"$d/home/.barbican/barbican.conf" <<EOF
[DEFAULT]
host_href = http://127.0.0.1:$2
sql_connection = sqlite:///$d/barbican.sqlite
db_auto_create = True
log_file = $d/barbican-api.log
[keystone_authtoken]
www_authenticate_uri = $3
auth_url = $3
auth_type = password
username = admin
password = $4
project_name = admin
user_domain_name = Default
project_domain_name = Default
[keystone_notifications]
enable = False
[secretstore]
enabled_secretstore_plugins = store_crypto
[crypto]
enabled_crypto_plugins = simple_crypto
[simple_crypto_plugin]
kek = $($PY -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')
[oslo_policy]
policy_dirs = $d/policy.d
EOF
}

start_barbican() { # DIR PORT
  local d=$1
  HOME=$d/home setsid uwsgi --plugin python3 --http-socket "127.0.0.1:$2" \
    --paste config:/etc/barbican/barbican-api-paste.ini \
    --master --processes 1 --threads 1 --lazy-apps --die-on-term --no-orphans \
    --add-header "Connection: close" --buffer-size 65535 \
    --pidfile "$d/pid" --logto "$d/uwsgi.log" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 50); do [ -s "$d/pid" ] && return; sleep 0.1; done
  die "uwsgi for barbican did not start; see $d/uwsgi.log"
}

start_keystone() { # DIR PORT
  local d=$1
  # One single-threaded worker: keystone writes its sqlite database on every wrong password
  # (local_user.failed_auth_count) and on the next right one (the reset), in a read-then-write
  # transaction that oslo.db opens with a deferred BEGIN; with a second process writing too, that
  # transaction fails at once with "database is locked" (no busy timeout applies to it), keystone
  # raises, and uwsgi closes the connection without a response: the client's EOF under load
  # (40 parallel wrong-password logins: 3-8 EOFs with two workers, none in 120 with one, at the same
  # speed on 2 cores). "Connection: close": keystone under uwsgi otherwise stalls on keep-alive
  # connections from keystonemiddleware and clients.
  OS_KEYSTONE_CONFIG_FILES="$d/keystone.conf" setsid uwsgi --plugin python3 \
    --http-socket "${KEYSTONE_LISTEN:-127.0.0.1}:$2" --wsgi-file /usr/bin/keystone-wsgi-public \
    --master --processes 1 --threads 1 --lazy-apps --die-on-term --no-orphans \
    --add-header "Connection: close" --buffer-size 65535 \
    --pidfile "$d/pid" --logto "$d/uwsgi.log" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 50); do [ -s "$d/pid" ] && return; sleep 0.1; done
  die "uwsgi for keystone did not start; see $d/uwsgi.log"
}

start_glance() { # DIR
  local d=$1
  setsid $PY /usr/bin/glance-api --config-file "$d/glance-api.conf" </dev/null >>"$d/stdout.log" 2>&1 &
  echo $! >"$d/pid"
}

sqlite_wal() { $PY -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("pragma journal_mode=wal")' "$1"; }

# register_catalog KEYSTONE_URL PASSWORD GLANCE1 GLANCE2 DEADPORT BARBICAN: regions, endpoints, an
# application credential; prints the application credential as "id secret".
register_catalog() {
  $PY - "$@" <<'EOF'
import json, sys, urllib.request
ks, pw, g1, g2, dead, bb = sys.argv[1:]
def call(method, path, body=None, token=None):
    req = urllib.request.Request(ks + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    if token: req.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(req) as r:
        return r.headers.get("X-Subject-Token"), json.loads(r.read() or b"{}")
tok, auth = call("POST", "/v3/auth/tokens", {"auth": {"identity": {"methods": ["password"], "password": {"user": {
    "name": "admin", "domain": {"id": "default"}, "password": pw}}}, "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
user_id = auth["token"]["user"]["id"]
for r in ("RegionTwo", "RegionThree", "RegionFour"):
    call("POST", "/v3/regions", {"region": {"id": r}}, tok)
_, svc = call("POST", "/v3/services", {"service": {"type": "image", "name": "glance"}}, tok)
for region, url in (("RegionOne", g1), ("RegionTwo", g2), ("RegionFour", "http://127.0.0.1:%s" % dead)):
    for iface in ("public", "internal", "admin"):
        call("POST", "/v3/endpoints", {"endpoint": {"service_id": svc["service"]["id"], "interface": iface, "region_id": region, "url": url}}, tok)
_, km = call("POST", "/v3/services", {"service": {"type": "key-manager", "name": "barbican"}}, tok)
for region, url in (("RegionOne", bb), ("RegionTwo", "http://127.0.0.1:%s" % dead)):
    for iface in ("public", "internal", "admin"):
        call("POST", "/v3/endpoints", {"endpoint": {"service_id": km["service"]["id"], "interface": iface, "region_id": region, "url": url}}, tok)
_, ids = call("GET", "/v3/services?type=identity", None, tok)
call("POST", "/v3/endpoints", {"endpoint": {"service_id": ids["services"][0]["id"], "interface": "public", "region_id": "RegionThree", "url": ks + "/v3"}}, tok)
_, ac = call("POST", "/v3/users/%s/application_credentials" % user_id, {"application_credential": {"name": "flatcar-capo-test"}}, tok)
print(ac["application_credential"]["id"], ac["application_credential"]["secret"])
EOF
}

up() {
  local dir=$1 owner=${2:-}
  for t in uwsgi keystone-manage glance-manage barbican-wsgi-api; do command -v $t >/dev/null || die "$t is missing: run scripts/install-deps.sh"; done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -e "$dir/running" ] && die "$dir already holds an OpenStack; run '$0 down $dir' first"
  touch "$dir/running" # removed by down; the watchdog watches it
  local ksp g1p g2p dead bbp pw
  ksp=$(free_port); g1p=$(free_port); g2p=$(free_port); dead=$(free_port); bbp=$(free_port)
  pw=$($PY -c 'import secrets; print(secrets.token_hex(12))')
  local ks="http://127.0.0.1:$ksp"
  write_keystone_conf "$dir/keystone"
  write_glance_conf "$dir/glance-one" "$g1p" "$ks" "$pw" "http://127.0.0.1:$bbp"
  write_glance_conf "$dir/glance-two" "$g2p" "$ks" "$pw" "http://127.0.0.1:$bbp"
  write_barbican_conf "$dir/barbican" "$bbp" "$ks" "$pw"
  ( keystone-manage --config-file "$dir/keystone/keystone.conf" db_sync >"$dir/keystone/db_sync.log" 2>&1 &&
    sqlite_wal "$dir/keystone/keystone.sqlite" &&
    keystone-manage --config-file "$dir/keystone/keystone.conf" bootstrap --bootstrap-password "$pw" \
      --bootstrap-public-url "$ks/v3" --bootstrap-internal-url "$ks/v3" --bootstrap-admin-url "$ks/v3" \
      --bootstrap-region-id RegionOne >"$dir/keystone/bootstrap.log" 2>&1 ) &
  local kspid=$!
  if [ -n "$owner" ]; then
    # Watchdog: stop everything once the owner is gone (even if it died by SIGKILL).
    ( trap '' HUP; while kill -0 "$owner" 2>/dev/null && [ -e "$dir/running" ]; do sleep 1; done
      [ -e "$dir/running" ] && "$0" down "$dir" ) </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watchdog.pid"
  fi
  glance-manage --config-file "$dir/glance-one/glance-api.conf" db_sync >"$dir/glance-one/db_sync.log" 2>&1 ||
    die "glance db_sync failed; see $dir/glance-one/db_sync.log"
  sqlite_wal "$dir/glance-one/glance.sqlite"
  cp "$dir/glance-one/glance.sqlite" "$dir/glance-two/glance.sqlite"
  # Glance needs Keystone only per request: let it load while Keystone bootstraps.
  start_glance "$dir/glance-one"
  start_glance "$dir/glance-two"
  start_barbican "$dir/barbican" "$bbp"
  wait $kspid || die "keystone db_sync/bootstrap failed; see $dir/keystone/*.log"
  start_keystone "$dir/keystone" "$ksp"
  wait_http "$ks/v3" 60 "$dir/keystone/pid"
  local ac
  ac=$(register_catalog "$ks" "$pw" "http://127.0.0.1:$g1p" "http://127.0.0.1:$g2p" "$dead" "http://127.0.0.1:$bbp") || die "registering the catalog failed"
  wait_http "http://127.0.0.1:$g1p/versions" 60 "$dir/glance-one/pid"
  wait_http "http://127.0.0.1:$g2p/versions" 60 "$dir/glance-two/pid"
  wait_http "http://127.0.0.1:$bbp/" 60 "$dir/barbican/pid"
  write_clouds "$dir" "$ks" "$pw" "${ac% *}" "${ac#* }"
  cat >"$dir/env" <<EOF
KEYSTONE_URL=$ks/v3
GLANCE_ONE_URL=http://127.0.0.1:$g1p
GLANCE_TWO_URL=http://127.0.0.1:$g2p
BARBICAN_URL=http://127.0.0.1:$bbp
OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml
EOF
  # Ready means: an authenticated image list works in both regions.
  local deadline=$((SECONDS + 60)) tok
  tok=$(curl -s -i -H 'Content-Type: application/json' -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"},\"password\":\"$pw\"}}},\"scope\":{\"project\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"}}}}}" \
    "$ks/v3/auth/tokens" | tr -d '\r' | sed -n 's/^[Xx]-[Ss]ubject-[Tt]oken: //p')
  [ -n "$tok" ] || die "could not get a token from $ks"
  for g in $g1p $g2p; do
    until curl -sf -o /dev/null -H "X-Auth-Token: $tok" "http://127.0.0.1:$g/v2/images"; do
      ((SECONDS < deadline)) || die "authenticated image list on port $g does not work; see $dir/glance-*/glance-api.log"
      sleep 0.2
    done
  done
  until curl -sf -o /dev/null -H "X-Auth-Token: $tok" "http://127.0.0.1:$bbp/v1/secrets"; do
    ((SECONDS < deadline)) || die "authenticated secret list on port $bbp does not work; see $dir/barbican/*.log"
    sleep 0.2
  done
  echo "$dir"
}

write_clouds() { # DIR KS PW ACID ACSECRET
  local d=$1 ks=$2/v3
  umask 077
  cat >"$d/clouds.yaml" <<EOF
clouds:
  local: &local
    auth:
      auth_url: $ks
      username: admin
      password: $3
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
  local-two:
    <<: *local
    region_name: RegionTwo
  local-noimage:
    <<: *local
    region_name: RegionThree
  local-down:
    <<: *local
    region_name: RegionFour
  local-badpass:
    auth:
      auth_url: $ks
      username: admin
      password: wrong-$3
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
  local-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: $ks
      application_credential_id: $4
      application_credential_secret: $5
    region_name: RegionOne
EOF
  cat >"$d/openrc" <<EOF
export OS_AUTH_URL=$ks
export OS_USERNAME=admin
export OS_PASSWORD=$3
export OS_PROJECT_NAME=admin
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=RegionOne
export OS_IDENTITY_API_VERSION=3
EOF
}

stop_pidfile() { # PIDFILE
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  local dir=$1
  [ -d "$dir" ] || return 0
  rm -f "$dir/env" "$dir/running" # tells the watchdog to end
  stop_pidfile "$dir/glance-one/pid"
  stop_pidfile "$dir/glance-two/pid"
  stop_pidfile "$dir/barbican/pid"
  stop_pidfile "$dir/keystone/pid"
  if [ -s "$dir/watchdog.pid" ] && [ "$(cat "$dir/watchdog.pid")" != "$$" ]; then
    kill "$(cat "$dir/watchdog.pid")" 2>/dev/null || true
  fi
  rm -f "$dir/watchdog.pid"
}

glance_dir() {
  case $2 in one|two) echo "$1/glance-$2" ;; *) die "glance name must be one or two, not '$2'" ;; esac
}

case ${1:-} in
  up) [ $# -ge 2 ] || die "usage: $0 up DIR [--owner PID]"
      owner=; [ "${3:-}" = --owner ] && owner=${4:?--owner needs a PID}
      up "$2" "$owner" ;;
  down) [ $# -eq 2 ] || die "usage: $0 down DIR"; down "$2" ;;
  stop-glance) d=$(glance_dir "$2" "$3"); kill -KILL "$(cat "$d/pid")" 2>/dev/null || true
      while kill -0 "$(cat "$d/pid")" 2>/dev/null; do sleep 0.1; done ;;
  start-glance) d=$(glance_dir "$2" "$3"); start_glance "$d"
      port=$(sed -n 's/^bind_port = //p' "$d/glance-api.conf")
      wait_http "http://127.0.0.1:$port/versions" 60 "$d/pid" ;;
  *) echo "usage: $0 up DIR [--owner PID] | down DIR | stop-glance DIR one|two | start-glance DIR one|two" >&2; exit 2 ;;
esac
