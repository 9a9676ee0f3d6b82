import { listQueryLimits, type OperationId, requiredScopes } from "@clinical-api/domain"

/**
 * The prose of the OpenAPI document: the decisions the contract leaves open
 * (docs/behaviour.md) are promises, so they are written where partners read them. The list
 * query's bounds are the domain's, read when the document is made.
 */
export const apiDescription = ({ limit, offset } = listQueryLimits): string => `Read-only REST API over clinical encounters, their documents, finalized transcripts and
short-lived signed audio links. Every route is GET, requires an organization-scoped API key
sent as \`Authorization: Bearer <API_KEY>\` and answers JSON (\`Content-Type: application/json\`).

## Order of checks

1. Authentication (401, in this order): \`missing_bearer\` (no Authorization header, a scheme
   other than Bearer — the scheme is case-insensitive — or an empty token), \`api_keys_disabled\`,
   \`test_prefix_not_allowed\`, \`malformed_token\`, then the key lookup (503
   \`digest_key_unavailable\` when it cannot run), \`invalid_key\`, \`disabled_key\`,
   \`revoked_key\`, \`expired_key\`. A key both revoked and expired is \`revoked_key\`.
2. Authorization (403): \`org_scope_only_required\`, \`route_not_allowed\`,
   \`organization_not_allowlisted\`, \`missing_scope\`.
3. Query: 400 \`unsupported_filter\` for the first unsupported key in request order (keys are
   case-sensitive), then on the list route 422 \`invalid_limit\`, \`invalid_offset\`,
   \`invalid_sort\`, \`invalid_query\` (\`start_at\`), \`invalid_query\` (\`end_at\`), and
   \`invalid_query\` (field \`start_at\`) when start_at is not earlier than end_at.
4. Lookup: 404 \`encounter_not_found\`, 403 \`cross_organization_denied\`, 403
   \`demo_training_denied\`, 404 \`document_not_found\`, then the route's own checks.

## Query values (list route)

- \`limit\` (${limit.min}..${limit.max}, default ${limit.default}) and \`offset\` (${offset.min}..${offset.max}, default ${offset.default}): canonical decimal text
  only (no sign, no leading zero, no space, no exponent; empty is invalid).
- \`sort_order\`: exactly \`asc\` or \`desc\` (default \`desc\`).
- \`start_at\` (inclusive) and \`end_at\` (exclusive) bound \`created_at\`: RFC 3339 date-time
  with an explicit offset (\`Z\` or \`+hh:mm\`). The query is form-encoded: a literal \`+\` in a
  value means a space, so send an offset \`+02:00\` as \`%2B02:00\`.
- A supported key given twice is invalid for that key (for example \`invalid_limit\`).
- Results are ordered by \`created_at\` in the direction of \`sort_order\`, ties broken by
  \`encounter_id\` compared bytewise in the same direction. Offset pages are not a snapshot.
- \`field\` in an error body is the key as received after percent-decoding, cut to 64
  characters, any character outside printable ASCII replaced by \`?\`.

## Paths and methods

- Path parameters are opaque strings, each sent as one percent-encoded path segment: an id
  containing \`/\`, \`%\`, \`?\`, \`;\`, spaces or non-ASCII characters is encoded by the client
  and reaches the service unchanged. Paths are matched exactly: case-sensitive, no trailing
  slash, no empty segment.
- Outside the contract: a path that matches none of the routes answers 404 with
  \`error\` \`public_api_not_found\` and \`reason_code\` \`route_not_found\`; a method other than
  GET or HEAD on a route answers 405 with \`Allow: GET\`, \`error\`
  \`public_api_method_not_allowed\` and \`reason_code\` \`method_not_allowed\`. Both use the
  four-field error body.
- Also outside the contract, answered by the HTTP server before any route is read, with the
  four-field body, \`error\` \`public_api_bad_request\` and \`Connection: close\`: a request line
  and headers over 16 KiB (431 \`request_header_fields_too_large\`), bytes that are not valid
  HTTP/1.1 (400 \`malformed_http_request\`), a request not received in time (408
  \`request_timeout\`).
- HEAD answers exactly as GET, without the body; it runs the same checks and records the
  same disclosure events.

## Responses

- Every response carries \`Cache-Control: no-store\` and \`X-Request-Id\`: the caller's own
  \`X-Request-Id\` echoed when it is 1 to 128 characters of \`A-Z a-z 0-9 . _ : -\`, otherwise a
  new opaque id.
- Every error body has exactly the four fields \`error\`, \`reason_code\`, \`message\` and
  \`field\`. Clients branch on \`reason_code\`. A failure of the data store while serving a
  request is 503 \`digest_key_unavailable\`; the service never answers 500.
- Categories the contract leaves open: every 400 is \`public_api_bad_request\`, every 404
  \`public_api_not_found\`, every 503 \`public_api_unavailable\`.
- All objects of the responses are closed (\`additionalProperties: false\`), as the contract
  requires of the encounter summary and the error body: this version never sends a key that
  is not documented here. Optional contract fields are always present, null when unknown.
- Timestamps are UTC with milliseconds (\`2026-05-01T12:00:00.000Z\`); \`date_of_birth\` is
  \`YYYY-MM-DD\`.
- Signed audio URLs expire at \`expires_at\`; do not store or log them.
- Reads record disclosure events (one per encounter listed, one per encounter, document,
  transcript or audio URL read); refused reads record none.

## Webhooks

\`recording.transcript_ready\` is planned, not generally available
(\`planned_not_generally_available\`); it is a thin pointer signed with HMAC-SHA256 (see
the \`webhooks\` section).`

