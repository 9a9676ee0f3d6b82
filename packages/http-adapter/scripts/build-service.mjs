/**
 * Builds the service for `pnpm start`: `src/main.ts` and the workspace packages it imports,
 * bundled by esbuild into `dist/main.mjs`, run by plain Node. Running the sources through the
 * tsx loader costs a loader worker thread with its own heap (about 90 MB of RSS under load).
 *
 * Every other package stays outside the bundle, imported by the absolute path esbuild resolves
 * it to from the importing workspace package: pnpm keeps each package's dependencies beside
 * that package, where the bundle's own folder could not find them. So the bundle is built on
 * the machine that runs it, at every start (about half a second), and never committed.
 */
import { argv } from "node:process"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as esbuild from "esbuild"

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const resolving = Symbol("resolving")

/** Bare imports outside the workspace: external, by the path esbuild resolves for the importer. */
const externalDependencies = {
  name: "external-dependencies",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.path.startsWith("@clinical-api/") || args.path.startsWith("node:") || args.pluginData === resolving) {
        return undefined
      }
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
}

// `pnpm bench` builds its floor server the same way: `build-service.mjs bench/floor-server.ts dist/floor.mjs`.
const [entry = "src/main.ts", outfile = "dist/main.mjs"] = argv.slice(2)

await esbuild.build({
  entryPoints: [resolve(packageRoot, entry)],
  outfile: resolve(packageRoot, outfile),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node24",
  plugins: [externalDependencies],
  logLevel: "warning"
})
