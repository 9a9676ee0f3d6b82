import { existsSync } from "node:fs"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { operationIds } from "@clinical-api/domain"
import { operationDocs } from "../src/api/descriptions.js"
import { contractFixture } from "./support/contract-fixture.js"
import type { StartedServer } from "./support/harness.js"
import { startMemoryServer } from "./support/memory-harness.js"

const CHROMIUM = "/usr/bin/chromium"
const chromiumMissing = !existsSync(CHROMIUM)
if (chromiumMissing) console.warn(`docs page test skipped: ${CHROMIUM} does not exist (apt-get install -y chromium)`)

describe.skipIf(chromiumMissing)("docs page in headless Chromium", () => {
  let server: StartedServer
  beforeAll(async () => {
    server = await startMemoryServer(contractFixture)
  })
  afterAll(() => server?.close())

  it("GET /docs renders the OpenAPI document with the five operations, offline", async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    })
    try {
      const page = await browser.newPage()
      const pageErrors: Array<string> = []
      page.on("pageerror", (error) => pageErrors.push(error.message))
      const response = await page.goto(`${server.baseUrl}/docs`, { waitUntil: "domcontentloaded" })
      expect(response?.status()).toBe(200)
      for (const operationId of operationIds) {
        await page.getByText(operationDocs[operationId].summary, { exact: true }).first().waitFor({ state: "attached", timeout: 20_000 })
      }
      // Scalar draws the sidebar first and the introduction's heading some 400 ms later (more
      // on a loaded machine): read the page only once both are there.
      await page.getByRole("heading", { name: "Clinical Encounter Public API", exact: true }).first().waitFor({
        state: "visible",
        timeout: 20_000
      })
      const text = await page.locator("body").innerText()
      for (const operationId of operationIds) expect(text).toContain(operationDocs[operationId].summary)
      expect(text).toContain("Clinical Encounter Public API")
      expect(pageErrors).toEqual([])
    } finally {
      await browser.close()
    }
  }, 60_000)
})
