/**
 * Builds the service for `pnpm start`: `src/main.ts` and the workspace packages it imports,
 * bundled by esbuild into `dist/main.mjs`, run by plain Node. Running the sources through the
 * tsx loader costs a loader worker thread with its own heap (about 90 MB of RSS under load).
 *
 * Every other package stays outside the bundle, imported by the absolute path esbuild resolves
 * it to from the importing workspace package: pnpm keeps each package's dependencies beside
 * that package, where the bundle's own folder could not find them. So the bundle is built on
 * the machine that runs it, at every start (about half a second), and never committed.
 *
 * The operator CLI (`scripts/cli.mjs`) is built here too, with its dependencies inside the
 * bundle: a command starts in a fraction of a second when Node reads one file instead of the
 * hundreds of modules of effect and the AWS SDK.
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { argv, cwd, pid } from "node:process"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as esbuild from "esbuild"

export const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const resolving = Symbol("resolving")

/**
 * Bare imports outside the workspace: external, by the path esbuild resolves for the importer;
 * with `bundled`, only those that must stay files of their own.
 */
const externalDependencies = (bundled = () => false) => ({
  name: "external-dependencies",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.path.startsWith("@clinical-api/") || args.path.startsWith("node:") || args.pluginData === resolving) {
        return undefined
      }
      if (bundled(args.path)) return undefined
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

const common = { bundle: true, platform: "node", format: "esm", target: "node24", logLevel: "warning" }

/** `entry` (relative to the package) bundled into `outfile`, its dependencies external. */
export const buildService = (entry = "src/main.ts", outfile = "dist/main.mjs") =>
  esbuild.build({
    ...common,
    entryPoints: [resolve(packageRoot, entry)],
    outfile: resolve(packageRoot, outfile),
    plugins: [externalDependencies()]
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
    // CommonJS dependencies inside an ES module bundle still call require for Node's built-ins.
    banner: { js: "import { createRequire as __createRequire } from \"node:module\"; const require = __createRequire(import.meta.url);" },
    plugins: [externalDependencies((path) => !path.startsWith("@electric-sql/pglite"))]
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
