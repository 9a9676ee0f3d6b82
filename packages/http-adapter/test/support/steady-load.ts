import postgres from "postgres"

/**
 * Steady traffic against a running service, as a partner's integration sends it: a request
 * every `intervalMs` over the five operations of the sandbox's main organization, each with a
 * request id of its own, and every answer kept (its status, body and time) for the test to
 * judge: the contract allows only the normal answer or the 503 body, and every 200 must have
 * its disclosure events.
 */
export const SANDBOX_KEY = "ce_test_Riverside0full0access0key0000116X8fx"

/** Reads of the sandbox data set, one of each operation (the transcript's document has a stored recording). */
export const sandboxReads = [
  { path: "/external/v1/encounters?limit=5", disclosures: "items" },
  { path: "/external/v1/encounters/enc_rv_0002", disclosures: 1 },
  { path: "/external/v1/encounters/enc_rv_0002/documents/doc_rv_0002_note", disclosures: 1 },
  { path: "/external/v1/encounters/enc_rv_0002/documents/doc_rv_0002_transcript/transcript", disclosures: 1 },
  { path: "/external/v1/encounters/enc_rv_0002/documents/doc_rv_0002_transcript/audio", disclosures: 1 }
] as const

export interface Answer {
  readonly requestId: string
  readonly path: string
  readonly startedAt: number
  readonly answeredAt: number
  /** The HTTP status, or the network error's code when there was no answer at all. */
  readonly status: number | string
  readonly body: unknown
  /** Disclosure events a 200 must have recorded. */
  readonly expectedDisclosures: number
}

export interface SteadyLoad {
  readonly answers: ReadonlyArray<Answer>
  /** Stops sending and resolves once every request sent has its answer. */
  readonly stop: () => Promise<ReadonlyArray<Answer>>
}

let runs = 0

export const startSteadyLoad = (baseUrl: string, intervalMs = 20): SteadyLoad => {
  const run = `${process.pid}_${runs++}_${Date.now().toString(36)}`
  const answers: Array<Answer> = []
  const pending = new Set<Promise<void>>()
  let sent = 0
  const sendOne = async () => {
    const read = sandboxReads[sent % sandboxReads.length]!
    const requestId = `req_load_${run}_${sent++}`
    const startedAt = Date.now()
    try {
      const response = await fetch(`${baseUrl}${read.path}`, {
        headers: { authorization: `Bearer ${SANDBOX_KEY}`, "x-request-id": requestId },
        signal: AbortSignal.timeout(20_000)
      })
      const text = await response.text()
      const body: unknown = text === "" ? null : JSON.parse(text)
      const expectedDisclosures = read.disclosures === "items"
        ? (body as { items?: ReadonlyArray<unknown> }).items?.length ?? 0
        : read.disclosures
      answers.push({ requestId, path: read.path, startedAt, answeredAt: Date.now(), status: response.status, body, expectedDisclosures })
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause
      answers.push({
        requestId,
        path: read.path,
        startedAt,
        answeredAt: Date.now(),
        status: cause?.code ?? (error as Error).name,
        body: null,
        expectedDisclosures: 0
      })
    }
  }
  const timer = setInterval(() => {
    const request = sendOne()
    pending.add(request)
    void request.finally(() => pending.delete(request))
  }, intervalMs)
  return {
    answers,
    stop: async () => {
      clearInterval(timer)
      await Promise.all([...pending])
      return answers
    }
  }
}

/** The contract's 503 body (section 7): the only refusal a database fault may cause. */
export const isUnavailableBody = (body: unknown): boolean => {
  if (typeof body !== "object" || body === null) return false
  const record = body as Record<string, unknown>
  return Object.keys(record).sort().join(",") === "error,field,message,reason_code" &&
    record["error"] === "public_api_unavailable" &&
    record["reason_code"] === "digest_key_unavailable" &&
    typeof record["message"] === "string" &&
    record["field"] === null
}

/** Answers that break the promise: neither a 200 nor the contract's 503 body (a refused connection included). */
export const unexpectedAnswers = (answers: ReadonlyArray<Answer>) =>
  answers.filter((answer) => !(answer.status === 200 || (answer.status === 503 && isUnavailableBody(answer.body))))

/** 200s whose disclosure events are not all in the database: events recorded per request id, against those expected. */
export const missingDisclosures = async (databaseUrl: string, answers: ReadonlyArray<Answer>) => {
  const served = answers.filter((answer) => answer.status === 200)
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const rows = await sql<Array<{ request_id: string; count: number }>>`
      SELECT caller_request_id AS request_id, count(*)::int AS count FROM disclosure_events
      WHERE caller_request_id = ANY(${served.map((answer) => answer.requestId)}) GROUP BY caller_request_id`
    const recorded = new Map(rows.map((row) => [row.request_id, row.count]))
    return served
      .filter((answer) => (recorded.get(answer.requestId) ?? 0) !== answer.expectedDisclosures)
      .map((answer) => ({ requestId: answer.requestId, expected: answer.expectedDisclosures, recorded: recorded.get(answer.requestId) ?? 0 }))
  } finally {
    await sql.end({ timeout: 5 })
  }
}

/** Milliseconds from `since` to the first 200 of a request sent at or after it (Infinity if none). */
export const millisToFirstSuccessAfter = (answers: ReadonlyArray<Answer>, since: number): number => {
  const first = answers
    .filter((answer) => answer.status === 200 && answer.startedAt >= since)
    .reduce((earliest, answer) => Math.min(earliest, answer.answeredAt), Number.POSITIVE_INFINITY)
  return first - since
}

/** A count of answers by outcome, for the test's report: `200`, `503`, or what else came. */
export const outcomeCounts = (answers: ReadonlyArray<Answer>) => {
  const counts: Record<string, number> = {}
  for (const answer of answers) counts[String(answer.status)] = (counts[String(answer.status)] ?? 0) + 1
  return counts
}
