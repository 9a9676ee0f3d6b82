import { formatSoakReport, runSoak, writeSoakReport } from "./soak-runner.js"

/**
 * `pnpm soak`: SOAK_SECONDS (default 600) of mixed traffic at SOAK_RATE requests per second
 * (default 40) after SOAK_WARMUP_SECONDS (default 15), on a fresh database of the
 * DATABASE_URL server, or on the embedded default. Prints the figures, writes them to
 * SOAK_REPORT (default soak-report.json) and exits 1 when a check fails.
 */
const numberFrom = (name: string, fallback: number) => {
  const text = process.env[name]?.trim()
  const value = text === undefined || text === "" ? fallback : Number(text)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(text)}`)
  return value
}

const databaseUrl = process.env["DATABASE_URL"]?.trim()
const report = await runSoak({
  durationSeconds: numberFrom("SOAK_SECONDS", 600),
  ratePerSecond: numberFrom("SOAK_RATE", 40),
  warmupSeconds: numberFrom("SOAK_WARMUP_SECONDS", 15),
  databaseUrl: databaseUrl === undefined || databaseUrl === "" ? undefined : databaseUrl,
  log: (line) => console.error(line)
})
const output = process.env["SOAK_REPORT"]?.trim() || "soak-report.json"
writeSoakReport(output, report)
console.log(formatSoakReport(report))
console.log(`  report: ${output}`)
process.exitCode = report.passed ? 0 : 1
