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
  Object.freeze({ createdAt, encounterIds: Object.freeze([...encounterIds]) })

/**
 * Every encounter created from `since` (or after `checkpoint`) up to `settleSeconds` before
 * the clock at the call, oldest first (ties as the service orders them), each exactly once.
 *
 * Each request is a `created_at` window opening at the last instant yielded (`start_at`, with
 * `end_at` the fixed upper bound and ascending order), so offsets stay at the number of
 * encounters sharing that one instant, far below the 10,000 cap however many encounters there
 * are, and encounters created meanwhile shift nothing: one created behind the position read
 * is neither repeated nor the cause of a skip, one created ahead of it (before the bound) is
 * yielded in its place. Encounters sharing the last instant are told apart by the checkpoint's
 * ids.
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
  const end = new Date(now().getTime() - settleSeconds * 1000)
  const endAt = end.toISOString()

  let startAt: string
  let seenAtStart: Set<string>
  if (options.checkpoint != null) {
    startAt = instant("checkpoint.createdAt", options.checkpoint.createdAt).toISOString()
    seenAtStart = new Set(options.checkpoint.encounterIds)
  } else {
    startAt = instant("since", options.since).toISOString()
    seenAtStart = new Set()
  }

  while (new Date(startAt).getTime() < end.getTime()) {
    // The encounters of the opening instant that were yielded come first in the window, unless
    // one was created behind them meanwhile; the id check below drops any that come again.
    const offset = seenAtStart.size
    if (offset > MAX_OFFSET) {
      throw new RangeError(`More than ${MAX_OFFSET} encounters share created_at ${startAt}: the list cannot page past them`)
    }
    const page = await list({ sort_order: "asc", start_at: startAt, end_at: endAt, limit: pageSize, offset })
    options.signal?.throwIfAborted()
    let yielded = 0
    for (const encounter of page.items) {
      const createdAt = new Date(encounter.created_at).toISOString()
      if (createdAt === startAt) {
        if (seenAtStart.has(encounter.encounter_id)) continue
        seenAtStart.add(encounter.encounter_id)
      } else {
        startAt = createdAt
        seenAtStart = new Set([encounter.encounter_id])
      }
      yielded += 1
      yield { encounter, checkpoint: checkpointOf(startAt, seenAtStart) }
    }
    if (page.items.length < pageSize) return
    if (yielded === 0) {
      // Only possible when a full page of encounters was created at the opening instant behind those yielded.
      throw new Error(`The sync cannot move past created_at ${startAt}: a whole page there was already yielded`)
    }
  }
}
