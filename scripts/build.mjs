// Compiles src/ into dist/ with tsc (tsconfig.build.json), then bundles the server that `npm start`
// runs into dist/service-auth.mjs (and the CLI into dist/cli.mjs) with esbuild: the Effect packages' index modules load a thousand
// files each start, which took 0.65 s of a 1.6 s start-up; the bundle holds only what is used.
// PGlite, jose, pg, yaml and the OpenTelemetry packages stay external (PGlite finds its WebAssembly
// files beside its module). The server's trace exporter (src/observability/TracingOtlp.ts, with
// @effect/opentelemetry) is a chunk of its own, imported only when traces are exported: a start
// without them does not parse it, and it shares the one copy of Effect with the server.
// With --if-stale, it compiles only when a source or compiler setting is newer than the last build,
// so a start on an up-to-date build compiles nothing. `npm start` (scripts/start.sh) makes the same
// check with `find` in its own shell first (no prestart: one npm lifecycle step fewer) and runs this only when
// something is newer: a start skips booting a second Node. Plain JavaScript: it runs
// before anything is compiled.
import { spawnSync } from "node:child_process"
import { chmodSync, existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const DIST = join(ROOT, "dist")
const STAMP = join(DIST, ".build-stamp")
const INPUTS = ["src", "tsconfig.json", "tsconfig.build.json", "package.json"]

/** The latest modification among the compiled sources (`.ts` under src/) and the build settings. */
const newestInput = () => {
  let newest = 0
  const visit = (path, compiledOnly) => {
    const stats = statSync(path)
    if (stats.isDirectory()) { for (const name of readdirSync(path)) visit(join(path, name), compiledOnly) }
    else if (!compiledOnly || path.endsWith(".ts")) newest = Math.max(newest, stats.mtimeMs)
  }
  for (const input of INPUTS) if (existsSync(join(ROOT, input))) visit(join(ROOT, input), input === "src")
  return newest
}

if (process.argv.includes("--if-stale") && existsSync(STAMP) && statSync(STAMP).mtimeMs >= newestInput()) process.exit(0)

const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc")
if (!existsSync(tsc)) {
  console.error("service-auth: dist/ is missing or out of date and TypeScript is not installed; run npm install")
  process.exit(1)
}
const started = Date.now()
rmSync(DIST, { recursive: true, force: true }) // no compiled module outlives its source
const result = spawnSync(process.execPath, [tsc, "-p", join(ROOT, "tsconfig.build.json")], { stdio: "inherit" })
if (result.status !== 0) {
  console.error("service-auth: the build failed (tsc -p tsconfig.build.json)")
  process.exit(result.status ?? 1)
}
const { build } = await import("esbuild")

/**
 * undici (1 MB bundled) and ws come with @effect/platform-node's HTTP client and WebSocket server,
 * which the server never uses, yet the bundle evaluated both on every start (undici's module body
 * alone was ~5% of a start's CPU). The proxy's upstream pools are undici's (`service-call/proxy/Upstream.ts`),
 * made on a service's first proxied call. In the server's bundle both packages are small modules
 * that load the real package on first use: the same behaviour, at no start-up cost.
 * A name the platform imports that is not listed here fails the build (esbuild: no matching export).
 */
const LAZY_PACKAGES = {
  undici: { classes: ["Agent", "Pool"], functions: ["getGlobalDispatcher"] },
  ws: { classes: ["WebSocket", "WebSocketServer"], functions: [] }
}
const lazyModule = (name, { classes, functions }) =>
  [
    `import { createRequire } from "node:module"`,
    `let loaded`,
    `const load = () => (loaded ??= createRequire(import.meta.url)(${JSON.stringify(name)}))`,
    ...classes.map((c) => `export class ${c} { constructor(...args) { return new (load().${c})(...args) } }`),
    ...functions.map((f) => `export const ${f} = (...args) => load().${f}(...args)`),
    `export default new Proxy({}, { get: (_, key) => load()[key] })`
  ].join("\n")
const lazyPackages = {
  name: "lazy-packages",
  setup(build) {
    build.onResolve({ filter: /^(undici|ws)$/ }, (args) => ({ path: args.path, namespace: "lazy-package" }))
    build.onLoad({ filter: /.*/, namespace: "lazy-package" }, (args) => ({
      contents: lazyModule(args.path, LAZY_PACKAGES[args.path]),
      loader: "js",
      resolveDir: ROOT
    }))
  }
}

const bundle = (entry, outfile, banner = "", plugins = []) =>
  build({
    plugins,
    // Named entry and chunks beside it in dist/: a chunk holding PackageRoot must sit where the bundle does.
    entryPoints: { [outfile.replace(/\.mjs$/, "")]: join(DIST, entry) },
    outdir: DIST,
    outExtension: { ".js": ".mjs" },
    splitting: true,
    chunkNames: "[name]-[hash]",
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["@electric-sql/pglite", "jose", "pg", "yaml", "@opentelemetry/*"],
    // Bundled CommonJS dependencies (ws) call `require`, which an ES module does not have.
    banner: {
      js: `${banner}import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);`
    },
    logLevel: "warning"
  })
// The entry is start.js: it begins compiling PGlite's WebAssembly, then imports ServerMain.js (a chunk).
await bundle("start.js", "service-auth.mjs", "", [lazyPackages])
// The CLI (`bin`): the same treatment, for the same start-up reason (it talks to the server with
// fetch; undici was a third of the CPU of every command, `--help` included).
await bundle("cli/CliMain.js", "cli.mjs", "#!/usr/bin/env node\n", [lazyPackages])
chmodSync(join(DIST, "cli.mjs"), 0o755)
// A fresh embedded database for first starts to copy (src/datadir/EmbeddedTemplate.ts): initdb runs
// here once instead of on every new DATA_DIR. Without it a first start runs initdb itself.
const { Effect } = await import("effect")
const EmbeddedTemplate = await import(join(DIST, "datadir", "EmbeddedTemplate.js"))
await Effect.runPromise(EmbeddedTemplate.build()).catch((error) =>
  console.error(`service-auth: no embedded database template (first starts will run initdb): ${error?.message ?? error}`)
)
writeFileSync(STAMP, `${new Date().toISOString()}\n`)
console.error(`service-auth: compiled src/ into dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`)
