import { existsSync } from "node:fs"
import { type Browser, chromium, type Page } from "playwright-core"
import { Context, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { operationIds } from "@clinical-api/domain"
import { operationDocs } from "../src/api/descriptions.js"
import { pathParameterExamples } from "../src/api/examples.js"
import { Startup } from "../src/index.js"
import { contractFixture } from "./support/contract-fixture.js"
import { type RunningService, type StartedServer, startService } from "./support/harness.js"
import { startMemoryServer } from "./support/memory-harness.js"

const CHROMIUM = "/usr/bin/chromium"
const chromiumMissing = !existsSync(CHROMIUM)
if (chromiumMissing) console.warn(`docs page test skipped: ${CHROMIUM} does not exist (apt-get install -y chromium)`)

const launch = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
  })

interface OpenedPage {
  readonly page: Page
  /** Every URL the page asked for, from its first request on. */
  readonly requested: Array<string>
  readonly pageErrors: Array<string>
}

/** `/docs` of the service at `origin`, read once Scalar has drawn every operation and the introduction. */
const openDocs = async (browser: Browser, origin: string): Promise<OpenedPage> => {
  const page = await browser.newPage()
  const requested: Array<string> = []
  const pageErrors: Array<string> = []
  page.on("request", (request) => requested.push(request.url()))
  page.on("pageerror", (error) => pageErrors.push(error.message))
  const response = await page.goto(`${origin}/docs`, { waitUntil: "domcontentloaded" })
  expect(response?.status()).toBe(200)
  for (const operationId of operationIds) {
    await page.getByText(operationDocs[operationId].summary, { exact: true }).first().waitFor({ state: "attached", timeout: 30_000 })
  }
  // Scalar draws the sidebar first and the introduction's heading some 400 ms later (more
  // on a loaded machine): read the page only once both are there.
  await page.getByRole("heading", { name: "Clinical Encounter Public API", exact: true }).first().waitFor({
    state: "visible",
    timeout: 30_000
  })
  // The operations' sections, with their examples and curl lines, come later still: wait for
  // one curl line per operation.
  await page.waitForFunction(
    (count) => ((globalThis as unknown as InPageText).document.body.innerText.match(/\bcurl /g) ?? []).length >= count,
    operationIds.length,
    { timeout: 60_000 }
  )
  return { page, requested, pageErrors }
}

interface InPageText {
  readonly document: { readonly body: { readonly innerText: string } }
}

/** What the links check reads in the page (this package's TypeScript has no DOM types). */
interface InPage {
  readonly location: { readonly origin: string }
  readonly getComputedStyle: (element: unknown) => { readonly pointerEvents: string }
}
interface Anchor {
  readonly href: string
  readonly getClientRects: () => { readonly length: number }
}

/** Links to another origin a reader can follow: rendered and taking clicks. */
const linksOut = (page: Page) =>
  page.$$eval("a[href]", (elements) => {
    const inPage = globalThis as unknown as InPage
    return (elements as unknown as ReadonlyArray<Anchor>)
      .filter((anchor) => {
        const url = new URL(anchor.href)
        if (url.origin === inPage.location.origin || url.protocol === "blob:") return false
        return anchor.getClientRects().length > 0 && inPage.getComputedStyle(anchor).pointerEvents !== "none"
      })
      .map((anchor) => anchor.href)
  })

