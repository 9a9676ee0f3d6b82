/**
 * Builds the service for `pnpm start`: `src/main.ts` with the workspace packages and the
 * dependencies it imports, bundled by esbuild into `dist/main.mjs`, run by plain Node. Running
 * the sources through the tsx loader costs a loader worker thread with its own heap (about 90 MB
 * of RSS under load).
 *
 * Dependencies are inside the bundle because V8 keeps the source text of every module it loads:
 * effect's modules, read one by one from node_modules, kept about 19 MB of source (mostly their
 * doc comments) alive for the process's life, and the old generation grows to a multiple of what
 * is alive. What effect imports only on demand (Scalar for the docs page) is split into files of
 * its own under `chunks/` beside the bundle, loaded when first imported. PGlite and the AWS SDK
 * (imported only for S3 audio) stay outside, imported by the absolute path esbuild resolves, so the
 * bundle is built on the machine that runs it, at every start (about two seconds), and never
 * committed.
 *
 * The operator CLI (`scripts/cli.mjs`) is built here too, as one file: a command starts in a
 * fraction of a second when Node reads one file instead of the hundreds of modules of effect and
 * the AWS SDK.
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs"
import { basename, dirname, resolve } from "node:path"
import { argv, cwd, pid } from "node:process"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as esbuild from "esbuild"

export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const resolving = Symbol("resolving")

/** Imports matching `pattern` stay outside the bundle, by the path esbuild resolves for the importer. */
const keepOutside = (pattern) => ({
  name: "keep-outside",
  setup(build) {
    build.onResolve({ filter: pattern }, async (args) => {
      if (args.pluginData === resolving) return undefined
      const resolved = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        importer: args.importer,
        pluginData: resolving
      })
      if (resolved.errors.length > 0) return { errors: resolved.errors }
      return { path: resolved.path, external: true }
    })
  }
})

/** PGlite reads its WebAssembly and data files beside its own module. */
const PGLITE = /^@electric-sql\/pglite/

/**
 * The service's bundle also leaves out the AWS SDK: CommonJS imported on demand, whose named
 * exports only Node's own loader gives to an `import()` (from a chunk of the bundle, `S3Client`
 * was undefined). The CLI's single file has it inside, where esbuild converts it in place.
 */
const PGLITE_AND_AWS_SDK = /^(@electric-sql\/pglite|@aws-sdk\/)/

const common = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node24",
  logLevel: "warning",
  // CommonJS dependencies inside an ES module bundle still call require for Node's built-ins.
  banner: { js: "import { createRequire as __createRequire } from \"node:module\"; const require = __createRequire(import.meta.url);" }
}

/**
 * `entry` (relative to the package) bundled into `outfile` (an `.mjs` path), and what it imports
 * on demand into `chunks/` beside it. Chunks are named by their content, so bundles built into one
 * folder share them; builds that may run at once (the tests') each take a folder of their own.
 */
export const buildService = (entry = "src/main.ts", outfile = "dist/main.mjs") =>
  esbuild.build({
    ...common,
    entryPoints: [resolve(packageRoot, entry)],
    outdir: dirname(resolve(packageRoot, outfile)),
    entryNames: basename(outfile, ".mjs"),
    outExtension: { ".js": ".mjs" },
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    metafile: true,
    plugins: [keepOutside(PGLITE_AND_AWS_SDK)]
  })

export const CLI_BUNDLE = resolve(packageRoot, "dist/cli.mjs")
/** The files the CLI bundle was built from, for `scripts/cli.mjs` to tell whether it is stale. */
export const CLI_INPUTS = resolve(packageRoot, "dist/cli.inputs.json")

/**
 * The CLI with its dependencies inside, but PGlite: it reads its WebAssembly and data files
 * beside its own module. Written to a temporary name and renamed, so that CLIs started at once
 * never run a half-written bundle.
 */
export const buildCli = async () => {
  const result = await esbuild.build({
    ...common,
    entryPoints: [resolve(packageRoot, "src/cli/main.ts")],
    write: false,
    metafile: true,
    outfile: CLI_BUNDLE,
    plugins: [keepOutside(PGLITE)]
  })
  // Dependencies change only with the lockfile, which scripts/cli.mjs compares too.
  const inputs = Object.keys(result.metafile.inputs)
    .map((input) => resolve(cwd(), input))
    .filter((input) => !input.includes("/node_modules/"))
  const temporary = `${CLI_BUNDLE}.${pid}.tmp`
  // esbuild writes nothing here (write: false), so on a fresh clone the folder is not there yet.
  mkdirSync(dirname(CLI_BUNDLE), { recursive: true })
  writeFileSync(temporary, result.outputFiles[0].contents)
  writeFileSync(`${CLI_INPUTS}.${pid}.tmp`, JSON.stringify(inputs))
  renameSync(`${CLI_INPUTS}.${pid}.tmp`, CLI_INPUTS)
  renameSync(temporary, CLI_BUNDLE)
}

if (import.meta.url === pathToFileURL(argv[1] ?? "").href) {
  // `build-service.mjs [entry outfile]`; `pnpm bench` builds its floor server the same way:
  // `build-service.mjs bench/floor-server.ts dist/floor.mjs`; `build-service.mjs cli` builds the CLI.
  if (argv[2] === "cli") await buildCli()
  else await buildService(argv[2], argv[3])
}
