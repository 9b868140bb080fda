#!/usr/bin/env bash
# Installs Debian's BIND 9 (named, tsig-keygen), Knot DNS (knotd) and
# bind9-dnsutils (dig, nsupdate) once, for the RFC 2136 field tests
# (dns-rfc2136/tests/): real authoritative servers on loopback. Idempotent:
# with every tool present it does nothing.
set -euo pipefail
need=()
command -v named >/dev/null 2>&1 || [ -x /usr/sbin/named ] || need+=(bind9)
command -v knotd >/dev/null 2>&1 || [ -x /usr/sbin/knotd ] || need+=(knot)
{ command -v dig && command -v nsupdate; } >/dev/null 2>&1 || need+=(bind9-dnsutils)
[ ${#need[@]} -eq 0 ] && exit 0
export DEBIAN_FRONTEND=noninteractive
# The lists may be absent or old on a fresh machine.
apt-get update -qq >/dev/null
# The packages' own services are not wanted: the tests start their servers
# on free loopback ports with their own configuration.
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
