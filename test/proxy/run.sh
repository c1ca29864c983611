#!/usr/bin/env bash
# Runs toolfs-api behind a real nginx on loopback and checks, with
# test/proxy/check, that streamed reads pass unbuffered (relying on the
# server's X-Accel-Buffering: no, not on proxy_buffering off), that error
# statuses and bodies pass unchanged, and that a mixed load runs without
# failures. Everything lives in one temporary folder; every process it starts
# is stopped on exit, and the whole run is bounded by timeout(1).
#
#   bash test/proxy/run.sh                                # 30 s of load
#   TOOLFS_PROXY_LOAD_SECONDS=10 bash test/proxy/run.sh   # CI's short run
set -euo pipefail

load_seconds=${TOOLFS_PROXY_LOAD_SECONDS:-30}
if [ -z "${TOOLFS_PROXY_BOUNDED:-}" ]; then
  # timeout signals its whole process group: this script, the server, nginx
  # and the checker all stop even if a step hangs.
  TOOLFS_PROXY_BOUNDED=1 exec timeout -k 10 "$((load_seconds + 300))" bash "$0" "$@"
fi

cd "$(dirname "$0")/../.."
nginx_bin=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$nginx_bin" ] || { echo "nginx not found (apt-get install nginx)"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/toolfs-proxy.XXXXXX")
server_pid= nginx_pid=
cleanup() {
  status=$?
  for pid in $nginx_pid $server_pid; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $nginx_pid $server_pid; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    echo "== server log (tail)"; tail -n 20 "$work/server.log" 2>/dev/null || true
    echo "== nginx error log (tail)"; tail -n 20 "$work/nginx/error.log" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

echo "== build"
go build -o "$work/toolfs-api" ./cmd/toolfs-api
mkdir -p "$work/root" "$work/nginx"

echo "== server"
"$work/toolfs-api" --root "$work/root" --addr 127.0.0.1:0 \
  --log-format json >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  grep -q '^toolfs-api serving' "$work/server.out" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { echo "server exited"; exit 1; }
  sleep 0.1
done
server_url=$(sed -n 's/^toolfs-api serving .* on \(http:\/\/[0-9.:]*\)$/\1/p' "$work/server.out")
[ -n "$server_url" ] || { echo "server did not start"; exit 1; }
echo "$server_url"

# When run as root, nginx's workers run as nobody: they must be able to walk
# into the folder (the master creates the temp folders for them).
chmod 711 "$work" "$work/nginx"

echo "== nginx"
# The locations are the ones README.md shows, under a site-wide gzip for text
# (common: Debian's nginx.conf turns gzip on). While nginx buffers a response
# it passes no flushes on, so gzip holds small chunks back until the end;
# X-Accel-Buffering: no turns buffering off and every chunk is flushed. The
# same holds for the change feed's text/event-stream, gzipped here too (some
# sites gzip every text type).
# /buffered/ is the control: it ignores that header, and the streaming check
# must see the difference.
healthy() { # GET /healthz through nginx, with bash alone
  local reply
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  reply=$(head -c 12 <&3)
  exec 3<&-
  [ "$reply" = "HTTP/1.1 200" ]
}
start_nginx() {
  local port=$1
  cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log $work/nginx/access.log;
  gzip on;
  gzip_types text/plain text/event-stream;
  gzip_min_length 0;
  client_body_temp_path $work/nginx/client_body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass $server_url;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 300s;
      client_max_body_size 32m;
    }
    location /files/ {
      proxy_pass $server_url;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 300s;
      client_max_body_size 1g;
      proxy_request_buffering off;
    }
    location /buffered/ {
      proxy_pass $server_url/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_ignore_headers X-Accel-Buffering;
      proxy_read_timeout 300s;
    }
  }
}
EOF
  "$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
  nginx_pid=$!
  for _ in $(seq 50); do
    if ! kill -0 "$nginx_pid" 2>/dev/null; then
      wait "$nginx_pid" 2>/dev/null || true
      nginx_pid=
      return 1
    fi
    healthy "$port" && return 0
    sleep 0.1
  done
  return 1
}
proxy_url=
for _ in 1 2 3 4 5; do
  # Below the kernel's ephemeral range (32768 up), so no client socket holds
  # it; a port in use makes nginx exit, and we try another.
  port=$((10000 + RANDOM % 20000))
  if start_nginx "$port"; then proxy_url="http://127.0.0.1:$port"; break; fi
done
[ -n "$proxy_url" ] || { echo "nginx did not start"; exit 1; }
echo "$proxy_url -> $server_url"

echo "== checks (load ${load_seconds}s)"
go run ./test/proxy/check -direct "$server_url" -proxy "$proxy_url" -root "$work/root" \
  -load "${load_seconds}s"
