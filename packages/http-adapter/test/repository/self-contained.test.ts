import { describe, expect, it } from "vitest"
import { outsideReferences, outsideReferencesIn, repositoryFiles } from "../../../../scripts/self-contained.js"

/**
 * The repository stands alone (`scripts/self-contained.ts`, also run by `pnpm lint`): no file
 * reads, links or names a path outside it. The examples below are assembled at run time, so
 * that this file does not hold the paths it checks for.
 */
const up = (times: number) => "../".repeat(times)
const machineFolder = (name: string) => `/${name}/`

describe("the repository stands alone", () => {
  it("no file it holds reads, links or names a path outside it", () => {
    expect(repositoryFiles().length).toBeGreaterThan(100)
    expect(outsideReferences()).toEqual([])
  })

  it("refuses a relative path that climbs above the root, from wherever it is written", () => {
    const testFile = "packages/storage-adapter/test/fixture-format.test.ts"
    expect(outsideReferencesIn(testFile, `readFileSync(new URL("${up(4)}shared/spec/example.json", import.meta.url))`)).toHaveLength(1)
    expect(outsideReferencesIn("README.md", `The contract is \`${up(1)}shared/spec/api.md\`.`)).toHaveLength(1)
    expect(outsideReferencesIn("docs/api.md", `[contract](${up(2)}shared/spec/api.md)`)).toHaveLength(1)
    // One level up from docs/ stays inside, but a sibling shared folder is what it means.
    expect(outsideReferencesIn("docs/api.md", `See \`${up(1)}shared/spec/api.md\`.`)).toHaveLength(1)
    expect(outsideReferencesIn("packages/domain/test/access/a.test.ts", `new URL(\`${up(5)}shared/\${name}\`, import.meta.url)`)).toHaveLength(1)
  })

  it("refuses an absolute path into a machine's home or work folders", () => {
    for (const folder of ["work", "home", "root", "Users", "mnt", "workspace"]) {
      expect(outsideReferencesIn("a.ts", `const f = "${machineFolder(folder)}shared/spec/x.json"`), folder).toHaveLength(1)
    }
    expect(outsideReferencesIn("a.md", `see ${machineFolder("work")}main/README.md`)).toHaveLength(1)
    expect(outsideReferencesIn("a.ts", `const f = "C:${"\\"}Users${"\\"}dev${"\\"}x"`)).toHaveLength(1)
  })

  it("accepts paths that stay inside, system paths and URL paths", () => {
    const harness = "packages/http-adapter/test/cli/support/cli-harness.ts"
    const accepted = [
      [harness, `new URL("${up(5)}", import.meta.url)`],
      ["packages/storage-adapter/test/x.test.ts", `new URL("${up(2)}domain/test/vectors/key-vectors.json", import.meta.url)`],
      ["packages/storage-adapter/fixtures/README.md", `[the format](${up(3)}docs/fixture-format.md)`],
      ["packages/http-adapter/test/hostile-input.test.ts", "`/${id}/../external/v1/encounters`"],
      [".ci/run", `if [ ! -x /usr/bin/chromium ]; then ls /etc/postgresql /proc/self /tmp; fi`],
      ["a.ts", `"/external/v1/encounters" "/media/{token}" "https://example.com/home/work/" "http://127.0.0.1:8080/docs"`],
      ["a.ts", `existsSync("/var/run/docker.sock")`]
    ] as const
    for (const [file, text] of accepted) expect(outsideReferencesIn(file, text), text).toEqual([])
  })
})
