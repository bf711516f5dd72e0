#!/usr/bin/env bash
# The package as a new user gets it: packed, and a project made from an empty directory exactly as the README's
# Install section says (its shell lines one by one from `npm init -y`, the tarball in place of the registry's
# effect-rl; its tsconfig.json), with nothing left for npm's install-script policy to warn about; the README's
# loop written to loop.ts, `npx tsc` there (the other examples of the README and docs/ too, and once more with
# `moduleResolution` `bundler`), and `npx tsx loop.ts` run against the embedded backend. Any failing step fails the script, saying
# which. Run by CI (`npm run test:consumer`); it takes a few minutes (the install compiles better-sqlite3).
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

# The Install section, as a reader follows it: its shell block line by line (the tarball in place of the
# registry's effect-rl), its tsconfig.json, and the README's loop as loop.ts.
section() {
  node -e '
    const [file, kind] = process.argv.slice(1)
    const readme = require("fs").readFileSync(file, "utf8")
    const install = readme.split(/^## /m).find((s) => s.startsWith("Install\n")) ?? ""
    const loop = readme.split(/^## /m).find((s) => s.startsWith("A complete training loop\n")) ?? ""
    const block = (text, lang) => (text.match(new RegExp("```" + lang + "\n([\\s\\S]*?)```")) ?? [])[1] ?? ""
    process.stdout.write(kind === "loop" ? block(loop, "ts") : block(install, kind))' "$repo/README.md" "$1"
}
commands="$(section sh)"
tsconfig="$(section json)"
loop="$(section loop)"
[ -n "$commands" ] && [ -n "$tsconfig" ] && [ -n "$loop" ] || fail "the README has no Install commands, tsconfig.json or loop"
echo "$commands" | grep -q '^npm init -y$' || fail "the Install section does not start a project with npm init -y"

mkdir "$work/app"
cd "$work/app"
export npm_config_audit=false npm_config_fund=false
while IFS= read -r line; do
  [ -n "$line" ] || continue
  run="$line"
  if [[ "$line" == "npm install "* ]]; then run="${line/ effect-rl / $tarball }"; fi
  step "$line"
  bash -c "$run" < /dev/null 2>&1 | tee -a install.log
  [ "${PIPESTATUS[0]}" = 0 ] || fail "$line"
done <<< "$commands"
printf '%s\n' "$tsconfig" > tsconfig.json
printf '%s\n' "$loop" > loop.ts

step "what the install left"
[ "$(node -p 'require("./package.json").type')" = module ] || fail "the project is not ES modules"
[ "$(node -p 'require("effect/package.json").version.split(".")[0]')" = "3" ] || fail "the project did not get Effect 3"
[ ! -d node_modules/effect-rl/node_modules/effect ] || fail "effect-rl brought its own copy of effect"
# npm 11's install-script policy: nothing left unreviewed but the tarball itself (its prepare, listed because it
# is not from the registry; an install from the registry has none).
if grep -q "not yet covered by allowScripts" install.log; then
  pending="$(grep -oE '^npm warn install-scripts +[^ ]+@[^ ]+ \(' install.log | awk '{print $4}' | grep -v '^effect-rl@' || true)"
  [ -z "$pending" ] || fail "install scripts not covered by the README's allowScripts: $pending"
fi
node -e 'new (require("better-sqlite3"))(":memory:").prepare("select 1").get()' || fail "better-sqlite3 did not build"
echo "allowScripts: $(node -p 'JSON.stringify(require("./package.json").allowScripts)'); better-sqlite3 loads"

# The optional peers, as the docs' "Tool agents" and "Rollouts across machines" pages say to install them for
# the agent layers and the cluster (a line may name several).
for peer in $(cat "$repo/README.md" "$repo"/docs/*.md | grep -oE 'npm install (@effect/ai|openai|@effect/cluster)[^`]*' | sed 's/^npm install //' | tr ' ' '\n' | grep -v '^$' | sort -u); do
  npm install "$peer" > /dev/null || fail "npm install $peer (the docs' optional peer)"
done

step "npx tsc: the README's loop (loop.ts) and the examples of the README and docs/ (src/), with the README's tsconfig.json"
mkdir src
for block in $(node -e '
  const fs = require("fs"), path = require("path")
  const repo = process.argv[1]
  const docs = fs.readdirSync(path.join(repo, "docs")).filter((f) => f.endsWith(".md")).map((f) => path.join("docs", f))
  const text = ["README.md", ...docs].map((f) => fs.readFileSync(path.join(repo, f), "utf8")).join("\n")
  const dir = path.join(repo, "examples")
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".ts"))
  const blocks = [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1].trimEnd())
  const used = new Set(blocks.map((b) => files.find((f) => fs.readFileSync(path.join(dir, f), "utf8").includes(b))))
  used.delete(undefined)
  console.log([...used].join("\n"))' "$repo"); do
  cp "$repo/examples/$block" src/
done
ls src
# What an example's agent is written with beside effect-rl (the AI SDK, zod: the reader's own agent's
# dependencies, which the README does not install), at the versions this repository tests with.
for dep in $(node -e '
  const fs = require("fs"), path = require("path")
  const repo = JSON.parse(fs.readFileSync(process.argv[1], "utf8"))
  const names = new Set()
  for (const file of fs.readdirSync("src")) {
    for (const [, spec] of fs.readFileSync(path.join("src", file), "utf8").matchAll(/from "([^".][^"]*)"/g)) {
      const name = spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/")
      if (!name.startsWith("node:") && !fs.existsSync(path.join("node_modules", name, "package.json"))) names.add(name)
    }
  }
  for (const name of names) console.log(`${name}@${repo.devDependencies[name] ?? "MISSING"}`)' "$repo/package.json"); do
  [[ "$dep" != *@MISSING ]] || fail "an example imports ${dep%@MISSING}, which neither the README nor the repository installs"
  npm install "$dep" > /dev/null || fail "npm install $dep (an example's own dependency)"
  echo "installed $dep (an example's own dependency)"
done
npx tsc || fail "npx tsc with the README's tsconfig.json"
echo "type-checked with the README's tsconfig.json"
# A bundler's resolution too, for projects built that way.
printf '{ "extends": "./tsconfig.json", "compilerOptions": { "module": "esnext", "moduleResolution": "bundler" } }\n' > tsconfig.bundler.json
npx tsc -p tsconfig.bundler.json || fail "type-checking with moduleResolution bundler"
echo "type-checked with moduleResolution bundler"

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

step "npx tsx loop.ts: the README's loop, run in the project against the embedded backend"
out="$(npx tsx loop.ts)" || fail "npx tsx loop.ts"
echo "$out"
echo "$out" | tail -n 1 | grep -Eq '^[0-9.]+( -> [0-9.]+)+$' || fail "loop.ts did not print its reward per step"

step "npx effect-rl: the installed command (the bundle in dist/bin/), its version and one step of an example"
version="$(npx effect-rl --version | head -n 1)" || fail "npx effect-rl --version"
expected="$(node -p 'JSON.parse(require("fs").readFileSync("node_modules/effect-rl/package.json", "utf8")).version')"
[ "$version" = "$expected" ] || fail "npx effect-rl --version printed $version, not $expected"
echo "effect-rl $version"
out="$(npx effect-rl train minimal --steps 1 < /dev/null)" || fail "npx effect-rl train minimal --steps 1"
echo "$out" | tail -n 1 | grep -q '^summary: {"steps":1,' || fail "effect-rl train minimal did not end with its summary: $(echo "$out" | tail -n 3)"
echo "$out" | tail -n 1
echo "consumer test passed"
