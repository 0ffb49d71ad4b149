#!/usr/bin/env bash
# Make sure the servers and system libraries the kit drives are installed.
# As root on Debian/Ubuntu: installs what is missing with apt-get. Otherwise: prints
# exactly what to install (or to use environment.yml with conda) and exits non-zero.
set -euo pipefail

# command-or-file to look for  ->  Debian package that provides it
declare -A NEED=(
  [memcached]=memcached
  [redis-server]=redis-server
  [redis-cli]=redis-tools
  [initdb]=postgresql
  [sshd]=openssh-server
  [ip]=iproute2
  [pdftoppm]=poppler-utils
  [lib:libpango-1.0.so.0]=libpango-1.0-0
  [lib:libpangoft2-1.0.so.0]=libpangoft2-1.0-0
  [font:DejaVuSans.ttf]=fonts-dejavu-core
  [lib:libharfbuzz-subset.so.0]=libharfbuzz-subset0
  # HdrHistogram's own Java log reader: the tests check `harness export hdr` with it
  [java]=default-jre-headless
  [jar:hdrhistogram.jar]=libhdrhistogram-java
  [gcc]=gcc  # builds the native load-generator core (optional: Python path without it)
  [header:openssl/ssl.h]=libssl-dev  # TLS in the native core (optional)
  [openssl]=openssl  # CAs and certificates in the TLS tests
  [nutcracker]=nutcracker  # a memcached proxy (tests, experiments/deployment/)
  [pgbouncer]=pgbouncer  # a PostgreSQL pooler (tests, experiments/deployment/)
  [pgpool]=pgpool2  # another PostgreSQL pooler (tests, experiments/deployment/)
  [haproxy]=haproxy  # a TCP proxy before Redis and PostgreSQL (tests, experiments/deployment/)
  [prometheus]=prometheus  # scrapes `harness run --metrics` in the tests
  [strace]=strace  # signals and kills at exact system calls in the tests
  [stress-ng]=stress-ng  # a CPU hog beside runs in the tests
  [chromium]=chromium  # JupyterLab in a real browser in the tests (Playwright drives it)
)

have() {
  case "$1" in
    lib:*) ldconfig -p 2>/dev/null | grep -q "${1#lib:}" ;;
    jar:*) [ -f "/usr/share/java/${1#jar:}" ] ;;
    font:*) [ -n "$(find /usr/share/fonts -name "${1#font:}" -print -quit 2>/dev/null)" ] ;;
    header:*) [ -f "/usr/include/${1#header:}" ] ;;
    initdb) command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 ;;
    sshd) command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] ;;
    *) command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] ;;
  esac
}

missing=()
for thing in "${!NEED[@]}"; do
  have "$thing" || missing+=("${NEED[$thing]}")
done
[ ${#missing[@]} -eq 0 ] && { echo "system packages: all present"; exit 0; }

# Deduplicate and sort for a stable message.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "system packages: installed ${missing[*]}"
else
  cat >&2 <<MSG
Missing system packages: ${missing[*]}
Install them, then run 'make setup' again:
  Debian/Ubuntu:  sudo apt-get install ${missing[*]}
  any OS (conda): conda env create -f environment.yml && conda activate kvbench
MSG
  exit 1
fi
