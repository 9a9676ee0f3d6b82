import { Effect, Schema, SchemaGetter, SchemaIssue } from "effect"

/**
 * RFC 3339 date-time with an explicit offset (`Z` or `±hh:mm`), optional fraction.
 * Calendar validity (no 2026-02-30, no hour 24) is checked by `parseRfc3339Instant`.
 */
const RFC3339_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/

const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0

const daysInMonth = (year: number, month: number): number =>
  month === 2 ? (isLeapYear(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/** The instant an RFC 3339 date-time with offset denotes, or `undefined` if the text is not one. */
export const parseRfc3339Instant = (text: string): Date | undefined => {
  const match = RFC3339_PATTERN.exec(text)
  if (match === null) return undefined
  const [, y, mo, d, h, mi, s, fraction, , sign, oh, om] = match
  const year = Number(y)
  const month = Number(mo)
  const day = Number(d)
  const hour = Number(h)
  const minute = Number(mi)
  const second = Number(s)
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  // Leap seconds (second 60) are not representable as a JavaScript instant: refused.
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offsetMinutes = 0
  if (sign !== undefined) {
    const offsetHours = Number(oh)
    const offsetMins = Number(om)
    if (offsetHours > 23 || offsetMins > 59) return undefined
    offsetMinutes = (sign === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins)
  }
  // Cut, never round, to milliseconds: ".99999999999999999" must not become the next second.
  const millis = fraction === undefined ? 0 : Number(fraction.slice(1, 4).padEnd(3, "0"))
  // setUTCFullYear, unlike Date.UTC, does not map the years 0..99 to 1900..1999.
  const instant = new Date(0)
  instant.setUTCFullYear(year, month - 1, day)
  instant.setUTCHours(hour, minute, second, millis)
  instant.setTime(instant.getTime() - offsetMinutes * 60_000)
  return Number.isNaN(instant.getTime()) ? undefined : instant
}

/**
 * A contract timestamp: decodes any RFC 3339 date-time with offset, encodes as UTC with
 * milliseconds (`2026-05-01T12:00:00.000Z`), as docs/behaviour.md requires. Named and
 * described on its encoded side, the string the wire and the OpenAPI document show.
 */
export const Timestamp = Schema.String.annotate({
  identifier: "Timestamp",
  format: "date-time",
  description: "ISO 8601 date-time, written as UTC with milliseconds (2026-05-01T12:00:00.000Z)."
}).pipe(
  Schema.decodeTo(Schema.Date, {
    decode: SchemaGetter.transformEffect((text: string, options) => {
      const instant = parseRfc3339Instant(text)
      return instant === undefined
        ? Effect.fail(new SchemaIssue.InvalidValue({ message: "Expected an RFC 3339 date-time with offset" }, text, options))
        : Effect.succeed(instant)
    }),
    // A plain function, not an effect per timestamp: a list page writes 150 of them, and an
    // Effect each took about a third of the page's encoding. A Date that is not a time (NaN)
    // throws, a defect the server answers as its 503.
    encode: SchemaGetter.transform((date: Date) => formatTimestamp(date))
  })
)

/**
 * A calendar date `YYYY-MM-DD`, kept as its text. The check is exactly RFC 3339's full-date,
 * so its JSON Schema is `format: date` (a check's annotations reach the JSON Schema only
 * through its `toJsonSchema`).
 */
export const CalendarDate = Schema.String.check(
  Schema.makeFilter((text) => {
    const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text)
    if (match === null) return false
    const year = Number(match[1])
    const month = Number(match[2])
    const day = Number(match[3])
    return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month)
  }, { message: "Expected a calendar date YYYY-MM-DD", toJsonSchema: () => ({ format: "date" }) })
).annotate({ identifier: "CalendarDate" })

