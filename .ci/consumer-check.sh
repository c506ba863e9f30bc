#!/usr/bin/env bash
# The package as a newcomer gets it: `npm pack`, then in an empty directory
# the README's install lines (with the tarball in place of the registry's
# copy), its quick starts under the strictest tsc flags (.ci/tsconfig.strictest.json),
# its JavaScript quick start running, and its curl commands against it. What the
# installed package's Markdown links to, and what its errors tell the reader
# to see, must be in it (.ci/check-package-links.mjs). The tarball is code,
# types and text (no image, no source map without its source, 600 kB at most);
# installed with oidc-provider alone it brings no store driver, and the quick
# start runs; a resource server installs it without oidc-provider; the Redis
# adapter compiles and runs with ioredis 6 (.ci/ioredis-6/).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
block() { node "$REPO/.ci/readme-block.mjs" "$1"; }

echo "packing"
TARBALL="$WORK/$(npm pack --silent --pack-destination "$WORK" | tail -n 1)"
tar -tzf "$TARBALL" > "$WORK/contents"
# Every file package.json points at (exports, types, bin), and what the registry page shows.
expected=$(node -e '
  const pkg = require("./package.json");
  const files = new Set(["LICENSE", "README.md", "CHANGELOG.md", "package.json", pkg.main, pkg.types, ...Object.values(pkg.bin ?? {})]);
  for (const target of Object.values(pkg.exports)) for (const file of Object.values(target)) files.add(file);
  console.log([...files].map((file) => file.replace(/^\.\//, "")).join("\n"));
')
for file in $expected; do
  grep -qx "package/$file" "$WORK/contents" || { echo "the tarball lacks $file"; cat "$WORK/contents"; exit 1; }
done
if grep -qE '^package/(build|test|demo|bench|lib)/' "$WORK/contents"; then
  echo "the tarball ships development files:"; grep -E '^package/(build|test|demo|bench|lib)/' "$WORK/contents"; exit 1
fi
if grep -qE '\.png$' "$WORK/contents"; then
  echo "the tarball ships images (docs/screenshots/ stays in the repository):"; grep -E '\.png$' "$WORK/contents"; exit 1
fi
# A source map is only worth its weight with the source it maps: every one's sources must ship beside it.
mkdir "$WORK/unpacked"
tar -xzf "$TARBALL" -C "$WORK/unpacked"
node -e '
  const fs = require("node:fs"), path = require("node:path");
  const root = process.argv[1];
  const orphans = [];
  for (const file of fs.readdirSync(root, { recursive: true }).filter((name) => name.endsWith(".map"))) {
    const map = JSON.parse(fs.readFileSync(path.join(root, file), "utf8"));
    const base = path.join(root, path.dirname(file), map.sourceRoot ?? "");
    for (const source of map.sources) if (!fs.existsSync(path.resolve(base, source))) orphans.push(`${file} -> ${source}`);
  }
  if (orphans.length) { console.error("source maps whose sources the tarball lacks:\n" + orphans.join("\n")); process.exit(1); }
' "$WORK/unpacked/package"
PACKED=$(stat -c %s "$TARBALL")
if [ "$PACKED" -gt 600000 ]; then
  echo "the tarball is $PACKED bytes, more than 600 kB"; tar -tvzf "$TARBALL" | sort -k3 -n | tail -n 15; exit 1
fi
echo "$(wc -l < "$WORK/contents") files in $(basename "$TARBALL"), $((PACKED / 1000)) kB packed: no image, no source map without its source"

mkdir "$WORK/app"
cd "$WORK/app"
npm init -y > /dev/null
npm pkg set type=module   # oidc-provider 9 is ESM only

echo "installing as the README says"
run_install_block() {
  # The registry's package name becomes the tarball; everything else is as written.
  block "$1" | sed "s#oidc-provider-impersonation#$TARBALL#g" | sed 's/^npm install/npm install --no-audit --no-fund --loglevel=error/' > "$WORK/$1.sh"
  bash -euo pipefail "$WORK/$1.sh"
}
run_install_block install
run_install_block install-ts

echo "installed with oidc-provider alone, the package brings no store driver (they are optional peers)"
for driver in ioredis pg; do
  [ ! -e "node_modules/$driver" ] || { echo "the README's install lines installed $driver"; npm ls "$driver"; exit 1; }
done

echo "the installed package's Markdown links, and the documentation its errors name, resolve inside it"
node "$REPO/.ci/check-package-links.mjs" oidc-provider-impersonation

echo "the command runs as installed (npx, the bin's run bit)"
usage=$(npx --no-install oidc-provider-impersonation --help)
grep -q "audit verify" <<< "$usage" || { echo "npx oidc-provider-impersonation --help did not print its usage"; exit 1; }

echo "TypeScript quick start (and the JavaScript one, which the README says is valid TypeScript) under the strictest flags"
block quick-start-ts > quick-start.ts
block quick-start > quick-start-js.ts
# The flags of every block a reader copies, the README's and docs/'s: one list.
cp "$REPO/.ci/tsconfig.strictest.json" tsconfig.strictest.json
cat > tsconfig.json <<'JSON'
{
  "extends": "./tsconfig.strictest.json",
  "files": ["quick-start.ts", "quick-start-js.ts"]
}
JSON
if ! npx tsc -p tsconfig.json > quick-start.out; then
  # Each file is its block from line 1: name the README's line.
  node -e '
    const [readme, out] = process.argv.slice(1).map((file) => require("node:fs").readFileSync(file, "utf8"));
    const first = (name) => readme.slice(0, readme.indexOf(`<!-- ${name} -->`)).split("\n").length + 2;
    const at = { "quick-start.ts": first("quick-start-ts"), "quick-start-js.ts": first("quick-start") };
    process.stdout.write(out.replace(/^(quick-start(?:-js)?\.ts)\((\d+),(\d+)\)/gm, (_, file, line, column) =>
      `README.md:${at[file] + Number(line) - 1}:${column}`));
  ' "$REPO/README.md" quick-start.out
  echo "a quick start of the README does not compile as it is written"
  exit 1
fi

echo "JavaScript quick start (neither ioredis nor pg installed), and the README's curl commands against it"
block quick-start > quick-start.mjs
PORT=$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
PORT=$PORT node quick-start.mjs > server.log 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 50); do grep -q listening server.log && break; sleep 0.2; done
grep -q listening server.log || { cat server.log; echo "the quick start did not start"; exit 1; }
block quick-start-curl > curl.sh
PORT=$PORT bash -euo pipefail curl.sh > curl.out || { cat curl.out server.log; echo "the README's curl commands failed"; exit 1; }
node -e '
  const out = require("node:fs").readFileSync("curl.out", "utf8");
  const body = JSON.parse(out.slice(out.lastIndexOf("{\"access_token\"")));
  const claims = JSON.parse(Buffer.from(body.access_token.split(".")[1], "base64url"));
  if (body.issued_token_type !== "urn:ietf:params:oauth:token-type:access_token" || claims.sub !== "bob") {
    console.error("unexpected exchange answer", out); process.exit(1);
  }
  console.log(`the curl commands got an impersonation token for ${claims.sub}, audience ${claims.aud}`);
'

echo "the README's actor sign-in, then the exchange with the actor token added"
{
  block quick-start-actor
  block quick-start-curl | sed '$ s/$/ \\/'
  block quick-start-actor-exchange
} > actor.sh
PORT=$PORT bash -euo pipefail actor.sh > actor.out || { cat actor.out server.log; echo "the README's actor commands failed"; exit 1; }
node -e '
  const out = require("node:fs").readFileSync("actor.out", "utf8");
  const body = JSON.parse(out.slice(out.lastIndexOf("{\"access_token\"")));
  const claims = JSON.parse(Buffer.from(body.access_token.split(".")[1], "base64url"));
  if (claims.sub !== "bob" || claims.act?.sub !== "alice") { console.error("unexpected exchange answer", out); process.exit(1); }
  console.log(`with the actor token: ${claims.act.sub} acts as ${claims.sub}`);
'

# ---------------------------------------------------------------------------
# docs/: every JavaScript and TypeScript block, compiled as TypeScript under
# the strictest flags, against the package as installed above.
# ---------------------------------------------------------------------------
echo "the README's TypeScript install brings pg's types: a pool that is no pg.Pool is refused"
mkdir pg-types
cat > pg-types/pool.ts <<'TS'
import { createPostgresAdapter } from 'oidc-provider-impersonation/adapters/postgres';

// @ts-expect-error: without pg's types `pool` is any, and this would compile.
createPostgresAdapter({ pool: 42 });
TS
cat > pg-types/tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "strict": true,
    "target": "es2022",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "noEmit": true,
    "skipLibCheck": true
  },
  "files": ["pool.ts"]
}
JSON
npx tsc -p pg-types

echo "what the blocks of docs/ import besides the package (hosts, stores), at the versions the package is tested with"
# shellcheck disable=SC2046
npm install --no-audit --no-fund --loglevel=error $(node -e '
  const pkg = require(process.argv[1]);
  const versions = { ...pkg.dependencies, ...pkg.devDependencies };
  console.log(process.argv.slice(2).map((name) => `${name}@${versions[name]}`).join(" "));
' "$REPO/package.json" koa koa-mount @types/koa-mount @koa/bodyparser express @types/express fastify @fastify/middie ioredis pg)

echo "every JavaScript and TypeScript block of docs/, each a module of its own, under the strictest flags"
node "$REPO/.ci/docs-snippets.mjs" docs-snippets "$REPO/docs"
# What fragments take from the page around them (the provider, the plugin, …), and the adapter a page starts from.
cp -R "$REPO/.ci/docs-host/." docs-snippets/
cat > tsconfig.docs.json <<'JSON'
{
  "extends": "./tsconfig.strictest.json",
  "include": ["docs-snippets"]
}
JSON
if ! npx tsc -p tsconfig.docs.json > docs-snippets.out; then
  # Each block's file keeps the page's line numbers: name the page.
  sed -E 's#^docs-snippets/([^/(]+)/[0-9]+\.ts\(([0-9]+),([0-9]+)\)#docs/\1.md:\2:\3#' docs-snippets.out
  echo "a block of docs/ does not compile as it is written"
  exit 1
fi
echo "every block of docs/ compiles"

# ---------------------------------------------------------------------------
# Installed for a resource server: the package alone, without oidc-provider.
# ---------------------------------------------------------------------------
echo "a resource server installs the package without oidc-provider (an optional peer), and its helper loads"
mkdir "$WORK/resource-server"
(
  cd "$WORK/resource-server"
  npm init -y > /dev/null
  npm pkg set type=module
  npm install --no-audit --no-fund --loglevel=error "$TARBALL"
  for absent in oidc-provider ioredis pg; do
    [ ! -e "node_modules/$absent" ] || { echo "npm install of the package alone installed $absent"; exit 1; }
  done
  node -e '
    import("oidc-provider-impersonation/resource-server").then(({ createImpersonationVerifier }) => {
      if (typeof createImpersonationVerifier !== "function") { console.error("no createImpersonationVerifier"); process.exit(1); }
      console.log("oidc-provider-impersonation/resource-server loads without oidc-provider");
    });
  '
)

# ---------------------------------------------------------------------------
# ioredis 6: the Redis adapter's types take its clients, and the adapter runs on them.
# ---------------------------------------------------------------------------
echo "ioredis 6: a strict TypeScript file passing its clients to the Redis adapter compiles, and the adapter runs on it"
npm install --no-audit --no-fund --loglevel=error 'ioredis@^6'
cp "$REPO/.ci/ioredis-6/consumer.ts" ioredis-6.ts
cat > tsconfig.ioredis-6.json <<'JSON'
{
  "extends": "./tsconfig.strictest.json",
  "files": ["ioredis-6.ts"]
}
JSON
npx tsc -p tsconfig.ioredis-6.json
cp "$REPO/.ci/ioredis-6/smoke.mjs" ioredis-6-smoke.mjs
node ioredis-6-smoke.mjs