/** The curl commands the page shows, as written: URL and headers. */
const curlCommands = (text: string) =>
  [...text.matchAll(/curl (?:'([^']+)'|(\S+))((?:[ \t]*\\\n[ \t]*--header '[^']*')*)/g)].map((match) => ({
    url: match[1] ?? match[2] ?? "",
    headers: Object.fromEntries([...(match[3] ?? "").matchAll(/--header '([^:]+): ([^']*)'/g)].map((header) => [header[1], header[2]]))
  }))

describe.skipIf(chromiumMissing)("docs page in headless Chromium, in the sandbox as pnpm start serves it", () => {
  let service: RunningService
  let sandboxKey: string
  let browser: Browser
  // The page is opened under another name than the address the document names (127.0.0.1):
  // "Test Request" and the curl lines must still go to the service the page came from.
  let origin: string
  let opened: OpenedPage
  beforeAll(async () => {
    // No DATABASE_URL: the embedded database with the sandbox data, as `pnpm start` runs.
    service = await startService({})
    const startup = Context.get(service.context as Context.Context<Startup>, Startup)
    sandboxKey = Option.getOrThrow(Option.flatMap(startup.fixture, ({ sampleToken }) => sampleToken))
    origin = service.baseUrl.replace("127.0.0.1", "localhost")
    browser = await launch()
    opened = await openDocs(browser, origin)
  }, 180_000)
  afterAll(async () => {
    await browser?.close()
    await service?.close()
  })

  it("renders the five operations with nothing outside the service: every request on its origin, no link out, no outside client", async () => {
    const text = await opened.page.locator("body").innerText()
    for (const operationId of operationIds) expect(text).toContain(operationDocs[operationId].summary)
    expect(text).toContain("Clinical Encounter Public API")
    expect(opened.pageErrors).toEqual([])
    expect(opened.requested.filter((url) => !url.startsWith(`${origin}/`) && !/^(data|blob):/.test(url))).toEqual([])
    expect(await linksOut(opened.page)).toEqual([])
    expect(await opened.page.getByText("Open API Client").count()).toBe(0)
  }, 60_000)

  it("shows the example values on every operation: the sandbox's ids, no placeholder", async () => {
    const text = await opened.page.locator("body").innerText()
    for (const examples of Object.values(pathParameterExamples)) {
      for (const id of Object.values(examples)) expect(text).toContain(id)
    }
    expect(text).not.toContain("\"string\"")
  }, 60_000)

  it("shows for each operation a curl line that answers 200 when run as shown", async () => {
    const commands = curlCommands(await opened.page.locator("body").innerText())
    expect(commands.map(({ url }) => new URL(url).pathname).sort()).toEqual([
      "/external/v1/encounters",
      "/external/v1/encounters/enc_rv_0010",
      "/external/v1/encounters/enc_rv_0010/documents/doc_rv_0010_note",
      "/external/v1/encounters/enc_rv_0010/documents/doc_rv_0010_transcript/audio",
      "/external/v1/encounters/enc_rv_0010/documents/doc_rv_0010_transcript/transcript"
    ])
    for (const { headers, url } of commands) {
      expect(new URL(url).origin, url).toBe(origin)
      expect(url, url).not.toMatch(/=(&|$)/)
      expect(headers.Authorization, url).toBe(`Bearer ${sandboxKey}`)
      const response = await fetch(url, { headers })
      expect(response.status, `${url}: ${await response.text()}`).toBe(200)
    }
  }, 60_000)

  it("sends List encounters from the page (\"Test Request\", then Send) to the service itself with the sandbox key: 200", async () => {
    const { page, requested } = opened
    await page.getByRole("button", { name: "Test Request (get /external/v1/encounters)" }).click()
    const isList = (url: string) => new URL(url).pathname === "/external/v1/encounters"
    const [response] = await Promise.all([
      page.waitForResponse((candidate) => isList(candidate.url()), { timeout: 30_000 }),
      page.getByRole("button", { name: /^Send/ }).first().click()
    ])
    expect(response.status()).toBe(200)
    expect(new URL(response.url()).origin).toBe(origin)
    expect(response.url()).not.toMatch(/=(&|$)/)
    expect(await response.request().headerValue("authorization")).toBe(`Bearer ${sandboxKey}`)
    expect((await response.json() as { readonly items: ReadonlyArray<unknown> }).items.length).toBeGreaterThan(0)
    expect(requested.filter((url) => !url.startsWith(`${origin}/`) && !/^(data|blob):/.test(url))).toEqual([])
    expect(await linksOut(page)).toEqual([])
  }, 60_000)
})

describe.skipIf(chromiumMissing)("docs page in headless Chromium, in production", () => {
  let server: StartedServer
  let browser: Browser
  beforeAll(async () => {
    server = await startMemoryServer(contractFixture, { environment: "production" })
    browser = await launch()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("documents without calling production: no key on the page and no \"Test Request\"", async () => {
    const html = await (await fetch(`${server.baseUrl}/docs`)).text()
    expect(html).not.toMatch(/ce_(test|live)_[0-9A-Za-z]{36}/)
    const { page, pageErrors, requested } = await openDocs(browser, server.baseUrl)
    expect(await page.getByRole("button", { name: /Test Request/ }).count()).toBe(0)
    expect(requested.filter((url) => !url.startsWith(`${server.baseUrl}/`) && !/^(data|blob):/.test(url))).toEqual([])
    expect(await linksOut(page)).toEqual([])
    expect(pageErrors).toEqual([])
  }, 60_000)
})
