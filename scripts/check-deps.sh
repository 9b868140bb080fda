#!/usr/bin/env bash
# Two checks on the workspace's dependency structure, both cheap (cargo's
# metadata and the sources' text; nothing is built).
#
# 1. The rules crates stay free of I/O: gwhub-model, gwhub-spoke-rules,
# gwhub-hub-rules and gwhub-dns-rules must not depend (normal dependencies,
# transitively) on an async runtime, gRPC, a Kubernetes client or a DNS
# client. The compiler then keeps every rule pure: code in them cannot reach
# a socket, a timer, an API server or a name server.
# Fails naming the crate and the path to the forbidden dependency.
#
# 2. No module circles inside a hub crate (below). Fails naming the modules
# of each loop and the arrows between them, with a file:line for each.
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

# 2. No module circles inside a crate. Each `crate::X` path (or member of
# a grouped `use crate::{X, ..}`) in a non-comment line of a file of
# top-level module M is an arrow M -> X; so is a `super::` chain that
# reaches the crate root from that file (one `super::` in `src/m.rs`, two
# in `src/m/x.rs`: the index's parts name each other that way); paths inside a `#[cfg(test)] mod`
# block or file do not count, nor do doc links (comments). tsort then finds
# any loop. A loop means neither module can be read, changed or moved to
# its own crate without the other. Text only (a `#[cfg(test)]` item other
# than a module still counts; a string literal spanning lines is read as
# code). Per crate: list each part crate here as it leaves gwhub-hub; its
# sources are found through cargo's metadata wherever it moves.
circle_crates=(gwhub-hub gwhub-api gwhub-k8s gwhub-dns gwhub-identity gwhub-net gwhub-index)

# The directory of crate $1's library sources, from cargo's metadata.
crate_src() {
  cargo metadata --no-deps --format-version 1 --offline --locked |
    jq -r --arg c "$1" '.packages[] | select(.name == $c) | .targets[]
      | select(.kind | index("lib")) | .src_path' | xargs dirname
}

