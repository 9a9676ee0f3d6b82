import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from "openapi-typescript"

/** Where `pnpm --filter @clinical-api/client generate` writes the types, relative to the package. */
export const GENERATED_TYPES_PATH = "src/generated/openapi.ts"

const HEADER = `${COMMENT_HEADER.trimEnd()}
// From the OpenAPI document of the http-adapter's API definition (the one served at /openapi.json):
// \`pnpm --filter @clinical-api/client generate\`; test/generated-types.test.ts fails when it drifts.

`

/**
 * The TypeScript types of an OpenAPI document, as committed in `src/generated/openapi.ts`.
 * `immutable` makes every response type read-only: the client hands out what it received.
 */
export const generateTypes = async (document: unknown): Promise<string> => {
  const ast = await openapiTS(structuredClone(document) as OpenAPI3, { immutable: true, silent: true })
  return `${HEADER}${astToString(ast)}`
}

/**
 * The OpenAPI document of the service's API definition, built in-process by the http-adapter
 * (the same function that serves `/openapi.json`). Loaded lazily: only the generator and the
 * drift test need the server's code, never the client at run time.
 */
export const definitionDocument = async (): Promise<unknown> => {
  const [{ OpenApi }, { PublicHttpApi }] = await Promise.all([
    import("effect/http-api"),
    import("@clinical-api/http-adapter")
  ])
  return OpenApi.fromApi(PublicHttpApi)
}

/** A served or saved OpenAPI document: an `http(s)` URL (e.g. a running service's `/openapi.json`) or a file path. */
export const documentFrom = async (source: string): Promise<unknown> => {
  if (/^https?:\/\//.test(source)) {
    const response = await fetch(source)
    if (!response.ok) throw new Error(`GET ${source} answered ${response.status}`)
    return response.json()
  }
  const { readFile } = await import("node:fs/promises")
  return JSON.parse(await readFile(source, "utf8"))
}
