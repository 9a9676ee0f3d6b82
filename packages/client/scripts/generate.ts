import { writeFile } from "node:fs/promises"
import { parseArgs } from "node:util"
import { definitionDocument, documentFrom, GENERATED_TYPES_PATH, generateTypes } from "./openapi-types.js"

const { values } = parseArgs({ options: { from: { type: "string" } } })

// Default: the API definition itself. `--from <url|file>` reads a served or saved document instead.
const document = values.from === undefined ? await definitionDocument() : await documentFrom(values.from)
const target = new URL(`../${GENERATED_TYPES_PATH}`, import.meta.url)
await writeFile(target, await generateTypes(document))
process.stdout.write(`wrote ${GENERATED_TYPES_PATH} from ${values.from ?? "the http-adapter's API definition"}\n`)
