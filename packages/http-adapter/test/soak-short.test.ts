import { describe, expect, it } from "vitest"
import { formatSoakReport, runSoak } from "../scripts/soak-runner.js"

/**
 * The soak in its short CI form (`pnpm soak` runs the full ten minutes): the service as its
 * own process on the sandbox data (a fresh database of DATABASE_URL's server, else the
 * embedded default), SOAK_SECONDS (default 30) of mixed traffic at 40 requests per second on
 * loopback: no unexpected status, no request lost, no growth of RSS, sockets or database
 * connections between the first and last thirds, a stable median latency.
 */
const seconds = Number(process.env["SOAK_SECONDS"] ?? 30)
const databaseUrl = process.env["DATABASE_URL"]?.trim()

describe("soak, short form", () => {
  it(`${seconds} s of mixed traffic at a fixed rate: zero unexpected statuses, nothing lost, no growth, latency stable`, async () => {
    const report = await runSoak({
      durationSeconds: seconds,
      ratePerSecond: 40,
      warmupSeconds: 20,
      databaseUrl: databaseUrl === undefined || databaseUrl === "" ? undefined : databaseUrl
    })
    console.info(formatSoakReport(report))
    expect(report.unexpected).toEqual([])
    expect(report.lostRequests).toEqual([])
    expect(report.answered).toBe(report.sent)
    expect(report.checks.filter((check) => !check.pass)).toEqual([])
  }, 180_000)
})
