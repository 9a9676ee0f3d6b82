import type { EncounterListResponse, EncounterSummary, ListEncountersQuery } from "./types.js"

/** The contract's largest `offset` and `limit` (api.md section 8). */
export const MAX_OFFSET = 10_000
export const MAX_LIMIT = 100

type ListPage = (query: ListEncountersQuery) => Promise<EncounterListResponse>

export async function* encounterPages(list: ListPage, query: ListEncountersQuery): AsyncGenerator<EncounterListResponse> {
  let offset = query.offset ?? 0
  for (;;) {
    if (offset > MAX_OFFSET) {
      throw new RangeError(
        `The next page starts at offset ${offset}, past the API's ${MAX_OFFSET}: use syncEncounters, or narrow start_at/end_at`
      )
    }
    const page = await list({ ...query, offset })
    yield page
    const read = page.offset + page.items.length
    if (page.items.length === 0 || page.items.length < page.limit || read >= page.total) return
    offset = read
  }
}

/**
 * Where a sync stands: the `created_at` of the last encounter it yielded, and every encounter
 * id it yielded at exactly that instant. Plain JSON: store it with the data it covers.
 */
export interface SyncCheckpoint {
  readonly createdAt: string
  readonly encounterIds: ReadonlyArray<string>
}

export interface SyncItem {
  readonly encounter: EncounterSummary
  /** The checkpoint just after this encounter: resuming from it yields what follows. */
  readonly checkpoint: SyncCheckpoint
}

export interface SyncOptions {
  /** Where a first sync starts: encounters created at or after this instant (a `Date`, or RFC 3339 with an offset). */
  readonly since: Date | string
  /** The checkpoint of the last encounter handled by an earlier sync; when given, `since` is not used. */
  readonly checkpoint?: SyncCheckpoint | null | undefined
  /**
   * How far behind the clock the sync stops, in seconds (default 60). Encounters created
   * within that time, or not yet committed, are left for the next sync, so none is passed
   * over; it must also cover the difference between this machine's clock and the service's.
   */
  readonly settleSeconds?: number
  /** Encounters per request, 1..100 (default 100). */
  readonly pageSize?: number
  readonly signal?: AbortSignal
  /** The clock (default: the system clock). */
  readonly now?: () => Date
}

const instant = (name: string, value: Date | string): Date => {
  const date = value instanceof Date ? value : new Date(value)
  if (typeof value === "string" && !/(?:[Zz]|[+-]\d{2}:\d{2})$/.test(value)) {
    throw new TypeError(`${name} must be an RFC 3339 date-time with an offset (Z or +hh:mm), got ${JSON.stringify(value)}`)
  }
  if (Number.isNaN(date.getTime())) throw new TypeError(`${name} is not a valid instant: ${String(value)}`)
  return date
}

const checkpointOf = (createdAt: string, encounterIds: Iterable<string>): SyncCheckpoint =>
  Object.freeze({ createdAt: new Date(createdAt).toISOString(), encounterIds: Object.freeze([...encounterIds]) })

/**
 * Every encounter created from `since` (or after `checkpoint`) up to `settleSeconds` before
 * the clock at the call, oldest first, each exactly once.
 *
 * Each request is a `created_at` window in ascending order, opening where the last one
 * stopped (`start_at`) and closing at the fixed bound (`end_at`), always at offset 0: a sync
 * reads any number of encounters, and encounters created meanwhile shift nothing. A full page
 * ends at an instant that may hold more encounters than the page showed, so its encounters at
 * that last instant are left to the next window, which opens there. Only where one instant
 * holds a whole page or more, and on resuming from a checkpoint, is that instant read alone
 * (`[t, t + 1 ms)`, by offsets) with the checkpoint's ids telling apart those already yielded.
 *
 * Encounters are yielded in the service's order (`created_at`, then `encounter_id`).
 * An encounter created during the sync at an instant after every one the sync has read so far
 * is yielded in its place; one created at an instant it has already read (a `created_at` more
 * than `settleSeconds` in the past, which the settle time exists to rule out) may be missed,
 * but causes no repeat and no skip of any other.
 *
 * Stop at any point and call again with the last checkpoint handled: the sync resumes just
 * after it. When it ends, call again later with the last checkpoint to read what came since.
 */
export async function* syncEncounters(list: ListPage, options: SyncOptions): AsyncGenerator<SyncItem> {
  const settleSeconds = options.settleSeconds ?? 60
  if (!(Number.isFinite(settleSeconds) && settleSeconds >= 0)) throw new RangeError("settleSeconds must be 0 or more")
  const pageSize = options.pageSize ?? MAX_LIMIT
  if (!(Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= MAX_LIMIT)) {
    throw new RangeError(`pageSize must be an integer from 1 to ${MAX_LIMIT}`)
  }
  const now = options.now ?? (() => new Date())
  const endMs = Math.floor(now().getTime() - settleSeconds * 1000)
  const endAt = new Date(endMs).toISOString()
  const read = async (startMs: number, windowEndAt: string, offset: number) => {
    const page = await list({
      sort_order: "asc",
      start_at: new Date(startMs).toISOString(),
      end_at: windowEndAt,
      limit: pageSize,
      offset
    })
    options.signal?.throwIfAborted()
    return page.items
  }

  /** The encounters of one instant not in `seen`, in order, each with its checkpoint. */
  async function* instantAlone(instantMs: number, seen: Set<string>): AsyncGenerator<SyncItem> {
    const createdAt = new Date(instantMs).toISOString()
    const windowEndAt = new Date(instantMs + 1).toISOString()
    // Encounters created meanwhile can only push others to later offsets: read again, never skipped.
    for (let offset = 0;; offset += pageSize) {
      if (offset > MAX_OFFSET) {
        throw new RangeError(`More than ${MAX_OFFSET} encounters share created_at ${createdAt}: the list cannot page past them`)
      }
      const items = await read(instantMs, windowEndAt, offset)
      for (const encounter of items) {
        if (seen.has(encounter.encounter_id)) continue
        seen.add(encounter.encounter_id)
        yield { encounter, checkpoint: checkpointOf(createdAt, seen) }
      }
      if (items.length < pageSize) return
    }
  }

  let startMs: number
  if (options.checkpoint != null) {
    const checkpointMs = instant("checkpoint.createdAt", options.checkpoint.createdAt).getTime()
    if (checkpointMs < endMs) yield* instantAlone(checkpointMs, new Set(options.checkpoint.encounterIds))
    startMs = checkpointMs + 1
  } else {
    startMs = instant("since", options.since).getTime()
  }

  while (startMs < endMs) {
    const items = await read(startMs, endAt, 0)
    const full = items.length === pageSize
    const lastMs = full ? Date.parse(items[items.length - 1]?.created_at ?? "") : Infinity
    if (Number.isNaN(lastMs)) throw new TypeError("The list answered an encounter without a valid created_at")
    let seen = new Set<string>()
    let seenMs = Number.NaN
    for (const encounter of items) {
      const createdMs = Date.parse(encounter.created_at)
      if (createdMs >= lastMs) break
      if (createdMs !== seenMs) {
        seen = new Set()
        seenMs = createdMs
      }
      seen.add(encounter.encounter_id)
      yield { encounter, checkpoint: checkpointOf(encounter.created_at, seen) }
    }
    if (!full) return
    if (Date.parse(items[0]?.created_at ?? "") === lastMs) {
      // The whole page is one instant: read it alone, then go on after it.
      yield* instantAlone(lastMs, new Set())
      startMs = lastMs + 1
    } else {
      startMs = lastMs
    }
  }
}