# Prints "from to file:line" for each arrow between top-level modules of the
# crate whose sources are in $1.
module_arrows() {
  local src=$1 f rel
  # Files that are test modules (`#[cfg(test)]` then `mod name;`).
  local tests
  tests=$(find "$src" -name '*.rs' -print0 | xargs -0 awk '
    function children(f) { if (f ~ /\/(mod|lib|main)\.rs$/) { sub(/\/[^\/]*$/, "", f); return f }
                           sub(/\.rs$/, "", f); return f }
    FNR == 1 { pending = 0 }
    pending && /^[ \t]*(pub(\([^)]*\))?[ \t]+)?mod[ \t]+[A-Za-z0-9_]+[ \t]*;/ {
      name = $0; sub(/^[ \t]*(pub(\([^)]*\))?[ \t]+)?mod[ \t]+/, "", name); sub(/[ \t]*;.*/, "", name)
      print children(FILENAME) "/" name ".rs"; print children(FILENAME) "/" name "/mod.rs"
    }
    { pending = ($0 ~ /^[ \t]*#\[cfg\(test\)\][ \t]*$/) || (pending && $0 ~ /^[ \t]*#\[/) }')
  local modules
  modules=$(find "$src" -mindepth 1 -maxdepth 1 \( -name '*.rs' -o -type d \) -printf '%f\n' |
    sed 's/\.rs$//' | { grep -vxE 'lib|main' || true; } | sort -u)
  while IFS= read -r f; do
    grep -qxF "$f" <<<"$tests" && continue
    rel=${f#"$src"/}
    case $rel in lib.rs | main.rs) continue ;; esac
    # How many `super::` reach the crate root from this file: its depth
    # below src/ (a `mod.rs` is its directory's module).
    depth=$(tr -cd / <<<"${rel%/mod.rs}" | wc -c)
    awk -v from="${rel%%[./]*}" -v depth=$((depth + 1)) -v modules="$(tr '\n' ' ' <<<"$modules")" '
      BEGIN { n = split(modules, m, " "); for (i = 1; i <= n; i++) known[m[i]] = 1 }
      function arrow(to) { if (to in known && to != from) print from, to, FILENAME ":" FNR }
      function count(s, c,   t) { t = s; return gsub(c, "", t) }
      {
        line = $0
        gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
        gsub(/'"'"'([^'"'"'\\]|\\.)'"'"'/, "'"'"' '"'"'", line)
        sub(/\/\/.*/, "", line)
        if (skipping) {
          depth += count(line, "{") - count(line, "}")
          if (depth <= 0) skipping = 0
          next
        }
        if (pending) {
          if (line ~ /^[ \t]*(pub(\([^)]*\))?[ \t]+)?mod[ \t]+[A-Za-z0-9_]+[ \t]*\{/) {
            depth = count(line, "{") - count(line, "}"); skipping = depth > 0; pending = 0; next
          }
          if (line !~ /^[ \t]*#\[/) pending = 0
        }
        if (line ~ /^[ \t]*#\[cfg\(test\)\][ \t]*$/) { pending = 1; next }
        # A `super::` chain exactly as deep as the file is `crate::`.
        out = ""; rest = line
        while (match(rest, /(super::)+/)) {
          pre = substr(rest, 1, RSTART - 1); chain = substr(rest, RSTART, RLENGTH)
          if (RLENGTH / 7 == depth && substr(pre, length(pre), 1) !~ /[$A-Za-z0-9_:]/) chain = "crate::"
          out = out pre chain; rest = substr(rest, RSTART + RLENGTH)
        }
        line = out rest
        # A grouped `crate::{a::x, b}`, to the end of its `use`.
        if (group != "" || line ~ /(^|[^$A-Za-z0-9_:])crate::\{/) {
          if (group == "") { group = line; sub(/.*crate::\{/, "{", group) } else group = group " " line
          if (group !~ /;/) next
          sub(/;.*/, "", group); d = 0; head = 1
          for (i = 1; i <= length(group); i++) {
            c = substr(group, i, 1)
            if (c == "{") { d++; head = (d == 1); continue }
            if (c == "}") { d--; continue }
            if (c == "," && d == 1) { head = 1; continue }
            if (head && d == 1 && c ~ /[A-Za-z_]/) {
              match(substr(group, i), /^[A-Za-z0-9_]+/); arrow(substr(group, i, RLENGTH))
              head = 0; i += RLENGTH - 1
            } else if (c !~ /[ \t]/) head = 0
          }
          group = ""; next
        }
        while (match(line, /(^|[^$A-Za-z0-9_:])crate::[A-Za-z_][A-Za-z0-9_]*/)) {
          to = substr(line, RSTART, RLENGTH); sub(/.*crate::/, "", to); arrow(to)
          line = substr(line, RSTART + RLENGTH)
        }
      }' "$f"
  done < <(find "$src" -name '*.rs' | sort)
}

for crate in "${circle_crates[@]}"; do
  src=$(realpath --relative-to=. "$(crate_src "$crate")")
  arrows=$(module_arrows "$src")
  # tsort names each loop it breaks: a header line, then one member a line.
  loops=$(awk '{ print $1, $2 }' <<<"$arrows" | sort -u | tsort 2>&1 >/dev/null |
    awk '/input contains a loop/ { if (l != "") print l; l = "loop:"; next }
         { sub(/^tsort: /, ""); l = l " " $0 } END { if (l != "") print l }' || true)
  if [[ -n $loops ]]; then
    echo "error: $crate has module circles (the members of each loop):" >&2
    sed 's/^/  /' <<<"$loops" >&2
    echo "the arrows inside each loop (the first use of each):" >&2
    awk 'NR == FNR { for (i = 2; i <= NF; i++) loop[$i] = FNR; next }
         ($1 in loop) && ($2 in loop) && loop[$1] == loop[$2] && !seen[$1 " " $2]++ { print "  " $1 " -> " $2 " (" $3 ")" }' \
      <(cat <<<"$loops") <(cat <<<"$arrows") >&2
    status=1
  else
    echo "check-deps: $crate's top-level modules form no circle ($(awk '{ print $1, $2 }' <<<"$arrows" | sort -u | wc -l) arrows)"
  fi
done
# The hub's parts (hub/*/) point down only. Each part may name directly only
# the gwhub crates listed for it, and none of the external crates that would
# let it do what belongs to another part (serve, call an API or name server,
# hold TLS material, parse flags). Cargo stops cycles between crates, not an
# edge sideways or up: this stops those. Direct normal dependencies only, on
# purpose: gwhub-proto and gwhub-common still bring tonic and kube-runtime to
# every crate transitively. gwhub-identity names no Kubernetes client: the
# Dashboard readers' reviews go through its authz::Reviews port, which
# gwhub-k8s implements. gwhub-k8s (the management cluster's side) serves
# nothing and names no listener: the runtime wires it to them; gwhub-dns
# (fleet DNS) writes through gwhub-k8s's API budget and the RFC 2136
# client, and names no listener either. gwhub-api (ingest, the Dashboard,
# the web page) serves over the listeners gwhub-net accepts on, reads the
# index's views and names no Kubernetes client, name server or TLS stack:
# the wiring (gwhub-hub) hands it what it needs of them. One line per part:
#   crate | the gwhub crates it may depend on | external crates it must not (ERE)
hub_parts='
gwhub-index | gwhub-model gwhub-hub-rules gwhub-dns-rules gwhub-proto gwhub-common | ^(tonic.*|hyper.*|axum.*|tower.*|http.*|kube|kube-.*|rustls.*|tokio-rustls|rcgen|hickory-.*|clap.*)$
gwhub-identity | gwhub-model gwhub-hub-rules gwhub-proto gwhub-common | ^(kube|kube-.*|k8s-openapi|axum.*|hickory-.*|clap.*)$
gwhub-net | gwhub-identity gwhub-model gwhub-hub-rules gwhub-common | ^(kube|kube-.*|axum.*|hickory-.*|clap.*)$
gwhub-k8s | gwhub-index gwhub-identity gwhub-model gwhub-hub-rules gwhub-proto gwhub-common | ^(axum.*|tower.*|hyper.*|http.*|hickory-.*|clap.*|rcgen)$
gwhub-api | gwhub-index gwhub-identity gwhub-net gwhub-model gwhub-hub-rules gwhub-proto gwhub-common | ^(kube|kube-.*|k8s-openapi|hickory-.*|rustls.*|tokio-rustls|rcgen|clap.*)$
gwhub-dns | gwhub-k8s gwhub-index gwhub-dns-rules gwhub-dns-rfc2136 gwhub-model gwhub-hub-rules gwhub-proto gwhub-common | ^(axum.*|tower.*|hyper.*|http.*|tonic.*|rustls.*|tokio-rustls|rcgen|clap.*)$
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

# The services handed a port of the index (gwhub_index's ports.rs) name
# no `Index`: what each may do with the hub's state is its port, nothing
# more. They are gwhub-api (the agents' stream, the readers' front ends),
# gwhub-dns (fleet DNS) and gwhub-k8s (the store, liveness, the status
# writer, the inventory, Events) but for its readiness.rs, which runs the
# aggregation pass the hub waits on before it turns writable. Test code (a
# tests.rs, or a file's part from its first `#[cfg(test)]` on) builds an
# index of its own; comments may name it.
check_ports() {
  local crate src hits failed=0
  for crate in gwhub-api gwhub-dns gwhub-k8s; do
    src=$(crate_src "$crate")
    hits=$(find "$src" -name '*.rs' ! -name tests.rs ! -path "$src/readiness.rs" -print0 |
      xargs -0 awk '
        FNR == 1 { testing = 0 }
        /^[[:space:]]*#\[cfg\(test\)\]/ { testing = 1 }
        !testing && !/^[[:space:]]*\/\// && /(^|[^[:alnum:]_])Index([^[:alnum:]_]|$)/ {
          print FILENAME ":" FNR ": " $0
        }')
    if [[ -n $hits ]]; then
      echo "error: $crate names the index itself, not its port (gwhub_index::ports):" >&2
      echo "$hits" >&2
      failed=1
    fi
  done
  if [[ $failed -eq 0 ]]; then
    echo "check-deps: gwhub-api, gwhub-dns and gwhub-k8s reach the index only through their ports"
  fi
  return $failed
}
check_ports || status=1

# The index's lock order is checked by the compiler from a root each
# operation makes (hub/index/src/lock_order.rs); what it cannot check is
# that a root is made only where an operation starts. So every
# `Held::nothing()` outside test code is the first statement of its
# function: the line before it ends a function's signature.
check_lock_roots() {
  local src hits
  src=$(crate_src gwhub-index)
  hits=$(find "$src" -name '*.rs' ! -name tests.rs -print0 |
    xargs -0 awk '
      FNR == 1 { testing = 0; prev = "" }
      /^[[:space:]]*#\[cfg\(test\)\]/ { testing = 1 }
      !testing && !/^[[:space:]]*\/\// && /Held::nothing\(\)/ {
        if (!(prev ~ /\{[[:space:]]*$/ && (prev ~ /(^|[^[:alnum:]_])fn[[:space:]]/ || prev ~ /^[[:space:]]*\)/))) {
          print FILENAME ":" FNR ": " $0
        }
      }
      !/^[[:space:]]*$/ { prev = $0 }')
  if [[ -n $hits ]]; then
    echo "error: gwhub-index makes a lock-order root (Held::nothing()) other than as its function's first statement:" >&2
    echo "$hits" >&2
    return 1
  fi
  echo "check-deps: gwhub-index makes its lock-order roots only where an operation starts"
}
check_lock_roots || status=1
exit $status
