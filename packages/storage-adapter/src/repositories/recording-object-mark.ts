import type { RecordingReference } from "@clinical-api/domain"
import type { PgClientService } from "../sql/pg-client.js"

/**
 * Left on a recording reference by the audio route's document read when it saw the reference's
 * embedded object stored (`recording_objects`), set to the client it read through. The embedded
 * storage on that same client answers `exists` from it instead of reading again: one statement
 * fewer per audio URL. An absent mark means nothing (the storage reads); other storages ignore it.
 */
export const embeddedObjectSeenIn: unique symbol = Symbol("embeddedObjectSeenIn")

export type MarkedRecordingReference = RecordingReference & { readonly [embeddedObjectSeenIn]?: PgClientService }
