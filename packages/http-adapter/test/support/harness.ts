import type { DisclosureEvent } from "@clinical-api/domain"
import type { FixtureDocument } from "./fixture-data-set.js"

/**
 * What the contract suite needs of a running service: the suite is black-box and runs over
 * any implementation of this (in memory here; PostgreSQL in the storage adapter's suite).
 */
export interface HarnessOptions {
  readonly environment?: "sandbox" | "production"
  readonly apiKeysEnabled?: boolean
  /** False: no API-key digest key is configured (503 `digest_key_unavailable`). */
  readonly digestKeyConfigured?: boolean
}

export type Fault = "none" | "store" | "audioStorage"

export interface StartedServer {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly baseUrl: string
  /** Every disclosure event committed so far. */
  readonly disclosures: () => Promise<ReadonlyArray<DisclosureEvent>>
  /** Switches a store fault on or off; absent when the implementation cannot inject faults. */
  readonly injectFault?: (fault: Fault) => Promise<void>
  /** Every request-log line written so far, exactly as written. */
  readonly logLines: () => ReadonlyArray<string>
  /** Closes the server (draining requests in flight) and everything below it. */
  readonly close: () => Promise<void>
}

export interface ContractHarness {
  readonly name: string
  readonly start: (fixture: FixtureDocument, options?: HarnessOptions) => Promise<StartedServer>
}
