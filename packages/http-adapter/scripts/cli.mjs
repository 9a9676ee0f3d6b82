/**
 * `pnpm cli ...`: the operator CLI from its bundle (`dist/cli.mjs`, see build-service.mjs),
 * rebuilt first when it is missing or older than any file it was built from (or this build
 * script, or the lockfile). The check reads a few hundred file dates; the build takes about a
 * second.
 */
import { readFileSync, statSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const bundle = resolve(packageRoot, "dist/cli.mjs")
const inputsList = resolve(packageRoot, "dist/cli.inputs.json")

const modifiedAt = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs

const isStale = () => {
  const builtAt = modifiedAt(bundle)
  if (builtAt === undefined || modifiedAt(inputsList) === undefined) return true
  const inputs = [
    ...JSON.parse(readFileSync(inputsList, "utf8")),
    resolve(packageRoot, "scripts/build-service.mjs"),
    resolve(packageRoot, "../../pnpm-lock.yaml")
  ]
  return inputs.some((input) => (modifiedAt(input) ?? Infinity) > builtAt)
}

if (isStale()) {
  const { buildCli } = await import("./build-service.mjs")
  await buildCli()
}
await import(pathToFileURL(bundle).href)
