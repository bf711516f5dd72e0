#!/usr/bin/env bash
# The package as a new user gets it: packed, installed into a fresh project exactly as the README's Install
# section says (from the registry, beside today's Effect 3), the README's examples type-checked there under
# `strict` with `moduleResolution` `nodenext` and `bundler`, and `examples/minimal.ts` run from there against
# the embedded backend. Any failing step fails the script, saying which. Run by CI (`npm run test:consumer`);
# it takes a few minutes (the install compiles better-sqlite3).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/effect-rl-consumer-XXXXXX")"
trap 'rm -rf "$work"' EXIT
step() { printf '\n== consumer test: %s\n' "$*"; }
fail() { printf '\nconsumer test FAILED: %s\n' "$*" >&2; exit 1; }

step "pack"
(cd "$repo" && npm pack --silent --pack-destination "$work") > "$work/pack.txt" || fail "npm pack"
tarball="$work/$(tail -n 1 "$work/pack.txt")"
[ -f "$tarball" ] || fail "no tarball at $tarball"

# The Install section's commands, with the tarball in place of the registry name.
install_line="$(grep -E '^npm install effect-rl ' "$repo/README.md" | head -n 1)"
dev_line="$(grep -E '^npm install --save-dev ' "$repo/README.md" | head -n 1)"
[ -n "$install_line" ] && [ -n "$dev_line" ] || fail "the README has no Install commands"

step "a fresh project: ${install_line/effect-rl/<tarball>}; $dev_line"
mkdir "$work/app"
cd "$work/app"
printf '{ "name": "consumer", "version": "1.0.0", "private": true, "type": "module" }\n' > package.json
# shellcheck disable=SC2086
npm install --no-audit --no-fund ${install_line#npm install effect-rl } "$tarball" || fail "$install_line"
# shellcheck disable=SC2086
npm install --no-audit --no-fund ${dev_line#npm install } @types/node@20 || fail "$dev_line"
# The optional peers, as the README's "Tool agents" and "Rollouts across machines" sections say to install them
# for the agent layers and the cluster (a line may name several).
for peer in $(grep -oE 'npm install (@effect/ai|openai|@effect/cluster)[^`]*' "$repo/README.md" | sed 's/^npm install //' | tr ' ' '\n' | grep -v '^$' | sort -u); do
  npm install --no-audit --no-fund "$peer" || fail "npm install $peer (the README's optional peer)"
done
[ "$(node -p 'require("effect/package.json").version.split(".")[0]')" = "3" ] || fail "the project did not get Effect 3"
[ ! -d node_modules/effect-rl/node_modules/effect ] || fail "effect-rl brought its own copy of effect"

step "the README's examples, type-checked in the project"
mkdir src
for block in $(node -e '
  const fs = require("fs"), path = require("path")
  const readme = fs.readFileSync(process.argv[1], "utf8")
  const dir = path.join(path.dirname(process.argv[1]), "examples")
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".ts"))
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1].trimEnd())
  const used = new Set(blocks.map((b) => files.find((f) => fs.readFileSync(path.join(dir, f), "utf8").includes(b))))
  used.delete(undefined)
  console.log([...used].join("\n"))' "$repo/README.md"); do
  cp "$repo/examples/$block" src/
done
ls src
for resolution in nodenext bundler; do
  if [ "$resolution" = nodenext ]; then module=nodenext; else module=esnext; fi
  cat > "tsconfig.$resolution.json" <<EOF
{
  "compilerOptions": {
    "target": "ES2022", "lib": ["ES2022"], "types": ["node"],
    "module": "$module", "moduleResolution": "$resolution",
    "strict": true, "exactOptionalPropertyTypes": true, "noEmit": true, "skipLibCheck": true
  },
  "include": ["src"]
}
EOF
  npx tsc -p "tsconfig.$resolution.json" || fail "type-checking the README's examples with moduleResolution $resolution"
  echo "type-checked with moduleResolution $resolution"
done

step "beside Effect 4, npm refuses the install and names the conflict"
mkdir "$work/effect4"
(
  cd "$work/effect4"
  printf '{ "name": "effect4", "version": "1.0.0", "private": true, "type": "module" }\n' > package.json
  npm install --no-audit --no-fund effect@4 > /dev/null || fail "installing effect@4"
  if npm install --no-audit --no-fund --ignore-scripts "$tarball" > install.log 2>&1; then
    fail "the package installed beside effect 4"
  fi
  grep -q "ERESOLVE" install.log && grep -q 'peer effect@"\^3' install.log || fail "npm's refusal did not name the conflict: $(cat install.log)"
  echo "refused: $(grep -m1 'peer effect@' install.log)"
)

step "examples/minimal.ts, run from the project against the embedded backend"
cp "$repo/examples/minimal.ts" src/minimal.ts
out="$(npx tsx src/minimal.ts)" || fail "running examples/minimal.ts"
echo "$out"
echo "$out" | tail -n 1 | grep -Eq '^[0-9.]+( -> [0-9.]+)+$' || fail "minimal.ts did not print its reward per step"
echo "consumer test passed"
