/**
 * Contract section 7 and docs/behaviour.md ("Errors outside the table"), written out literally and
 * independently of the domain's catalogue, so tests compare the catalogue against the contract.
 */
export const contractReasonTable: Readonly<Record<string, readonly [status: number, error: string]>> = {
  unsupported_filter: [400, "public_api_bad_request"],
  unsupported_document_type: [400, "public_api_bad_request"],
  audio_not_available_for_document: [400, "public_api_bad_request"],
  missing_bearer: [401, "api_key_unauthorized"],
  api_keys_disabled: [401, "api_key_unauthorized"],
  test_prefix_not_allowed: [401, "api_key_unauthorized"],
  malformed_token: [401, "api_key_unauthorized"],
  invalid_key: [401, "api_key_unauthorized"],
  disabled_key: [401, "api_key_unauthorized"],
  revoked_key: [401, "api_key_unauthorized"],
  expired_key: [401, "api_key_unauthorized"],
  org_scope_only_required: [403, "api_key_forbidden"],
  route_not_allowed: [403, "api_key_forbidden"],
  missing_scope: [403, "api_key_forbidden"],
  organization_not_allowlisted: [403, "api_key_forbidden"],
  cross_organization_denied: [403, "api_key_forbidden"],
  demo_training_denied: [403, "api_key_forbidden"],
  encounter_not_found: [404, "public_api_not_found"],
  document_not_found: [404, "public_api_not_found"],
  transcript_not_found: [404, "public_api_not_found"],
  audio_not_found: [404, "public_api_not_found"],
  invalid_query: [422, "api_key_validation_failed"],
  invalid_limit: [422, "api_key_validation_failed"],
  invalid_offset: [422, "api_key_validation_failed"],
  invalid_sort: [422, "api_key_validation_failed"],
  digest_key_unavailable: [503, "public_api_unavailable"],
  audio_storage_unavailable: [503, "public_api_unavailable"],
  // docs/behaviour.md, "Errors outside the table".
  route_not_found: [404, "public_api_not_found"],
  method_not_allowed: [405, "public_api_method_not_allowed"],
  // The transport refusals (docs/operations.md, "Limits"); docs/behaviour.md: every 400 is public_api_bad_request,
  // and the service keeps that category for the 408 and the 431 its HTTP parser answers.
  malformed_http_request: [400, "public_api_bad_request"],
  request_timeout: [408, "public_api_bad_request"],
  request_header_fields_too_large: [431, "public_api_bad_request"]
}
