#!/usr/bin/env bash
# The rules crates stay free of I/O: gwhub-model, gwhub-spoke-rules,
# gwhub-hub-rules and gwhub-dns-rules must not depend (normal dependencies,
# transitively) on an async runtime, gRPC, a Kubernetes client or a DNS
# client. The compiler then keeps every rule pure: code in them cannot reach
# a socket, a timer, an API server or a name server.
# Fails naming the crate and the path to the forbidden dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tokio|tonic|kube-client|kube-runtime|hyper|reqwest|hickory-client|hickory-proto|hickory-resolver)$'
status=0
for crate in gwhub-model gwhub-spoke-rules gwhub-hub-rules gwhub-dns-rules; do
  deps=$(cargo tree -e normal -p "$crate" --locked --prefix none --format '{p}' |
    awk '{print $1}' | sort -u)
  bad=$(grep -E "$forbidden" <<<"$deps" || true)
  if [[ -n $bad ]]; then
    for b in $bad; do
      echo "error: $crate depends on $b (rules crates must stay pure):" >&2
      cargo tree -e normal -p "$crate" --locked -i "$b" >&2 || true
    done
    status=1
  fi
done
if [[ $status -eq 0 ]]; then
  echo "check-deps: gwhub-model, gwhub-spoke-rules, gwhub-hub-rules and gwhub-dns-rules use no tokio, tonic, Kubernetes or DNS client"
fi
exit $status
