#!/usr/bin/env bash
# Checks the cluster manifests (deploy/kubernetes): every resource against the Kubernetes
# API schemas with kubernetes-validate from PyPI (--strict: unknown fields fail too), the
# kustomizations' resource lists, and the ConfigMap's softpreempt.toml with
# `softpreempt config check`. A deliberately broken copy must fail, so the check itself is
# known to work. Called by scripts/test.sh; the validator's venv is cached per machine.
set -euo pipefail
cd "$(dirname "$0")/.."
VALIDATOR="kubernetes-validate==1.37.0"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/softpreempt-deploy/$(echo "$VALIDATOR" | sha256sum | cut -c1-16)
if [ ! -x "$cache/venv/bin/kubernetes-validate" ]; then
  echo "check-deploy: installing $VALIDATOR into $cache" >&2
  rm -rf "$cache" && mkdir -p "$cache"
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install -q --disable-pip-version-check "$VALIDATOR"
fi
kv=$cache/venv/bin/kubernetes-validate
py=$cache/venv/bin/python
softpreempt=${SOFTPREEMPT_BIN:-target/debug/softpreempt}

mapfile -t manifests < <(find deploy/kubernetes -name '*.yaml' ! -name kustomization.yaml | sort)
echo "check-deploy: validating ${#manifests[@]} manifests" >&2
"$kv" --strict "${manifests[@]}"

# Every kustomization names files that exist, and every manifest is named by one.
for k in $(find deploy/kubernetes -name kustomization.yaml); do
  d=$(dirname "$k")
  "$py" - "$k" "$d" <<'PY'
import os, sys, yaml
k, d = sys.argv[1], sys.argv[2]
res = yaml.safe_load(open(k))["resources"]
missing = [r for r in res if not os.path.exists(os.path.join(d, r))]
unnamed = [f for f in os.listdir(d) if f.endswith(".yaml") and f != "kustomization.yaml" and f not in res]
if missing or unnamed:
    sys.exit(f"{k}: missing {missing}, not listed {unnamed}")
PY
done

# The configuration the DaemonSet installs is one the layer accepts.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["softpreempt.toml"])' \
  deploy/kubernetes/configmap.yaml > "$tmp/softpreempt.toml"
"$softpreempt" config check "$tmp/softpreempt.toml" >/dev/null

# The validator rejects a manifest with a wrong type and one with an unknown field.
sed 's/containerPort: 9863/containerPort: "nine"/' deploy/kubernetes/daemonset.yaml > "$tmp/bad-type.yaml"
sed 's/imagePullPolicy: IfNotPresent/imagePullPolicy: IfNotPresent\n          pullImagePolicy: Always/' \
  deploy/kubernetes/daemonset.yaml > "$tmp/bad-field.yaml"
for bad in "$tmp/bad-type.yaml" "$tmp/bad-field.yaml"; do
  if "$kv" --strict "$bad" >/dev/null 2>&1; then
    echo "check-deploy: the validator accepted the broken $(basename "$bad")" >&2
    exit 1
  fi
done
echo "check-deploy: manifests, kustomizations and the ConfigMap's config are valid" >&2