const MS_PER_DAY = 86_400_000
/** 0001-01-01T00:00:00.000Z and 10000-01-01T00:00:00.000Z: the years `formatTimestamp` writes itself. */
const FIRST_FORMATTED_MS = -62_135_596_800_000
const PAST_FORMATTED_MS = 253_402_300_800_000

const CODE_ZERO = 48
const CODE_DASH = 45
const CODE_COLON = 58
const CODE_DOT = 46
const CODE_T = 84
const CODE_Z = 90
/** The character code of the decimal digit of `value` at `place` (1, 10, 100 or 1000). */
const digitCode = (value: number, place: number) => CODE_ZERO + (Math.floor(value / place) % 10)

/**
 * `date.toISOString()`, about twice as fast: the civil date of a day count is H. Hinnant's
 * `civil_from_days`, and the text is made in one `String.fromCharCode` from its 24 character
 * codes. Years outside 1..9999 and invalid dates are left to `toISOString` (which throws on an
 * invalid date).
 */
export const formatTimestamp = (date: Date): string => {
  const ms = date.getTime()
  if (!(ms >= FIRST_FORMATTED_MS && ms < PAST_FORMATTED_MS)) return date.toISOString()
  const days = Math.floor(ms / MS_PER_DAY)
  let rest = ms - days * MS_PER_DAY
  const shifted = days + 719_468
  const era = Math.floor(shifted / 146_097)
  const dayOfEra = shifted - era * 146_097
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365
  )
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const monthIndex = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * monthIndex + 2) / 5) + 1
  const month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  const hours = Math.floor(rest / 3_600_000)
  rest -= hours * 3_600_000
  const minutes = Math.floor(rest / 60_000)
  rest -= minutes * 60_000
  const seconds = Math.floor(rest / 1000)
  const millis = rest - seconds * 1000
  return String.fromCharCode(
    digitCode(year, 1000), digitCode(year, 100), digitCode(year, 10), digitCode(year, 1), CODE_DASH,
    digitCode(month, 10), digitCode(month, 1), CODE_DASH, digitCode(day, 10), digitCode(day, 1), CODE_T,
    digitCode(hours, 10), digitCode(hours, 1), CODE_COLON, digitCode(minutes, 10), digitCode(minutes, 1), CODE_COLON,
    digitCode(seconds, 10), digitCode(seconds, 1), CODE_DOT, digitCode(millis, 100), digitCode(millis, 10), digitCode(millis, 1),
    CODE_Z
  )
}

/** Assigning `__proto__` would set the copy's prototype; it must be an own key, as in the original. */
const setOwn = (target: Record<string, unknown>, key: string, value: unknown) => {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/**
 * A JSON-ready value (plain objects, arrays, strings, numbers, booleans, null) with every Date
 * replaced by its `formatTimestamp` text: `JSON.stringify(withTimestampsAsText(value))` is
 * `JSON.stringify(value)`. Objects and arrays that hold a Date somewhere are copied; those that
 * hold none are returned as they are, so the value itself is never changed.
 */
export const withTimestampsAsText = (value: unknown): unknown => {
  if (typeof value !== "object" || value === null) return value
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : formatTimestamp(value)
  if (Array.isArray(value)) {
    let copy: Array<unknown> | undefined
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index]
      const written = withTimestampsAsText(item)
      if (copy === undefined && written !== item) copy = value.slice(0, index)
      if (copy !== undefined) copy.push(written)
    }
    return copy ?? value
  }
  const keys = Object.keys(value)
  let copy: Record<string, unknown> | undefined
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index] as string
    const item = (value as Record<string, unknown>)[key]
    const written = withTimestampsAsText(item)
    if (copy === undefined && written !== item) {
      copy = {}
      for (let before = 0; before < index; before++) {
        const earlier = keys[before] as string
        setOwn(copy, earlier, (value as Record<string, unknown>)[earlier])
      }
    }
    if (copy !== undefined) setOwn(copy, key, written)
  }
  return copy ?? value
}
