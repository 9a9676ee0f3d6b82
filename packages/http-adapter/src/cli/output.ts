import type { OrganizationRecord } from "@clinical-api/domain"
import type { ApiKeyListing } from "@clinical-api/storage-adapter"
import { Console, Effect } from "effect"
import { Flag } from "effect/cli"

/**
 * What the commands print on stdout: records as JSON objects with the snake_case field names
 * of the API and the export (one per line, so `jq` and scripts read them), and lists as an
 * aligned table unless `--json` asks for JSON Lines. Notes and warnings go to stderr.
 */

/** An off-by-default switch (effect/cli requires a boolean flag that has no default). */
export const switchFlag = (name: string, description: string) =>
  Flag.Boolean(name).pipe(Flag.withDefault(false), Flag.withDescription(description))

export const jsonOption = switchFlag("json", "Print JSON Lines (one object per line) instead of a table.")

export const printJsonLine = (value: unknown) => Console.log(JSON.stringify(value))

export const organizationJson = (organization: OrganizationRecord) => ({
  organization_id: organization.organizationId,
  name: organization.name,
  approved: organization.approved,
  enabled_routes: organization.enabledRoutes
})

export const apiKeyJson = (key: ApiKeyListing, now: Date) => ({
  api_key_id: key.apiKeyId,
  organization_id: key.organizationId,
  kind: key.kind,
  scopes: key.scopes,
  state: key.state,
  expires_at: key.expiresAt?.toISOString() ?? null,
  expired: key.expiresAt !== null && key.expiresAt.getTime() <= now.getTime(),
  label: key.label,
  created_at: key.createdAt.toISOString(),
  last_used_at: key.lastUsedAt?.toISOString() ?? null
})

/** Columns padded to their widest cell; the last column is not padded. */
export const renderTable = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ")
      .trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

export const printList = <A>(
  items: ReadonlyArray<A>,
  options: {
    readonly json: boolean
    readonly toJson: (item: A) => unknown
    readonly header: ReadonlyArray<string>
    readonly toRow: (item: A) => ReadonlyArray<string>
    readonly empty: string
  }
): Effect.Effect<void> => {
  if (options.json) return Effect.forEach(items, (item) => printJsonLine(options.toJson(item)), { discard: true })
  if (items.length === 0) return Console.error(options.empty)
  return Console.log(renderTable(options.header, items.map(options.toRow)))
}
