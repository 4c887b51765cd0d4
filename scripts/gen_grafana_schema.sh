#!/usr/bin/env bash
# Regenerate grafana/schema/dashboard.schema.json from the TypeScript types of the npm package @grafana/schema
# (which ships no JSON schema of its own). Needs node and npm; run it when bumping the Grafana version.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-13.2.3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm install --silent --no-audit --no-fund "@grafana/schema@$version" typescript typescript-json-schema)
(cd "$work" && npx typescript-json-schema --required --ignoreErrors \
  node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts Dashboard -o dashboard.schema.json)
cp "$work/dashboard.schema.json" grafana/schema/dashboard.schema.json
echo "grafana/schema/dashboard.schema.json regenerated from @grafana/schema $version"
