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

# The hub's parts (hub/*/) point down only. Each part may name directly only
# the gwhub crates listed for it, and none of the external crates that would
# let it do what belongs to another part (serve, call an API or name server,
# hold TLS material, parse flags). Cargo stops cycles between crates, not an
# edge sideways or up: this stops those. Direct normal dependencies only, on
# purpose: gwhub-proto and gwhub-common still bring tonic and kube-runtime to
# every crate transitively. One line per part:
#   crate | the gwhub crates it may depend on | external crates it must not (ERE)
hub_parts='
gwhub-index | gwhub-model gwhub-hub-rules gwhub-dns-rules gwhub-proto gwhub-common | ^(tonic.*|hyper.*|axum.*|tower.*|http.*|kube|kube-.*|rustls.*|tokio-rustls|rcgen|hickory-.*|clap.*)$
'
check_hub_parts() {
  local meta crate allowed banned deps dep failed=0
  meta=$(cargo metadata --no-deps --format-version 1 --locked --offline)
  while IFS='|' read -r crate allowed banned; do
    crate=$(xargs <<<"$crate")
    [[ -n $crate ]] || continue
    allowed=" $(xargs <<<"$allowed") "
    banned=$(xargs <<<"$banned")
    deps=$(jq -r --arg c "$crate" \
      '.packages[] | select(.name == $c) | .dependencies[] | select(.kind == null) | .name' \
      <<<"$meta" | sort -u)
    if [[ -z $deps ]]; then
      echo "error: check-deps: no package $crate (or it has no dependencies)" >&2
      failed=1
      continue
    fi
    for dep in $deps; do
      if [[ $dep == gwhub-* && $allowed != *" $dep "* ]]; then
        echo "error: $crate -> $dep (not allowed: $crate may depend only on$allowed)" >&2
        failed=1
      elif [[ $dep =~ $banned ]]; then
        echo "error: $crate -> $dep (not allowed: $crate must name no crate matching $banned)" >&2
        failed=1
      fi
    done
  done <<<"$hub_parts"
  if [[ $failed -eq 0 ]]; then
    echo "check-deps: the hub's parts ($(awk -F'|' 'NF > 1 {gsub(/ /, "", $1); printf "%s%s", sep, $1; sep = ", "}' <<<"$hub_parts")) depend only on the crates below them"
  fi
  return $failed
}
check_hub_parts || status=1
exit $status
