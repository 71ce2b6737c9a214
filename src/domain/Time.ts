import { Clock, Effect } from "effect"

/**
 * How far ahead of ours a JWT's `iat` and `nbf` may be (its signer's clock running fast): a client
 * assertion's, a federated workload token's.
 */
export const ASSERTION_CLOCK_SKEW_SECONDS = 10

/** The current time from Effect's `Clock`, so `TestClock` controls every stored timestamp. */
export const currentDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/**
 * The one form of time the API accepts (RFC 3339 §5.6): `YYYY-MM-DDThh:mm:ss`, an optional
 * fraction of 1-9 digits, and an offset, `Z` or `±hh:mm` (`T` and `Z` in either case). The date must
 * exist (`2030-02-30` does not), hours run to 23 and seconds to 59 (no leap second, no `24:00:00`),
 * and the year, as written and in UTC, from 0001 to 9999: every instant accepted is one that
 * PostgreSQL stores, an ISO string shows and an export file holds as it was given.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

/** The earliest and the latest instant accepted: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z. */
export const EARLIEST_INSTANT = Date.parse("0001-01-01T00:00:00.000Z")
export const LATEST_INSTANT = Date.parse("9999-12-31T23:59:59.999Z")

const daysIn = (year: number, month: number) =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/**
 * The instant (milliseconds since the epoch) of an RFC 3339 date-time in the form above; undefined
 * when it is not one. A fraction beyond milliseconds is cut, never rounded up.
 */
export const parseRfc3339 = (text: string): number | undefined => {
  const match = RFC3339.exec(text)
  if (match === null) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  const offsetHours = match[10] === undefined ? 0 : Number(match[10])
  const offsetMinutes = match[11] === undefined ? 0 : Number(match[11])
  if (offsetHours > 23 || offsetMinutes > 59) return undefined
  const millis = Number((match[7] ?? "").padEnd(3, "0").slice(0, 3))
  // Date.UTC reads years 0-99 as 1900-1999: the year is set apart.
  const local = new Date(Date.UTC(2000, month - 1, day, hour, minute, second, millis))
  local.setUTCFullYear(year)
  const sign = match[9] === "-" ? -1 : 1
  const instant = local.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000
  return instant < EARLIEST_INSTANT || instant > LATEST_INSTANT ? undefined : instant
}
