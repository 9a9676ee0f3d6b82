import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { builtinModules } from "node:module"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

/**
 * What `pnpm start` builds (scripts/build-service.mjs): the service with its dependencies inside
 * the bundle, since V8 keeps the source text of every module it loads for the process's life.
 * The S3 audio storage through this bundle is in processes.test.ts.
 */
const packageRoot = fileURLToPath(new URL("../../", import.meta.url))
const folder = `dist/service-bundle-${process.pid}`

afterAll(() => {
  rmSync(`${packageRoot}${folder}`, { recursive: true, force: true })
})

interface BuiltOutput {
  readonly file: string
  readonly imports: ReadonlyArray<{ readonly path: string; readonly kind: string; readonly external?: boolean }>
}

const build = (): ReadonlyArray<BuiltOutput> => {
  const script = `
    import { buildService } from "./scripts/build-service.mjs"
    const result = await buildService("src/main.ts", "${folder}/main.mjs")
    const outputs = Object.entries(result.metafile.outputs).map(([file, output]) => ({ file, imports: output.imports }))
    process.stdout.write(JSON.stringify(outputs))`
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: packageRoot, encoding: "utf8" }))
}

/** The package a path under node_modules belongs to (pnpm's store nests them). */
const packageOf = (path: string) => path.match(/.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//)?.[1] ?? path

describe("the service's bundle", () => {
  it("holds every dependency but PGlite and the AWS SDK, and keeps what effect imports on demand in chunks beside it", () => {
    const outputs = build()
    const outside = new Set(
      outputs.flatMap((output) => output.imports.filter((imported) => imported.external === true).map((imported) => imported.path))
        .filter((path) => !path.startsWith("node:") && !builtinModules.includes(path))
        .map(packageOf)
    )
    // ws's optional native add-ons are required inside a try and not installed: they stay calls that fail.
    expect([...outside].sort()).toEqual([
      "@aws-sdk/client-s3",
      "@aws-sdk/s3-request-presigner",
      "@electric-sql/pglite",
      "@electric-sql/pglite-socket",
      "bufferutil",
      "utf-8-validate"
    ])
    const main = outputs.find((output) => output.file.endsWith(`${folder}/main.mjs`))
    const onDemand = (main?.imports ?? []).filter((imported) => imported.kind === "dynamic-import" && imported.external !== true).map((imported) => imported.path)
    expect(onDemand.length).toBeGreaterThan(0)
    for (const path of onDemand) expect(path).toMatch(new RegExp(`^${folder}/chunks/`))
  }, 60_000)
})