const scopesLine = (operation: OperationId) =>
  `Required scopes: ${requiredScopes[operation].map((scope) => `\`${scope}\``).join(", ")}.`

export const operationDocs: { readonly [K in OperationId]: { readonly summary: string; readonly description: string } } = {
  listPublicEncounters: {
    summary: "List encounters",
    description: `${scopesLine("listPublicEncounters")}

Clinical encounters of the caller's organization (never demo or training data, never another
organization's), ordered by \`created_at\` (\`sort_order\`, default \`desc\`) with
\`encounter_id\` as tie-breaker, paged by \`limit\` and \`offset\`. Meant for integration sync
jobs, not broad search. Any other query key is 400 \`unsupported_filter\`.`
  },
  getPublicEncounter: {
    summary: "Get an encounter",
    description: `${scopesLine("getPublicEncounter")} No query parameters.

The encounter summary with its patient and document summaries.`
  },
  getPublicDocument: {
    summary: "Get a document",
    description: `${scopesLine("getPublicDocument")} No query parameters.

A clinical document (\`schema_type\` \`document\`, markdown content) or ambient transcript
metadata (\`ambient_transcript\`, no turns). \`billing\` and \`encounter_checklist\` documents
are 400 \`unsupported_document_type\`.`
  },
  getPublicDocumentTranscript: {
    summary: "Get a finalized transcript",
    description: `${scopesLine("getPublicDocumentTranscript")} No query parameters.

The finalized transcript of an ambient transcript document, turns in chronological order. A
document that is not an ambient transcript is 400 \`unsupported_document_type\`; an ambient
transcript with no finalized transcript is 404 \`transcript_not_found\`.`
  },
  getPublicDocumentAudio: {
    summary: "Get a signed audio URL",
    description: `${scopesLine("getPublicDocumentAudio")} No query parameters.

A short-lived signed URL of the recording of an ambient transcript document (default lifetime
300 seconds). Not an ambient transcript: 400 \`unsupported_document_type\`; not
recording-backed: 400 \`audio_not_available_for_document\`; recording missing from storage: 404
\`audio_not_found\`; storage unreachable: 503 \`audio_storage_unavailable\`.`
  }
}
